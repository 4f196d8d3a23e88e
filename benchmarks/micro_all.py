"""Maximum sustainable throughput of every microbenchmark query on PySpark (quick suites).

For each quick suite of kit/specs/suites/ (or --suites), each workload (or the first --per-suite of
each) gets the sustainable-throughput search of cepkit_app/pipelines/sustainable.py: fixed-rate runs, doubling
then bisecting the rate, backlog thresholds q^a (steady state) and q^b (abort), a confirming run
at 90 % of the found rate, validated. Prints one table: suite, workload, parameters, max
sustainable throughput (events/s, all streams), p50/p99 event-time latency with the number of
latencies behind them (the p99 with its 95 % interval, or saying it is merely the maximum of too
few), peak RSS and peak state-store memory of the best sustainable step. Every step's run
directory stays under --runs.

`--variants` (default: all) adds rows for the alternative plans of one query kind, searched the same
way: `native-window` runs the Q3 workloads on Spark's own sliding `window()` (run.time_windows =
native) to show what it costs against the core plan, `jdbc` the J3 workloads through Spark's JDBC
source (run.database_join = jdbc) instead of per-batch psycopg lookups.

    .venv/bin/python benchmarks/micro_all.py [--suites filtering,joins ('' for none)] [--per-suite N] [--workloads W1,W2]
           [--step-seconds 20] [--max-steps 7] [--start-rate [SUITE=]4000 ...] [--growth 4]
           [--precision 1.4] [--variants native-window,jdbc]
           [--runs runs/micro-all] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cepkit_app.pipelines.micro import MicroSuiteRequest, run_micro_suite
from cepkit_app.pipelines.micro_summary import p99_detail
from cepkit_app.pipelines.sustainable import SearchConfig
from kit.config import load_config
from kit.paths import fresh_path
from kit.shipped import SUITE_NAMES, suite_path
from kit.workload import TableJoin, TimeWindowAggregation, read_suite
from validator.micro_report import p99_cell

# name: (suite, settings, which of its workloads)
VARIANTS = {
    "native-window": ("time-windows", {"run.time_windows": "native"},
                      lambda w: any(isinstance(q, TimeWindowAggregation) for q in w.queries)),
    "jdbc": ("joins", {"run.database_join": "jdbc"},
             lambda w: any(isinstance(q, TableJoin) and q.storage == "database" for q in w.queries)),
}


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _query_kinds(workload) -> str:
    """The thesis' query names of a workload, e.g. "Q5 x16" for 16 window joins."""
    kinds = [q.thesis_name for q in workload.queries]
    return ", ".join(k if kinds.count(k) == 1 else f"{k} x{kinds.count(k)}" for k in dict.fromkeys(kinds))


def _start_rates(items: list[str]) -> dict[str, float] | None:
    """{suite or workload name: rate}, "" for the default; None when an item does not parse."""
    rates = {"": 4000.0}
    for item in items:
        name, _, eps = item.rpartition("=")
        try:
            rates[name] = float(eps)
        except ValueError:
            return None
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", default=",".join(s for s in SUITE_NAMES if s != "adaptivity"))
    ap.add_argument("--per-suite", type=int, default=None, help="only the first N workloads of each suite")
    ap.add_argument("--workloads", default="", help="only these workloads (comma-separated names)")
    ap.add_argument("--step-seconds", type=float, default=20.0)
    ap.add_argument("--max-steps", type=int, default=7)
    ap.add_argument("--max-rate", type=float, default=2_000_000.0)
    ap.add_argument("--start-rate", action="append", default=[], metavar="[SUITE|WORKLOAD=]EPS",
                    help="first rate tried, per stream (4000); SUITE=EPS or WORKLOAD=EPS sets it for one "
                         "suite or workload, e.g. filtering=524288, so a fast one does not spend its steps "
                         "getting there")
    ap.add_argument("--growth", type=float, default=4.0, help="rate factor per exploring step")
    ap.add_argument("--precision", type=float, default=1.4, help="stop bisecting when hi/lo is below this")
    ap.add_argument("--runs", default="runs/micro-all")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"alternative plans to add rows for ({', '.join(VARIANTS)}; '' for none)")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    if any(v not in VARIANTS for v in variants):
        ap.error(f"--variants takes names from {', '.join(VARIANTS)}, got {args.variants!r}")
    starts = _start_rates(args.start_rate)
    if starts is None:
        ap.error(f"--start-rate takes EPS, SUITE=EPS or WORKLOAD=EPS, got {args.start_rate}")
    head = ("suite", "workload", "query", "parameters", "max sustainable ev/s", "lowest failing ev/s",
            "confirmed", "latencies", "p50 ms", "p99 ms (95 % CI)", "peak RSS MiB", "state MiB", "steps")
    # Rows are printed as each suite finishes, so a long run shows its table as it goes.
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head), flush=True)
    count, started = 0, time.time()
    passes = [(name, name, {}, lambda w: True) for name in args.suites.split(",") if name]
    passes += [(f"{VARIANTS[v][0]} ({v})", *VARIANTS[v]) for v in variants]
    only = set(filter(None, args.workloads.split(",")))
    for label, name, settings, wanted in passes:
        suite = read_suite(suite_path(name, quick=True))
        keep = tuple(w.name for w in suite.workloads[:args.per_suite or len(suite.workloads)]
                     if wanted(w) and (not only or w.name in only))
        if not keep:
            continue
        search = SearchConfig(duration_s=args.step_seconds, max_steps=args.max_steps, max_rate_eps=args.max_rate,
                              start_rate_eps=starts.get(name, starts[""]), growth=args.growth,
                              start_rates=tuple((w, r) for w, r in starts.items() if w in keep),
                              precision=args.precision, validate_steps=False)
        req = MicroSuiteRequest(load_config(None, args.overrides, settings), suite,
                                fresh_path(Path(args.runs), label.replace(" (", "-").rstrip(")")), keep)
        results = run_micro_suite(req, stage=lambda s: print(f"  {s}", file=sys.stderr, flush=True), search=search)
        for w, r in zip(req.selected(), results):
            best = r.best_step()
            streams = len(w.dataset.stream_names)
            # Unconfirmed (the 90 % run fell behind): the best step's rate, marked "no".
            found = r.sustainable_eps if r.sustainable_eps is not None else (best.rate_eps if best else None)
            failing = r.lowest_failing_eps()
            detail = p99_detail(best)
            cells = (label, w.name, _query_kinds(w), ", ".join(f"{p.name}={p.value}" for p in w.params),
                     _fmt(None if found is None else found * streams, ",.0f"),
                     _fmt(None if failing is None else failing * streams, ",.0f"), "yes" if r.confirmed else "no",
                     _fmt(detail["latency_count"], ","), _fmt(best.p50_ms if best else None, ","),
                     p99_cell(best.p99_ms if best else None, detail["latency_count"], detail["p99_ci_low_ms"],
                              detail["p99_ci_high_ms"], missing="-"),
                     _fmt(best.peak_rss_mib if best else None, ",.0f"),
                     _fmt(best.state_mib if best else None, ",.1f"), str(len(r.steps)))
            print("| " + " | ".join(cells) + " |", flush=True)
            count += 1
    print(f"\n{count} workloads in {(time.time() - started) / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
