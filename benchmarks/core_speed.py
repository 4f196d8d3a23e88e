"""Speed of the microbenchmark cores on their own, without Spark: how many events per second each
query kind's core (runtime_common/micro_cores/) processes, so a Spark figure can be read against
what the Python inside the stateful operator costs.

For the first workload of each stateful quick suite (or --workloads), a synthetic input at the
workload's shape (IDs uniform on 1..maxId, attributes uniform on [1, 100), TS at --rate events/s
per stream, streams merged by TS) is cut into micro-batches of --batch-ms of event time and fed
to the core, its state stored and read back between batches as the Spark operator does. Prints
one row per workload and rate: events, output rows, the core's time, events/s and rows/s (the
best of --repeat runs). Run it alone on the machine.

    .venv/bin/python benchmarks/core_speed.py [--rates 10000,100000] [--seconds 3] [--batch-ms 1000]
           [--workloads W1,W2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from kit.shipped import suite_path
from kit.workload import read_suite
from runtime_common.micro_cores import CORES, core_for, state_codec
from translators.micro_literal import query_literal

SUITES = ("count-windows", "time-windows", "joins", "patterns")


def events_for(workload, rate_eps: float, seconds: float, seed: int = 7) -> pd.DataFrame:
    """The workload's streams at `rate_eps` each, merged in event order, as a program sees them."""
    rng = np.random.default_rng(seed)
    ds, frames = workload.dataset, []
    n = int(rate_eps * seconds)
    for name in ds.stream_names:
        cols = {"ID": rng.integers(1, ds.max_id + 1, n).astype(np.int32)}
        for a in range(1, ds.attributes + 1):
            cols[f"A{a}"] = rng.uniform(1, 100, n)
        cols["TS"] = np.sort(rng.integers(0, int(seconds * 1000), n)).astype(np.int64)
        frames.append(pd.DataFrame(cols).assign(stream=name))
    ev = pd.concat(frames, ignore_index=True).sort_values(["TS", "stream"], kind="stable", ignore_index=True)
    ev["offset"] = np.arange(len(ev), dtype=np.int64)
    ev["ingestTS"] = ev["TS"]
    return ev


def run_core(q: dict, events: pd.DataFrame, batch_ms: int) -> tuple[int, float]:
    """(output rows, seconds) for the core over `events` in batches of `batch_ms` of event time."""
    core = core_for(q)
    state = core.initial_state()
    cuts = np.searchsorted(events["TS"].to_numpy(), np.arange(0, int(events["TS"].max()) + batch_ms, batch_ms))
    rows, spent = 0, 0.0
    for a, b in zip(cuts[:-1], cuts[1:]):
        batch = events.iloc[a:b].reset_index(drop=True)
        t0 = time.perf_counter()
        state = state_codec.round_trip(state)
        rows += len(core.process(state, batch))
        spent += time.perf_counter() - t0
    return rows, spent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="10000,100000", help="events/s per stream, comma-separated")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--batch-ms", type=int, default=1000)
    ap.add_argument("--workloads", default="", help="workload names (default: first of each stateful quick suite)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    wanted = set(filter(None, args.workloads.split(",")))
    picks = []
    for name in SUITES:
        workloads = read_suite(suite_path(name, quick=True)).workloads
        picks += [w for w in workloads if w.name in wanted] if wanted else workloads[:1]
    head = ("workload", "query", "ev/s per stream", "events", "output rows", "core s", "core ev/s", "rows/s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head), flush=True)
    for w in picks:
        for rate in (float(r) for r in args.rates.split(",")):
            events = events_for(w, rate, args.seconds)
            for q in (query_literal(q) for q in w.queries):
                if q["kind"] not in CORES:
                    continue
                rows, best = 0, float("inf")
                for _ in range(args.repeat):
                    rows, spent = run_core(q, events, args.batch_ms)
                    best = min(best, spent)
                cells = (w.name, f"{q['id']} ({q['kind']})", f"{rate:,.0f}", f"{len(events):,}", f"{rows:,}",
                         f"{best:.3f}", f"{len(events) / best:,.0f}", f"{rows / best:,.0f}")
                print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
