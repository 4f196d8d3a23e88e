"""`python -m cepkit_app` runs the cepkit command line."""

import sys

from cepkit_app.cli import main

sys.exit(main())
