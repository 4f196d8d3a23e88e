"""What the feed's challenge-response costs (specs/DRIVER.md, "Who may connect"): connections per
second (connect, handshake, one `stats`, close) and the feed's read throughput over one kept
connection (as the JVM and Python sources read), each with the run's secret and without one,
alternating, in this process (no engine).

    python benchmarks/wire_auth.py [--events N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from datagen.micro import generate_micro
from harness.config import DriverConfig
from harness.playback import Driver
from kit.config import MicroConfig, RateConfig
from kit.wire.auth import new_secret
from kit.wire.feed_client import DriverClient


def connections_per_s(port: int, secret: str | None, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        with DriverClient(port=port, secret=secret) as c:
            c.stats()
    return n / (time.perf_counter() - t0)


def read_eps(port: int, secret: str | None) -> float:
    with DriverClient(port=port, secret=secret) as c:
        total = c.info()["total_events"]
        c.begin()
        t0 = time.perf_counter()
        pos = 0
        while pos < total:
            end = c.latest_offset(after=pos, wait_ms=100)
            for batch in c.iter_batches(pos, end):
                pos += batch.num_rows
        return total / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "events"
        generate_micro(MicroConfig(streams=1, attributes=2, file_count=2,
                                   rate=RateConfig(profile="constant", basis_rate_eps=args.events / 20.0,
                                                   duration_s=20.0)), data)
        out = {"secret": {"conn": [], "eps": []}, "none": {"conn": [], "eps": []}}
        for _ in range(args.rounds):
            for mode in ("secret", "none"):
                secret = new_secret() if mode == "secret" else None
                with Driver(DriverConfig(data, pacing="pull", stamp="send", lead_ms=0, align_ms=1), secret=secret) as drv:
                    out[mode]["conn"].append(connections_per_s(drv.port, secret, args.connections))
                    out[mode]["eps"].append(read_eps(drv.port, secret))
        for mode, figures in out.items():
            print(f"{mode:6s}  connections/s median {statistics.median(figures['conn']):8.0f} "
                  f"({', '.join(f'{x:.0f}' for x in figures['conn'])})   read ev/s median "
                  f"{statistics.median(figures['eps']):11,.0f} ({', '.join(f'{x:,.0f}' for x in figures['eps'])})")


if __name__ == "__main__":
    main()
