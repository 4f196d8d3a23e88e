#!/usr/bin/env bash
# The main job: set up, then run the quick Pairs benchmark end to end on local Spark (the standard
# profile's shape in about 2 minutes): data, strategies, the generated PySpark program, the run,
# validation. Ends with the verdict, the per-phase table, the p99 latency, the pscore and the
# report path. SF=32 (800 strategies, 20-30 K ticks/s) because its measurement interval holds 145
# MarketOrders: a p99 of fewer than 100 values is only their maximum (SF=1 has 6).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/cepkit pairs -c quick --sf 32 "$@"
