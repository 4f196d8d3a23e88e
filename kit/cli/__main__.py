"""`python -m kit.cli` runs the cepkit command line."""

import sys

from kit.cli import main

sys.exit(main())
