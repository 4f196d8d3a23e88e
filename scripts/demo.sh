#!/usr/bin/env bash
# The main job: set up, then run the quick Pairs benchmark end to end on local Spark (SF=1, the
# standard profile's shape in about 2 minutes): data, strategies, the generated PySpark program,
# the run, validation. Ends with the verdict, the p99 latency, the pscore and the report path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/cepkit pairs -c quick "$@"
