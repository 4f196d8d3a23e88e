"""Maximum sustainable throughput of every microbenchmark query on PySpark (quick suites).

For each quick suite of specs/suites/ (or --suites), each workload (or the first --per-suite of
each) gets the sustainable-throughput search of kit/cli/sustainable.py: fixed-rate runs, doubling
then bisecting the rate, backlog thresholds q^a (steady state) and q^b (abort), a confirming run
at 90 % of the found rate, validated. Prints one table: suite, workload, parameters, max
sustainable throughput (events/s, all streams), p50/p99 event-time latency and peak RSS of the
best sustainable step. Every step's run directory stays under --runs.

    .venv/bin/python benchmarks/micro_all.py [--suites filtering,joins] [--per-suite N]
           [--step-seconds 20] [--max-steps 7] [--start-rate [SUITE=]4000 ...] [--growth 4]
           [--precision 1.4]
           [--runs runs/micro-all] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Keep this script's folder off the import path (benchmarks/datagen.py would shadow `datagen`).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from kit.cli.micro_cmd import SUITE_NAMES  # noqa: E402
from kit.cli.micro_pipeline import MicroSuiteRequest, run_micro_suite  # noqa: E402
from kit.cli.sustainable import SearchConfig  # noqa: E402
from kit.paths import SPECS_DIR, fresh_path  # noqa: E402
from kit.workload import read_suite  # noqa: E402


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


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
    args = ap.parse_args()
    starts = _start_rates(args.start_rate)
    if starts is None:
        ap.error(f"--start-rate takes EPS, SUITE=EPS or WORKLOAD=EPS, got {args.start_rate}")
    rows = []
    started = time.time()
    for name in args.suites.split(","):
        suite = read_suite(SPECS_DIR / "suites" / f"{name}-quick.xml")
        keep = tuple(w.name for w in suite.workloads[:args.per_suite or len(suite.workloads)])
        search = SearchConfig(duration_s=args.step_seconds, max_steps=args.max_steps, max_rate_eps=args.max_rate,
                              start_rate_eps=starts.get(name, starts[""]), growth=args.growth,
                              start_rates=tuple((w, r) for w, r in starts.items() if w in keep),
                              precision=args.precision, validate_steps=False)
        req = MicroSuiteRequest(None, tuple(args.overrides), suite, fresh_path(Path(args.runs), name), keep)
        results = run_micro_suite(req, stage=lambda s: print(f"  {s}", file=sys.stderr, flush=True), search=search)
        for w, r in zip(req.selected(), results):
            best = r.best_step()
            streams = len(w.dataset.stream_names)
            # Unconfirmed (the 90 % run fell behind): the best step's rate, marked "no".
            found = r.sustainable_eps if r.sustainable_eps is not None else (best.rate_eps if best else None)
            rows.append((name, w.name, ", ".join(f"{p.name}={p.value}" for p in w.params),
                         None if found is None else found * streams,
                         None if r.lowest_failing_eps() is None else r.lowest_failing_eps() * streams, r.confirmed,
                         best.p50_ms if best else None, best.p99_ms if best else None,
                         best.peak_rss_mib if best else None, len(r.steps)))
    head = ("suite", "workload", "parameters", "max sustainable ev/s", "lowest failing ev/s", "confirmed",
            "p50 ms", "p99 ms", "peak RSS MiB", "steps")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for suite, wl, params, eps, fail, ok, p50, p99, rss, steps in rows:
        print(f"| {suite} | {wl} | {params} | {_fmt(eps, ',.0f')} | {_fmt(fail, ',.0f')} | {'yes' if ok else 'no'} | "
              f"{_fmt(p50, ',')} | {_fmt(p99, ',')} | {_fmt(rss, ',.0f')} | {steps} |")
    print(f"\n{len(rows)} workloads in {(time.time() - started) / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
