"""Benchmark of the Pairs data generator: ticks per second and peak memory.

Default: the standard 2-hour SF=1 dataset (about 45 million ticks), Parquet, one file, written to
a temporary directory that is removed afterwards. Peak RSS is sampled from this process with
psutil every 50 ms (the generator runs in this process).

    .venv/bin/python benchmarks/datagen.py [--sf N] [--format parquet|csv] [--quick] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from datagen.pairs import generate_pairs
from kit.config import load_config

from benchmarks_common import PeakRss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=int, default=1)
    ap.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    ap.add_argument("--files", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="the quick profile instead of the 2-hour one")
    ap.add_argument("--keep", metavar="DIR", help="keep the dataset in DIR instead of a temp dir")
    args = ap.parse_args()
    cfg = load_config(None, [f"pairs.scale_factor={args.sf}", f"pairs.format='{args.format}'",
                             f"pairs.file_count={args.files}", f"pairs.rate.quick={str(args.quick).lower()}"]).pairs
    tmp = None
    if args.keep:
        out = Path(args.keep)
    else:
        tmp = tempfile.mkdtemp(prefix="cepkit-bench-")
        out = Path(tmp) / "ds"
    try:
        with PeakRss() as rss:
            t0 = time.perf_counter()
            ds = generate_pairs(cfg, out)
            elapsed = time.perf_counter() - t0
        size = sum(f["bytes"] for f in ds.manifest["files"])
        print(f"dataset        : SF={args.sf} {'quick' if args.quick else 'standard'} profile, "
              f"{args.format}, {args.files} file(s)")
        print(f"ticks          : {ds.total_rows:,}")
        print(f"elapsed        : {elapsed:.1f} s")
        print(f"throughput     : {ds.total_rows / elapsed:,.0f} ticks/s")
        print(f"peak RSS       : {rss.peak / 2**20:,.0f} MiB")
        print(f"bytes on disk  : {size / 2**20:,.1f} MiB ({size / ds.total_rows:.2f} B/tick)")
        print(f"cpu            : {os.cpu_count()} cores")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
