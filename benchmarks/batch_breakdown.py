"""Where the time of an engine run's micro-batches goes, from the harness run directory.

Reads the `batch` events the program printed (logs/engine.stdout.jsonl, specs/ENGINE_RUN.md) and
prints each program start's parts (the `started` event's startup_ms: the session, the source and
plan, the Python workers' warm-up, the query's start with Spark's Python data source planners and
batch 0), then, over the batches with input (and separately the first few, which pay start-up costs):
batch count, events per batch (and the source's rows, when its partitions turn events into fewer
rows, as the Pairs plan's partial aggregates do), and the mean and p90 of each of Spark's durationMs components
(latestOffset, getBatch, queryPlanning, addBatch — the query's actual work, including the
foreachBatch sink —, walCommit, commitOffsets, triggerExecution), addBatch's two halves as the
program timed them (collect: running the plan, operators and Python cores, rows to the driver;
sink: handing the rows to the harness), plus the stateful operators' update time (the state
API calls and the processor's own work), RocksDB load and changelog-write times, commit time and
state size at the end (all summed over the operator's tasks).

    .venv/bin/python benchmarks/batch_breakdown.py RUN/engine [--skip 3]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

PARTS = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")


def _events(batch: dict) -> int:
    """Driver events of a batch (its offsets; Spark's input rows in records from before they were
    kept, which equal them unless the source transforms its partitions)."""
    n = batch.get("events")
    return int(n if n is not None else batch.get("input_rows") or 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine_dir", help="a harness run directory (holds logs/engine.stdout.jsonl)")
    ap.add_argument("--skip", type=int, default=3, help="first batches with input counted as start-up")
    args = ap.parse_args()
    path = Path(args.engine_dir) / "logs" / "engine.stdout.jsonl"
    try:
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: cannot read: {e}")
    batches = [e for e in events if e.get("event") == "batch" and _events(e) > 0]
    if not batches:
        sys.exit(f"{path}: no batch with input recorded")
    for started in (e for e in events if e.get("event") == "started" and e.get("startup_ms")):
        parts = started["startup_ms"]       # each attempt's start-up, before its query waited for data
        print(f"start-up (attempt {started.get('attempt', 1)}): {sum(parts.values()) / 1000:.1f} s = "
              + ", ".join(f"{name} {ms / 1000:.1f} s" for name, ms in parts.items()))
    for title, group in (("start-up", batches[:args.skip]), ("steady", batches[args.skip:])):
        if not group:
            continue
        n = np.array([_events(b) for b in group])
        rows = np.array([b.get("input_rows") or 0 for b in group])
        also = f"; the source made {rows.mean():,.0f} rows of them" if (rows != n).any() else ""
        print(f"{title}: {len(group)} batches, {n.mean():,.0f} events/batch (max {n.max():,}){also}")
        for part in PARTS:
            ms = np.array([b["durations_ms"].get(part, 0) for b in group], dtype=float)
            print(f"  {part:>16}: mean {ms.mean():8.1f} ms   p90 {np.percentile(ms, 90):8.1f} ms")
        for part in ("collect", "sink"):
            ms = np.array([(b.get("foreach_batch") or {}).get(part, np.nan) for b in group], dtype=float)
            if np.isfinite(ms).any():
                print(f"  {'addBatch ' + part:>16}: mean {np.nanmean(ms):8.1f} ms   "
                      f"p90 {np.nanpercentile(ms, 90):8.1f} ms")
        stateful = [b for b in group if b["state"]]
        for label, key, custom in (("state updates", "allUpdatesTimeMs", False),
                                   ("state load", "rocksdbLoadLatencyMs", True),
                                   ("changelog write", "rocksdbChangeLogWriterCommitLatencyMs", True)):
            ms = [sum(((op.get("customMetrics") or {}) if custom else op).get(key) or 0 for op in b["state"])
                  for b in stateful]
            if any(ms):     # summed over the operator's partitions (tasks), which may run in parallel
                print(f"  {label:>16}: mean {np.mean(ms):8.1f} ms   p90 {np.percentile(ms, 90):8.1f} ms "
                      "(all tasks)")
        commits = [sum(op.get("commitTimeMs") or 0 for op in b["state"]) for b in stateful]
        if commits:
            last = group[-1]["state"]
            print(f"  {'state commit':>16}: mean {np.mean(commits):8.1f} ms; at the end "
                  + ", ".join(f"{op['operatorName']}: "
                              + (f"{op['numRowsTotal']:,} rows, " if op.get("numRowsTotal") is not None else "")
                              + f"{(op.get('memoryUsedBytes') or 0) / 2**20:,.2f} MiB" for op in last))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
