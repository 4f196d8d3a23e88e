#!/usr/bin/env bash
# Set up, then run the test suite (no JVM needed for the tests so far).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
