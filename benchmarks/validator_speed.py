"""Benchmark of the validator's Pairs reference engine: time to compute the expected answers.

Default: the standard 2-hour SF=1 dataset (about 45 million ticks) and its 25 strategies from the
query generator. The dataset is generated into a temporary directory first (not timed) unless
--data points at an existing one.

    .venv/bin/python benchmarks/validator_speed.py [--sf N] [--quick] [--data DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from datagen.pairs import generate_pairs
from kit.config import load_config
from kit.manifest import load_manifest
from kit.workload import load_aux
from querygen.strategies import strategies_for
from validator.pairs_reference import StrategyParams, compute_reference

from benchmarks_common import PeakRss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--data", metavar="DIR", help="an existing Pairs dataset instead of a fresh one")
    args = ap.parse_args()
    tmp = None
    try:
        if args.data:
            data = Path(args.data)
        else:
            tmp = tempfile.mkdtemp(prefix="cepkit-bench-")
            data = Path(tmp) / "ds"
            cfg = load_config(None, [f"pairs.scale_factor={args.sf}",
                                     f"pairs.rate.quick={str(args.quick).lower()}"]).pairs
            t0 = time.perf_counter()
            ds = generate_pairs(cfg, data)
            print(f"dataset        : {ds.total_rows:,} ticks generated in {time.perf_counter() - t0:.1f} s (not timed)")
        aux = load_aux(data)
        strategies = [StrategyParams.of(s) for s in strategies_for(aux, aux.seed or 0).strategies]
        with PeakRss() as rss:
            t0 = time.perf_counter()
            ref = compute_reference(data, strategies)
            elapsed = time.perf_counter() - t0
        print(f"strategies     : {len(strategies)}")
        print(f"expected       : {len(ref.indicators):,} Indicator rows, {len(ref.orders):,} MarketOrder rows")
        ticks = int(load_manifest(data).doc["total_rows"])
        print(f"elapsed        : {elapsed:.1f} s (target: 120 s for the standard SF=1 run)")
        print(f"rate           : {ticks / elapsed / 1e6:.2f} M ticks/s ({ticks:,} ticks)")
        print(f"peak RSS       : {rss.peak / 2**20:,.0f} MiB")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
