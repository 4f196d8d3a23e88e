"""`python -m cepkit_app.cli` runs the cepkit command line (as `python -m cepkit_app` does)."""

import sys

from cepkit_app.cli import main

sys.exit(main())
