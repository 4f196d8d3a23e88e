"""Engines side by side (default Spark vs Flink): Pairs at a few scale factors, the first workload
of each quick microbenchmark suite at its fixed rate, and that workload's maximum sustainable
throughput, every engine on the very same inputs.

Pairs, quick profile, for each SF of --sfs: the first engine's run generates the dataset and the
strategies, every other engine replays those very files (as `cepkit pairs --engine spark,flink`
does), each through cepkit_app.pipelines.pairs.run_pairs_pipeline with run.engine set to it.
Micro: the first workload of each quick suite of --suites, on each engine, through
cepkit_app.pipelines.micro.run_micro_suite at the workload's fixed rate, validated (the dataset is
generated from the same seed for every engine; a J3 workload gets its private PostgreSQL from the
pipeline). After each SF and each workload the side-by-side page of its runs is written
(validator.compare_page.write_comparison: POINT/compare/compare.html) and its path printed.
Sustainable throughput: the first workload of each quick suite of --search-suites (default: those
of --suites), on each engine, through the search of `cepkit micro --sustainable`
(cepkit_app/pipelines/sustainable.py; shared with benchmarks/sustainable_compare.py): steps of
--search-step-seconds, at most --search-max-steps runs, from --search-start-rate per stream, each
validated; the rate is given over all the workload's streams, marked when the confirmation did not
hold or no rate tried failed (then it is a lower bound). --skip-sustainable leaves it out.

    RUNS/pairs-sf<SF>/<engine>/          a `cepkit pairs` run directory per engine
    RUNS/micro-<workload>/<engine>/      a `cepkit micro` run directory (one workload) per engine
    RUNS/sustainable-<workload>/<engine>/  a `cepkit micro --sustainable` run directory per engine
    RUNS/<point>/compare/                the side-by-side page of the point's runs
    RUNS/engine_compare.jsonl            one JSON object per (engine, point), appended as each ends
    RUNS/engine_compare.md, .png         the closing tables (SF or workload rows, engine columns;
                                         last the summary: each engine's highest Pairs SF with a
                                         MarketOrder p99 under 1 s and its sustainable rates) and
                                         a chart of the p99s

Every run is validated; each p99 comes with the number of orders (Pairs) or latencies (micro)
behind it and its 95 % interval; mean CPU is in % of one core, peak RSS that of the engine's
process tree, duration the harness's (start-up included). A point that raises is recorded with
status "error" and the comparison goes on; Ctrl-C stops it and writes the tables of what finished.

Run it ALONE on the machine: no tests, no helpers, no other engine job. On 2 cores a concurrent
JVM or test run skews every figure severalfold. The full comparison, as the closing note runs it:

    .venv/bin/python benchmarks/engine_compare.py --runs runs/engine-compare

(defaults: --engines spark,flink --sfs 1,4,11 --suites all --master 'local[2]'; the closing
table's notes give the version, the command and the minutes it took). The searches take the
longest: each step is a whole run (~40-70 s at 20 s a step), so 7 suites x 2 engines x at most 6
steps is up to ~1.5 hours on top of the rest; a short try:

    .venv/bin/python benchmarks/engine_compare.py --engines flink --sfs 1 --suites filtering \\
        --search-max-steps 2 --search-step-seconds 5 --runs /tmp/engine-compare-try
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
import traceback
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks_common import checkout_version
from sustainable_compare import (add_search_options, confirmed_cell, failing_cell, run_search, search_config,
                                 sustainable_cell)
from cepkit_app.pipelines.micro import MicroSuiteRequest, run_micro_suite
from cepkit_app.pipelines.pairs import PairsRunRequest, run_pairs_pipeline
from kit.atomic import atomic_write, check_parent
from kit.config import load_config
from kit.engines import engine_list
from kit.errors import CepkitError
from kit.jsonfile import dumps_json, read_json_object
from kit.shipped import SUITE_NAMES, suite_path
from kit.workload import read_suite
from validator.compare_page import write_comparison
from validator.micro_report import p99_cell
from validator.order_stats import interval_text

DEFAULT_SFS = "1,4,11"
# Columns besides the registered engines: an engine run another way, as (engine, its settings).
# Spark's real-time mode (specs/TRANSLATION.md): a workload or Pairs plan it does not admit is
# recorded with the translator's one-line refusal.
VARIANTS = {"spark-realtime": ("spark", ('run.trigger="realtime"',))}
UNDER_MS = 1000.0       # the summary's Pairs latency bound: the highest SF with a MarketOrder p99 below it


# -- points: one (engine, SF) or (engine, workload) run as a JSON-able dict ---------------------

def _mib(n: int | None) -> float | None:
    return None if n is None else round(n / 2**20, 1)


def read_pscore(run_dir: Path) -> dict | None:
    """The pscore block of a Pairs run's report/summary.json (p99 order count and intervals), or None."""
    path = Path(run_dir) / "report" / "summary.json"
    try:
        return read_json_object(path).get("pscore") if path.exists() else None
    except CepkitError:
        return None


def pairs_point(engine: str, sf: int, outcome, pscore: dict | None, wall_s: float) -> dict:
    """A Pairs point from the pipeline's PairsRunOutcome and its summary's pscore block."""
    eng = outcome.engine
    p = pscore or {}
    p99 = round(p["p99_latency_s"] * 1000) if pscore else outcome.p99_ms
    return {"bench": "pairs", "engine": engine, "sf": sf, "status": outcome.status, "message": outcome.message,
            "verdict": outcome.verdict, "p99_ms": p99, "orders": p.get("mi_rows"),
            "p99_ci_low_ms": p.get("p99_ci_low_ms"), "p99_ci_high_ms": p.get("p99_ci_high_ms"),
            "pscore": outcome.pscore, "pscore_ci_low": p.get("pscore_ci_low"),
            "pscore_ci_high": p.get("pscore_ci_high"),
            "mean_cpu_percent": getattr(eng, "mean_cpu_percent", None),
            "peak_rss_mib": _mib(getattr(eng, "peak_rss_bytes", None)),
            "duration_s": getattr(eng, "duration_s", None), "wall_s": round(wall_s, 1),
            "run": str(outcome.run_dir)}


def engine_duration(workload_dir: Path) -> float | None:
    """timings.duration_s of a micro workload's engine/run.json, or None (not run)."""
    path = Path(workload_dir) / "engine" / "run.json"
    try:
        return (read_json_object(path).get("timings") or {}).get("duration_s") if path.exists() else None
    except CepkitError:
        return None


def micro_point(engine: str, suite: str, result, duration_s: float | None, wall_s: float, run_dir: Path) -> dict:
    """A micro point from the pipeline's WorkloadResult."""
    return {"bench": "micro", "engine": engine, "suite": suite, "workload": result.workload,
            "status": result.status, "message": result.message, "verdict": result.verdict,
            "p50_ms": result.p50_ms, "p99_ms": result.p99_ms, "latency_count": result.latency_count,
            "p99_ci_low_ms": result.p99_ci_low_ms, "p99_ci_high_ms": result.p99_ci_high_ms,
            "mean_cpu_percent": result.mean_cpu_percent, "peak_rss_mib": result.peak_rss_mib,
            "duration_s": duration_s, "wall_s": round(wall_s, 1), "run": str(run_dir)}


def error_point(bench: str, engine: str, key: dict, error: BaseException, wall_s: float, run_dir: Path) -> dict:
    """A point whose pipeline raised: status "error", the exception in one line."""
    return {"bench": bench, "engine": engine, **key, "status": "error", "verdict": "NOT VALIDATED",
            "message": f"{type(error).__name__}: {error}".splitlines()[0], "wall_s": round(wall_s, 1),
            "run": str(run_dir)}


# -- tables: one row per (SF or workload, measure), one column per engine ------------------------

def _fmt(v, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def _p99(pt: dict, count_key: str) -> str:
    try:
        return p99_cell(pt.get("p99_ms"), pt.get(count_key), pt.get("p99_ci_low_ms"), pt.get("p99_ci_high_ms"))
    except CepkitError:          # an inconsistent interval: the bare value
        return _fmt(pt.get("p99_ms"), ",")


def _pscore(pt: dict) -> str:
    if pt.get("pscore") is None:
        return "–"
    ci = interval_text(pt.get("pscore_ci_low"), pt.get("pscore_ci_high"), lambda v: f"{v:,.2f}")
    return f"{pt['pscore']:,.2f} (CI {ci})"


def _outcome(pt: dict) -> str:
    return pt["verdict"] if pt.get("status") == "completed" else f"{pt['verdict']} ({pt.get('status')})"


COMMON = (("mean CPU (% of one core)", lambda p: _fmt(p.get("mean_cpu_percent"), ",.0f")),
          ("peak RSS (MiB)", lambda p: _fmt(p.get("peak_rss_mib"), ",.0f")),
          ("duration (s)", lambda p: _fmt(p.get("duration_s"), ",.1f")))
PAIRS_MEASURES = (("verdict", _outcome),
                  ("MarketOrder p99 ms (95 % CI)", lambda p: _p99(p, "orders")),
                  ("orders behind the p99", lambda p: _fmt(p.get("orders"), ",")),
                  ("pscore (95 % CI)", _pscore), *COMMON)
MICRO_MEASURES = (("verdict", _outcome),
                  ("latencies", lambda p: _fmt(p.get("latency_count"), ",")),
                  ("p50 ms", lambda p: _fmt(p.get("p50_ms"), ",")),
                  ("p99 ms (95 % CI)", lambda p: _p99(p, "latency_count")), *COMMON)
SEARCH_MEASURES = (("sustainable ev/s (all streams)", sustainable_cell),
                   ("confirmed", confirmed_cell),
                   ("steps", lambda p: _fmt(p.get("steps") if p.get("status") == "completed" else None, ",")),
                   ("lowest failing ev/s", failing_cell),
                   ("wall (min)", lambda p: _fmt(None if p.get("wall_s") is None else p["wall_s"] / 60, ",.1f")))


def highest_sf_under(points: list[dict], engine: str, limit_ms: float = UNDER_MS) -> str:
    """`engine`'s highest Pairs SF whose run completed, PASSED and had a MarketOrder p99 under
    `limit_ms`, from the Pairs points at the SFs it ran: "above the largest tried" when every SF
    is under it; "–" when it ran no Pairs. SFs without a valid p99 are named (no figure there)."""
    mine = [p for p in points if p["bench"] == "pairs" and p["engine"] == engine]
    if not mine:
        return "–"
    valid = lambda p: (p.get("status") == "completed" and p.get("verdict") == "PASSED"  # noqa: E731
                       and p.get("p99_ms") is not None)
    under = sorted(p["sf"] for p in mine if valid(p) and p["p99_ms"] < limit_ms)
    largest = max(p["sf"] for p in mine)
    missing = sorted({p["sf"] for p in mine if not valid(p)})
    bound = f"{limit_ms / 1000:g} s"
    if under and len(under) == len(mine):
        return f"above the largest tried (every SF under {bound}, up to SF {largest})"
    text = f"SF {under[-1]}" if under else f"none (no SF tried had a valid p99 under {bound})"
    if missing:
        text += f"; no valid p99 at SF {', '.join(map(str, missing))}"
    return text


def summary_rows(points: list[dict], engines: list[str]) -> list[list[str]]:
    """The closing summary: each engine's highest Pairs SF with a MarketOrder p99 under 1 s, then
    the sustainable rate of each searched workload."""
    rows = []
    if any(p["bench"] == "pairs" for p in points):
        rows.append([f"highest Pairs SF with MarketOrder p99 < {UNDER_MS / 1000:g} s",
                     *(highest_sf_under(points, e) for e in engines)])
    searched = [p for p in points if p["bench"] == "sustainable"]
    for name in dict.fromkeys(p["workload"] for p in searched):
        mine = {p["engine"]: p for p in searched if p["workload"] == name}
        rows.append([f"sustainable ev/s: {name}",
                     *(sustainable_cell(mine[e]) if e in mine else "–" for e in engines)])
    return rows


def side_by_side(points: list[dict], key: str, engines: list[str], measures) -> list[list[str]]:
    """Rows of one table: for each value of `key` (in first-seen order) one row per measure, with
    one cell per engine ("–" where that engine has no point); the key only on its first row."""
    out = []
    for value in dict.fromkeys(p[key] for p in points):
        mine = {p["engine"]: p for p in points if p[key] == value}
        for i, (label, cell) in enumerate(measures):
            out.append([str(value) if i == 0 else "", label,
                        *(cell(mine[e]) if e in mine else "–" for e in engines)])
    return out


def table_text(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table, columns padded to their widest cell."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def point_name(p: dict) -> str:
    if p["bench"] == "pairs":
        return f"Pairs SF {p['sf']}"
    return f"{p['workload']} (sustainable throughput)" if p["bench"] == "sustainable" else p["workload"]


def tables(points: list[dict], engines: list[str]) -> str:
    """The Pairs, micro and sustainable-throughput tables of `points`, a line per point that did
    not complete, and the summary table."""
    parts = []
    pairs = [p for p in points if p["bench"] == "pairs"]
    micro = [p for p in points if p["bench"] == "micro"]
    searched = [p for p in points if p["bench"] == "sustainable"]
    if pairs:
        parts.append("## Pairs, quick profile\n\n" + table_text(["SF", "", *engines],
                                                            side_by_side(pairs, "sf", engines, PAIRS_MEASURES)))
    if micro:
        parts.append("## Microbenchmarks, first workload of each quick suite, fixed rate\n\n" + table_text(
            ["workload", "", *engines], side_by_side(micro, "workload", engines, MICRO_MEASURES)))
    if searched:
        parts.append("## Maximum sustainable throughput, first workload of each quick suite\n\n" + table_text(
            ["workload", "", *engines], side_by_side(searched, "workload", engines, SEARCH_MEASURES)))
    odd = [f"- {point_name(p)} on {p['engine']}: {p['status']}{': ' + p['message'] if p.get('message') else ''}"
           for p in points if p.get("status") != "completed"]
    if odd:
        parts.append("## Not completed\n\n" + "\n".join(odd))
    if summary := summary_rows(points, engines):
        parts.append("## Summary\n\n" + table_text(["", *engines], summary))
    return "\n\n".join(parts)


def draw_chart(points: list[dict], engines: list[str], path: Path) -> Path | None:
    """Pairs MarketOrder p99 against SF and each micro workload's p99, one colour per engine."""
    pairs = [p for p in points if p["bench"] == "pairs" and p.get("p99_ms") is not None]
    micro = [p for p in points if p["bench"] == "micro" and p.get("p99_ms") is not None]
    if not pairs and not micro:
        return None
    fig = Figure(figsize=(12, 4.8), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    colours = dict(zip(engines, ("#2563eb", "#dc2626", "#059669", "#d97706")))
    if pairs:
        ax = fig.add_subplot(1, 2 if micro else 1, 1)
        for e in engines:
            mine = [p for p in pairs if p["engine"] == e]
            if mine:
                ax.plot([p["sf"] for p in mine], [p["p99_ms"] for p in mine], marker="o", label=e, color=colours.get(e))
            for p in mine:          # the p99's 95 % interval, where both sides are bounded
                if p.get("p99_ci_low_ms") is not None and p.get("p99_ci_high_ms") is not None:
                    ax.plot([p["sf"]] * 2, [p["p99_ci_low_ms"], p["p99_ci_high_ms"]], color=colours.get(e), lw=3,
                            alpha=0.4)
        ax.set_xscale("log")
        sfs = sorted({p["sf"] for p in pairs})
        ax.set_xticks(sfs, [str(sf) for sf in sfs])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("scale factor")
        ax.set_ylabel("MarketOrder p99 (ms; bar: 95 % CI)")
        ax.set_title("Pairs, quick profile")
        ax.legend()
    if micro:
        ax = fig.add_subplot(1, 2 if pairs else 1, 2 if pairs else 1)
        names = list(dict.fromkeys(p["workload"] for p in micro))
        width = 0.8 / max(len(engines), 1)
        for i, e in enumerate(engines):
            vals = {p["workload"]: p["p99_ms"] for p in micro if p["engine"] == e}
            ax.barh([j + i * width for j, n in enumerate(names) if n in vals],
                    [vals[n] for n in names if n in vals], height=width, label=e, color=colours.get(e))
        ax.set_yticks([j + width * (len(engines) - 1) / 2 for j in range(len(names))], names, fontsize=7.5)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("p99 event-time latency (ms)")
        ax.set_title("Microbenchmarks (first workload per quick suite)")
        ax.legend()
    fig.savefig(path, format="png", facecolor="white")
    return path


# -- running ---------------------------------------------------------------------------------

def parse_columns(text: str) -> list[str]:
    """The compared columns: engine names (kit.engines, aliases resolved) and VARIANTS, each once."""
    cols = []
    for part in (p.strip() for p in str(text).split(",")):
        if part:
            cols.append(part if part in VARIANTS else engine_list(part)[0])
    if not cols:
        raise CepkitError("--engines: expected one or more engine names separated by commas")
    return list(dict.fromkeys(cols))


def column_run(column: str, overrides: list[str]) -> tuple[str, list[str]]:
    """The engine a column runs and the overrides of its runs (a variant's settings last)."""
    engine, extra = VARIANTS.get(column, (column, ()))
    return engine, [*overrides, *extra]


class Recorder:
    """Collects points, appending each to RUNS/engine_compare.jsonl as it comes."""

    def __init__(self, runs: Path):
        self.path, self.points = runs / "engine_compare.jsonl", []

    def add(self, point: dict) -> None:
        self.points.append(point)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(dumps_json(point, indent=None))
        if point["bench"] == "sustainable":
            print(f"  {point_name(point)} on {point['engine']}: {sustainable_cell(point)} ev/s, "
                  f"confirmed {confirmed_cell(point)}, {point.get('steps', '–')} steps", file=sys.stderr, flush=True)
            return
        p99 = _p99(point, "orders" if point["bench"] == "pairs" else "latency_count")
        print(f"  {point_name(point)} on {point['engine']}: {_outcome(point)}, p99 {p99} ms"
              + (f", pscore {_pscore(point)}" if point["bench"] == "pairs" else ""), file=sys.stderr, flush=True)


def compare(run_dirs: list[Path], out: Path) -> None:
    dirs = [d for d in run_dirs if d.is_dir()]
    if not dirs:
        return
    try:
        print(f"side by side: {write_comparison(dirs, out)}", flush=True)
    except (CepkitError, OSError) as e:
        print(f"side by side: not written: {e}", file=sys.stderr, flush=True)


def run_pairs(args, engines: list[str], sfs: list[int], runs: Path, rec: Recorder) -> None:
    for sf in sfs:
        point_dir, shared, dirs = runs / f"pairs-sf{sf}", None, []
        for engine in engines:
            run_dir = point_dir / engine
            dirs.append(run_dir)
            print(f"== Pairs SF={sf} on {engine}" + (" (the first engine's data and strategies)" if shared else ""),
                  file=sys.stderr, flush=True)
            started = time.time()
            try:
                runs_on, overrides = column_run(engine, args.overrides)
                config = load_config(None, overrides, {"pairs.rate.quick": True, "pairs.scale_factor": sf,
                                                       "run.master": args.master, "run.engine": runs_on})
                req = PairsRunRequest(config, run_dir, *(shared or (None, None)), verify=shared is None)
                outcome = run_pairs_pipeline(req, stage=lambda s: print(f"  [{engine} SF={sf}] {s}", file=sys.stderr,
                                                                        flush=True))
                point = pairs_point(engine, sf, outcome, read_pscore(run_dir), time.time() - started)
            except Exception as e:      # noqa: BLE001 - one engine's failure must not end the comparison
                traceback.print_exc()
                point = error_point("pairs", engine, {"sf": sf}, e, time.time() - started, run_dir)
            rec.add(point)
            if shared is None and (run_dir / "data").is_dir() and (run_dir / "strategies.xml").is_file():
                shared = (run_dir / "data", run_dir / "strategies.xml")
        compare(dirs, point_dir / "compare")


def run_micro(args, engines: list[str], suites: list[str], runs: Path, rec: Recorder) -> None:
    for name in suites:
        suite = read_suite(suite_path(name, quick=True))
        workload = suite.workloads[0]
        point_dir, dirs = runs / f"micro-{workload.name}", []
        for engine in engines:
            run_dir = point_dir / engine
            dirs.append(run_dir)
            print(f"== {workload.name} on {engine}", file=sys.stderr, flush=True)
            started = time.time()
            try:
                runs_on, overrides = column_run(engine, args.overrides)
                config = load_config(None, overrides, {"run.master": args.master, "run.engine": runs_on})
                req = MicroSuiteRequest(config, suite, run_dir, (workload.name,))
                result = run_micro_suite(req, stage=lambda s: print(f"  [{engine}] {s}", file=sys.stderr,
                                                                    flush=True))[0]
                point = micro_point(engine, name, result, engine_duration(run_dir / workload.name),
                                    time.time() - started, run_dir)
            except Exception as e:      # noqa: BLE001
                traceback.print_exc()
                point = error_point("micro", engine, {"suite": name, "workload": workload.name}, e,
                                    time.time() - started, run_dir)
            rec.add(point)
        compare(dirs, point_dir / "compare")


def run_sustainable(args, engines: list[str], suites: list[str], runs: Path, rec: Recorder, search) -> None:
    for name in suites:
        workload = read_suite(suite_path(name, quick=True)).workloads[0]
        for engine in engines:
            print(f"== {workload.name} on {engine}: sustainable-throughput search", file=sys.stderr, flush=True)
            runs_on, overrides = column_run(engine, args.overrides)
            point = run_search(runs_on, name, workload, search, runs / f"sustainable-{workload.name}" / engine,
                               overrides, args.master)
            rec.add({**point, "engine": engine})


def parse_suites(text: str, option: str) -> list[str]:
    suites = [s.strip() for s in text.split(",") if s.strip()]
    if bad := [s for s in suites if s not in SUITE_NAMES]:
        raise CepkitError(f"{option}: unknown suite(s) {', '.join(bad)} (valid: {', '.join(SUITE_NAMES)})")
    return suites


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="spark,flink",
                    help=f"engines to compare, in column order (spark,flink); also {', '.join(VARIANTS)}")
    ap.add_argument("--sfs", default=DEFAULT_SFS, help=f"Pairs scale factors (default {DEFAULT_SFS})")
    ap.add_argument("--suites", default=",".join(SUITE_NAMES), help="quick suites whose first workload runs (all)")
    ap.add_argument("--skip-pairs", action="store_true", help="no Pairs runs")
    ap.add_argument("--skip-micro", action="store_true", help="no microbenchmark runs at the fixed rate")
    ap.add_argument("--skip-sustainable", action="store_true", help="no sustainable-throughput searches")
    ap.add_argument("--search-suites", default=None,
                    help="quick suites whose first workload's sustainable throughput is searched (default: --suites)")
    ap.add_argument("--search-start-rate", type=float, default=4000.0, metavar="EPS",
                    help="the search's first rate, events/s per stream (4000)")
    add_search_options(ap, prefix="search-", max_steps=6)
    ap.add_argument("--master", default="local[2]", help="run.master of every run (local[2])")
    ap.add_argument("--runs", default=None, help="directory for everything (must not exist; default "
                                                 "runs/engine-compare-DATE-TIME)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for every run (repeatable); --master and the engine win over it")
    args = ap.parse_args()
    try:
        engines = parse_columns(args.engines)
        sfs = [int(x) for x in args.sfs.split(",") if x.strip()]
        suites = parse_suites(args.suites, "--suites")
        search_suites = suites if args.search_suites is None else parse_suites(args.search_suites, "--search-suites")
        if not args.search_start_rate > 0:
            raise CepkitError(f"--search-start-rate: must be > 0, got {args.search_start_rate:g}")
        search = search_config(args, args.search_start_rate)
        for e in engines:           # a bad --set or SF is one line now, not after an hour of runs
            runs_on, overrides = column_run(e, args.overrides)
            for sf in sfs or [1]:
                load_config(None, overrides, {"pairs.rate.quick": True, "pairs.scale_factor": sf,
                                              "run.master": args.master, "run.engine": runs_on})
        runs = Path(args.runs or f"runs/engine-compare-{time.strftime('%Y%m%d-%H%M%S')}")
        check_parent(runs)
        runs.mkdir(parents=True)
    except ValueError as e:
        ap.error(f"--sfs: {e}")
    except FileExistsError:
        ap.error(f"--runs {args.runs}: exists; give a new directory")
    except CepkitError as e:
        ap.error(str(e))
    rec, started, code = Recorder(runs), time.time(), 0
    print(f"runs: {runs}", file=sys.stderr, flush=True)
    try:
        if not args.skip_pairs:
            run_pairs(args, engines, sfs, runs, rec)
        if not args.skip_micro:
            run_micro(args, engines, suites, runs, rec)
        if not args.skip_sustainable:
            run_sustainable(args, engines, search_suites, runs, rec, search)
    except KeyboardInterrupt:
        print("interrupted: the tables of what finished follow", file=sys.stderr)
        code = 130
    text = tables(rec.points, engines)
    print("\n" + text)
    command = shlex.join(["python", "benchmarks/engine_compare.py", *sys.argv[1:]])
    notes = (f"Measured with cepkit {checkout_version()} on {os.cpu_count()} cores, run.master {args.master}, to be run "
             f"alone on the machine; command: `{command}`; {(time.time() - started) / 60:.0f} min.")
    atomic_write(runs / "engine_compare.md", f"# {' vs '.join(engines)}\n\n{notes}\n\n{text}\n")
    chart = draw_chart(rec.points, engines, runs / "engine_compare.png")
    print(f"\ntables: {runs / 'engine_compare.md'}" + (f"\nchart: {chart}" if chart else ""),
          file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
