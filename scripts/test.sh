#!/usr/bin/env bash
# Set up (with the test-only tools), then run the test suite: by default every test that starts no
# engine plus the smoke run on local Spark (tests/conftest.py; pyproject.toml lists the markers).
# The default run spreads its tests over two processes (pytest-xdist); a test that starts an engine
# still runs alone on the machine (tests/conftest.py). With a -m selection (the engine stages: every
# test in them starts an engine, one after another) or your own -n, pytest runs as you say.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
workers=(-n "${CEPKIT_TEST_WORKERS:-2}")
for arg in "$@"; do
  case "$arg" in -m|-m*|-n|-n*|--numprocesses*) workers=() ;; esac
done
exec .venv/bin/python -m pytest -q "${workers[@]}" "$@"
