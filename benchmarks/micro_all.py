"""Maximum sustainable throughput of every microbenchmark query on PySpark (quick suites).

For each quick suite of kit/specs/suites/ (or --suites), each workload (or the first --per-suite of
each) gets the sustainable-throughput search of cepkit_app/pipelines/sustainable.py: fixed-rate runs, doubling
then bisecting the rate, backlog thresholds q^a (steady state) and q^b (abort), a confirming run
at a fraction of the found rate, validated. Prints one table: suite, workload, parameters, max
sustainable throughput (events/s, all streams), the confirming run's p50/p99 event-time latency
with the number of latencies behind them (the p99 with its 95 % interval, or saying it is merely
the maximum of too few) over the whole run and over its steady tail (the last 30 % of the release
interval, where sustainability is judged: without the start-up catch-up), peak RSS and peak
state-store memory of the best sustainable step, and the target of issue 17 where it sets one. Every step is validated (`--no-validate-steps` to skip), and the
confirming run is at `--confirm-fraction` (0.8) of the found rate, so the latencies shown are
those at 80 % of the maximum. Every step's run directory stays under --runs; a chart of the
table (max sustainable rate per workload against its target, and throughput against the number
of queries for the scalability suite) is written beside them as micro_all.png.

`--variants` (default: all) adds rows for the alternative plans of one query kind, searched the same
way: `native-window` runs the Q3 workloads on Spark's own operators (run.work = operators: its
sliding `window()`) to show what they cost against the default plan, `jdbc` the J3 workloads
through Spark's JDBC source (run.database_join = jdbc) instead of per-batch psycopg lookups,
`driver-patterns` the patterns on the kit's core on the driver (run.work = driver, opt-in)
instead of the Java logic keyed in Spark's stateful operator.

    .venv/bin/python benchmarks/micro_all.py [--suites filtering,joins ('' for none)] [--per-suite N] [--workloads W1,W2]
           [--step-seconds 20] [--max-steps 7] [--start-rate [SUITE=]4000 ...] [--growth 4]
           [--precision 1.4] [--variants native-window,jdbc] [--confirm-fraction 0.8]
           [--no-validate-steps] [--runs runs/micro-all] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from cepkit_app.pipelines.micro import MicroSuiteRequest, run_micro_suite
from cepkit_app.pipelines.micro_summary import p99_detail
from cepkit_app.pipelines.sustainable import SearchConfig, Step
from kit.config import load_config
from kit.errors import CepkitError
from kit.paths import fresh_path
from kit.shipped import SUITE_NAMES, suite_path
from kit.workload import INPUT_TS, Pattern, TableJoin, TimeWindowAggregation, read_suite
from validator.latency import event_time_latency_ms, latency_stats
from validator.micro_report import p99_cell
from validator.outputlog import read_output_log

# name: (suite, settings, which of its workloads)
VARIANTS = {
    "native-window": ("time-windows", {"run.work": "operators"},
                      lambda w: any(isinstance(q, TimeWindowAggregation) for q in w.queries)),
    "jdbc": ("joins", {"run.database_join": "jdbc"},
             lambda w: any(isinstance(q, TableJoin) and q.storage == "database" for q in w.queries)),
    "driver-patterns": ("patterns", {"run.work": "driver"},
                        lambda w: any(isinstance(q, Pattern) and q.key for q in w.queries)),
}


# Issue 17's targets (events/s over all streams) by the thesis' query name; scalability: N=64 >= 25 % of N=1.
TARGETS = {"Q1": 1_000_000, "Q2": 250_000, "Q3": 250_000, "Q4": 250_000, "J1": 150_000, "J2": 300_000,
           "J3": 100_000, "Q7": 100_000}


def _target(workload) -> float | None:
    """The target rate of a one-kind workload (the first query's kind; J1 for a window join)."""
    name = workload.queries[0].thesis_name
    name = "J1" if name == "Q5" else name
    return TARGETS.get(name) if workload.query_set.sharing != "identical" else None


def steady_latency(step: Step | None, tail_fraction: float) -> dict:
    """p50/p99 event-time latency of a step's rows triggered in the last `tail_fraction` of its
    release interval: the steady state the search judges sustainability on, without the start-up
    catch-up (the first batch pays for Spark's first job, so its events wait seconds)."""
    if step is None:
        return {}
    engine = Path(step.run_dir) / "engine"
    try:
        run = json.loads((engine / "run.json").read_text())
        start, end = run["timings"]["run_start_wall_ms"], run["timings"]["driver_finished_ms"]
        log = read_output_log(engine / "outputs")
    except (OSError, KeyError, ValueError, CepkitError):
        return {}
    cut = end - (end - start) * tail_fraction
    lat = [event_time_latency_ms(df[df[INPUT_TS] >= cut]) for df in (log.stream(s) for s in log.streams)]
    stats = latency_stats(np.concatenate(lat) if lat else np.array([], dtype=np.int64))
    return {"count": stats.count, "p50": stats.p50_ms, "p99": stats.p99_ms}


def draw_chart(rows: list[dict], path: Path) -> Path:
    """Bars of the max sustainable rate per workload (log scale) with each target as a tick; beside
    them, the scalability workloads' rate against their number of queries."""
    scal = sorted((r for r in rows if r["queries"] > 1 or r["suite"].startswith("scalability")),
                  key=lambda r: r["queries"])
    fig = Figure(figsize=(11, 0.42 * len(rows) + 2.2), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 2 if scal else 1, 1)
    names = [r["workload"] for r in rows][::-1]
    found = [r["found"] or 0 for r in rows][::-1]
    ax.barh(names, found, color=["#059669" if r["target"] and (r["found"] or 0) >= r["target"] else "#2563eb"
                                 for r in rows][::-1])
    for i, r in enumerate(rows[::-1]):
        if r["target"]:
            ax.plot([r["target"]] * 2, [i - 0.4, i + 0.4], color="#dc2626", lw=2)
        ax.text(max(found[i], 1), i, f" {found[i]:,.0f}", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("max sustainable events/s (all streams); red tick: target")
    ax.set_title("Microbenchmarks on PySpark, 2 cores")
    ax.tick_params(axis="y", labelsize=7.5)
    if scal:
        ax2 = fig.add_subplot(1, 2, 2)
        ax2.plot([r["queries"] for r in scal], [r["found"] or 0 for r in scal], marker="o", color="#2563eb")
        if scal[0]["found"]:
            ax2.axhline(0.25 * scal[0]["found"], color="#dc2626", ls="--", lw=1, label="25 % of N=1")
            ax2.legend()
        ax2.set_xscale("log", base=2)
        ax2.set_xlabel("identical queries N")
        ax2.set_ylabel("max sustainable events/s")
        ax2.set_title("Scalability (identical window joins)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", facecolor="white")
    return path


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
    ap.add_argument("--confirm-fraction", type=float, default=0.8,
                    help="the confirming run's rate as a fraction of the found one; its latencies are shown")
    ap.add_argument("--no-validate-steps", dest="validate_steps", action="store_false",
                    help="validate only the confirming run (faster; the found rate then rests on unvalidated runs)")
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
            "confirmed", "latencies", "p50 ms", "p99 ms (95 % CI)", "steady p50 / p99 ms (n)", "peak RSS MiB",
            "state MiB", "steps", "target")
    # Rows are printed as each suite finishes, so a long run shows its table as it goes.
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head), flush=True)
    count, started, chart_rows = 0, time.time(), []
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
                              precision=args.precision, validate_steps=args.validate_steps,
                              confirm_fraction=args.confirm_fraction)
        req = MicroSuiteRequest(load_config(None, args.overrides, settings), suite,
                                fresh_path(Path(args.runs), label.replace(" (", "-").rstrip(")")), keep)
        results = run_micro_suite(req, stage=lambda s: print(f"  {s}", file=sys.stderr, flush=True), search=search)
        for w, r in zip(req.selected(), results):
            best = r.best_step()
            # Latencies are the confirming run's (at --confirm-fraction of the found rate).
            conf = r.confirm_step()
            steady = steady_latency(conf, search.tail_fraction)
            streams = len(w.dataset.stream_names)
            # Unconfirmed (the 90 % run fell behind): the best step's rate, marked "no".
            found = r.sustainable_eps if r.sustainable_eps is not None else (best.rate_eps if best else None)
            failing = r.lowest_failing_eps()
            detail = p99_detail(conf)
            cells = (label, w.name, _query_kinds(w), ", ".join(f"{p.name}={p.value}" for p in w.params),
                     _fmt(None if found is None else found * streams, ",.0f"),
                     _fmt(None if failing is None else failing * streams, ",.0f"), "yes" if r.confirmed else "no",
                     _fmt(detail["latency_count"], ","), _fmt(conf.p50_ms if conf else None, ","),
                     p99_cell(conf.p99_ms if conf else None, detail["latency_count"], detail["p99_ci_low_ms"],
                              detail["p99_ci_high_ms"], missing="-"),
                     (f"{_fmt(steady['p50'], ',')} / {_fmt(steady['p99'], ',')} ({steady['count']:,})"
                      if steady else "-"),
                     _fmt(best.peak_rss_mib if best else None, ",.0f"),
                     _fmt(best.state_mib if best else None, ",.1f"), str(len(r.steps)), _fmt(_target(w), ",.0f"))
            print("| " + " | ".join(cells) + " |", flush=True)
            chart_rows.append({"suite": label, "workload": w.name, "queries": len(w.queries), "target": _target(w),
                               "found": None if found is None else found * streams})
            count += 1
    if chart_rows:
        chart = draw_chart(chart_rows, fresh_path(Path(args.runs), "micro_all.png"))
        print(f"chart: {chart}", file=sys.stderr)
    print(f"\n{count} workloads in {(time.time() - started) / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
