"""Benchmark of the load driver with no engine attached: release lateness and pull rate.

For each rate (default 20,000 and 100,000 events/s) it generates a microbenchmark dataset of that
rate with `cepkit datagen micro` (a subprocess), starts the driver as its own process
(`harness.process.DriverProcess`) and pulls from it in this process as fast as events are
released: wait for more than the pulled offset, read the new range, repeat. It prints

- release lateness per release step (actual release time - due time): p50, p99, p99.9, max, as
  the driver measured it;
- the client's pull rate (events pulled / seconds from run start to the last pull) and its
  delivery delay (time the client held an event - the event's TS), p50/p99;
- the replay rate: the whole run read again from offset 0 as fast as possible afterwards;
- the driver process's CPU use.

Pacing "rate" spaces events evenly at the rate; "tickts" replays the dataset's own Poisson
arrivals (speed 1), which are burstier. Target: lateness p99 under 5 ms at 20,000 events/s.

    .venv/bin/python benchmarks/driver.py [--rates 20000,100000] [--seconds 20] [--pacing rate,tickts]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from harness.config import DriverConfig
from harness.process import DriverProcess


def generate(rate_eps: int, seconds: float, out: Path) -> None:
    cmd = [sys.executable, "-m", "cepkit_app.cli", "datagen", "micro", "--set", f"micro.rate.basis_rate_eps={rate_eps}",
           "--set", f"micro.rate.duration_s={seconds}", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"dataset generation failed: {done.stderr.strip()}")


def pull_everything(drv: DriverProcess, total: int, poll_ms: float) -> dict:
    """Read every event as soon as it is released (or every poll_ms, like an engine's
    micro-batches); time and delivery delay per read."""
    client = drv.client()
    run_start_ms = client.begin()      # the driver was started with hold: the run starts now
    pulled, reads, delays = 0, 0, []
    while pulled < total:
        if poll_ms:
            time.sleep(poll_ms / 1000.0)
        n = client.latest_offset(after=pulled, wait_ms=500)
        if n <= pulled:
            continue
        table = client.read(pulled, n)
        got_ms = time.time() * 1000.0
        # The oldest event of the read waited longest: its delay bounds the read's.
        delays.append(got_ms - table.column("TS")[0].as_py())
        pulled += table.num_rows
        reads += 1
    end_ms = time.time() * 1000.0
    t0 = time.perf_counter()
    replayed = sum(b.num_rows for b in client.iter_batches(0, total))
    replay_s = time.perf_counter() - t0
    client.close()
    return {"pulled": pulled, "reads": reads, "pull_rate": pulled / max(1e-9, (end_ms - run_start_ms) / 1000.0),
            "delay_p50": float(np.percentile(delays, 50)), "delay_p99": float(np.percentile(delays, 99)),
            "replay_rate": replayed / replay_s}


def run_one(dataset: Path, rate_eps: int, pacing: str, poll_ms: float) -> dict:
    cfg = DriverConfig(dataset, pacing=pacing, rate_eps=float(rate_eps) if pacing == "rate" else None,
                       hold=True, lead_ms=500, align_ms=1, port=0)
    drv = DriverProcess(cfg)
    proc = psutil.Process(drv.proc.pid)
    cpu0 = proc.cpu_times()
    t0 = time.perf_counter()
    try:
        pulled = pull_everything(drv, drv.ready["total_events"], poll_ms)
        cpu1 = proc.cpu_times()
        wall = time.perf_counter() - t0
    finally:
        stats = drv.stop()
    cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / wall * 100.0
    return {"rate": rate_eps, "pacing": pacing, "events": drv.ready["total_events"], "cpu": cpu,
            **stats["lateness"], **pulled}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="20000,100000", help="events/s, comma-separated")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each run")
    ap.add_argument("--pacing", default="rate,tickts", help="rate, tickts or both")
    ap.add_argument("--poll-ms", type=float, default=0.0,
                    help="pause between reads (0: read as soon as anything is released)")
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    pacings = [p for p in args.pacing.split(",") if p]
    rows = []
    with tempfile.TemporaryDirectory(prefix="cepkit-driver-bench-") as tmp:
        for rate in rates:
            ds = Path(tmp) / f"micro-{rate}"
            generate(rate, args.seconds, ds)
            for pacing in pacings:
                rows.append(run_one(ds, rate, pacing, args.poll_ms))
                r = rows[-1]
                print(f"{rate:>8,} ev/s {pacing:<6}: lateness p50 {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms, "
                      f"max {r['max_ms']:.3f} ms; pull {r['pull_rate']:,.0f} ev/s", file=sys.stderr, flush=True)
    print(f"driver benchmark: {os.cpu_count()} cores, {args.seconds:g} s per run, client in another process, "
          + (f"reading every {args.poll_ms:g} ms" if args.poll_ms else "reading as soon as events are released"))
    print(f"{'rate ev/s':>10} {'pacing':<7} {'events':>10} {'steps':>7} {'late p50':>9} {'p99':>7} {'p99.9':>7} "
          f"{'max ms':>7} {'pull ev/s':>10} {'reads':>6} {'delay p50':>10} {'p99':>7} {'replay ev/s':>12} {'cpu %':>6}")
    for r in rows:
        print(f"{r['rate']:>10,} {r['pacing']:<7} {r['events']:>10,} {r['steps']:>7,} {r['p50_ms']:>9.3f} "
              f"{r['p99_ms']:>7.3f} {r['p999_ms']:>7.3f} {r['max_ms']:>7.3f} {r['pull_rate']:>10,.0f} "
              f"{r['reads']:>6,} {r['delay_p50']:>10.2f} {r['delay_p99']:>7.2f} {r['replay_rate']:>12,.0f} "
              f"{r['cpu']:>6.1f}")


if __name__ == "__main__":
    main()
