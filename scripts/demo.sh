#!/usr/bin/env bash
# The main job: set up, then generate the quick Pairs dataset (SF=1, the standard profile's
# shape in about 2 minutes of simulated time). Prints where the files went and ticks/s.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/cepkit datagen pairs -c specs/configs/quick.toml "$@"
