"""Maximum sustainable throughput of the micro workloads (and the kit's own ceiling) on each engine.

Each workload gets, on each engine of --engines (one after the other, never two at once), the
search of cepkit_app/pipelines/sustainable.py that `cepkit micro --sustainable` runs (seed 001,
Karimov et al.): fixed-rate steps of --step-seconds at a constant rate, x --growth up while the
engine keeps up and down while it does not, then bisecting until the bracket is within
--precision, then a confirming run at --confirm-fraction of the rate found; a step keeps up when
its run completes (the backlog never stayed above q^b), the largest backlog over the steady tail
stays at or below q^a and the median latency of the tail's answers at or below q^b seconds. Every step is validated. The workloads, each the first workload of its
quick suite (kit/specs/suites/NAME-quick.xml) whose queries are all of the kind (KINDS):

    Q1  filtering      filtering-selectivity-5pct                 filter
    Q2  count-windows  count-windows-window-sliding-r50-sum       count window
    Q3  time-windows   time-windows-rate-q3-range10s-rate500      time window
    J1  joins          joins-j1-window-size-s100                  window join (Q5 in the query model)
    J2  joins          joins-j2-memory-table-t100                 stream-table join (in memory)
    Q7  patterns       patterns-interval-w1s                      pattern

and three named rather than found by kind: Q1 with half the events answered, and the kit's own
ceiling (the `ceiling` suite: every event read and none answered; every event answered):

    Q1H  filtering     filtering-selectivity-50pct                filter, 50 %
    NULL  ceiling      ceiling-kit-null                           filter that answers nothing
    PASS  ceiling      ceiling-kit-pass-through                   filter that answers everything

and Q7 at the thesis's own parameters (the full patterns suite, not the quick one: MAX_ID 10 k,
selectivity 0.1 %, 60-s interval, every event a candidate):

    Q7T  patterns      patterns-interval-w60s                     pattern, thesis parameters

Prints one table: workload, kind, engine, sustainable ev/s (all streams: the search's rate is per
stream, J1 has two), the steps it took, whether the confirmation held, the lowest rate found
not to keep up (none: every rate tried kept up, so the rate found is a lower bound), the
connectors the runs used (source -> sink) and what bounded the search (its first failing step's
verdict, harness/bound.py): a kit-bound rate is marked as the kit's limit, never the engine's. The table is
also written to RUNS/sustainable_compare.md, one JSON line per search to
RUNS/sustainable_compare.jsonl as each ends; every step's run directory stays under
RUNS/<workload>/<engine>/.

Run it ALONE on the machine (no tests, no other engine job): on 2 cores anything else running
makes every engine fall behind sooner. Each step is a whole run (datagen, engine start, the step,
validation): about 40-70 s at 20 s a step, so the default (6 workloads x 2 engines x at most 8
steps) takes up to about 2 hours; --kinds, --max-steps and --step-seconds make a short run.

    .venv/bin/python benchmarks/sustainable_compare.py [--engines spark,flink] [--kinds Q1,Q2,Q3,J1,J2,Q7]
           [--step-seconds 20] [--max-steps 8] [--start-rate [[ENGINE:]KIND=]4000 ...] [--growth 4] [--precision 1.4]
           [--confirm-fraction 0.9] [--master 'local[2]'] [--runs runs/sustainable-compare] [--set KEY=VALUE ...]
           [--results results/throughput/figures.json]

With --results FILE the points also go into that committed results file (kind
cepkit.throughput-figures; the docs' results pages draw it), each with what produced it: the
command, the commit, the machine, the trigger and connectors, the repetitions and the verdict of
its first failing step. A point replaces the file's earlier point of the same workload, engine and
trigger; the others stay.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import traceback

import psutil
from pathlib import Path

from benchmarks_common import checkout_version
from cepkit_app.pipelines.sustainable import SearchConfig
from kit.atomic import atomic_write, check_parent
from kit.config import load_config
from kit.engines import engine_list
from kit.errors import CepkitError
from kit.jsonfile import dumps_json
from kit.shipped import suite_path
from kit.workload import Workload, read_suite

# The kind -> the quick suite holding it; the workload is that suite's first whose queries
# are all of the kind.
KINDS = {"Q1": "filtering", "Q2": "count-windows", "Q3": "time-windows", "J1": "joins", "J2": "joins",
         "Q7": "patterns", "Q1H": "filtering", "NULL": "ceiling", "PASS": "ceiling", "Q7T": "patterns"}
# Kinds that name their workload rather than take the suite's first of the kind.
NAMED = {"Q1H": "filtering-selectivity-50pct", "NULL": "ceiling-kit-null", "PASS": "ceiling-kit-pass-through",
         "Q7T": "patterns-interval-w60s"}
# Kinds whose workload is in the full suite (the thesis's parameters), not the quick one.
FULL = {"Q7T"}
# The kind's name in the query model (kit.workload: thesis_name), where it differs: a window join is Q5.
THESIS_NAMES = {"J1": "Q5"}
DEFAULT_START_EPS = 4000.0     # per stream: above every quick workload's nominal rate (500-1,000)


def kind_workload(kind: str) -> tuple[str, Workload]:
    """(suite name, workload) of `kind` (a key of KINDS)."""
    if kind not in KINDS:
        raise CepkitError(f"kind {kind!r}: expected one of {', '.join(KINDS)}")
    suite = read_suite(suite_path(KINDS[kind], quick=kind not in FULL))
    if kind in NAMED:
        (named,) = [w for w in suite.workloads if w.name == NAMED[kind]]
        return KINDS[kind], named
    name = THESIS_NAMES.get(kind, kind)
    for w in suite.workloads:
        if w.queries and all(q.thesis_name == name for q in w.queries):
            return KINDS[kind], w
    raise CepkitError(f"quick suite {KINDS[kind]} has no workload of kind {kind}")


def parse_kinds(text: str) -> list[str]:
    kinds = [k.strip().upper() for k in text.split(",") if k.strip()]
    if bad := [k for k in kinds if k not in KINDS]:
        raise CepkitError(f"--kinds: unknown kind(s) {', '.join(bad)} (valid: {', '.join(KINDS)})")
    if not kinds:
        raise CepkitError("--kinds: name at least one kind")
    return list(dict.fromkeys(kinds))


def parse_start_rates(items: list[str], engines: list[str]) -> dict[tuple[str, str], float]:
    """`--start-rate [[ENGINE:]KIND=]EPS` items to {(engine or "", kind or ""): eps}."""
    rates = {("", ""): DEFAULT_START_EPS}
    for item in items:
        name, _, eps = item.rpartition("=")
        engine, _, kind = name.strip().rpartition(":")
        engine, kind = engine.strip(), kind.strip().upper()
        try:
            rate = float(eps)
        except ValueError:
            raise CepkitError(f"--start-rate: expected [[ENGINE:]KIND=]EPS, got {item!r}") from None
        if not rate > 0:
            raise CepkitError(f"--start-rate: the rate must be > 0, got {item!r}")
        if (kind and kind not in KINDS) or (engine and engine not in engines) or (engine and not kind):
            raise CepkitError(f"--start-rate {item!r}: expected [[ENGINE:]KIND=]EPS with a kind of "
                              f"{', '.join(KINDS)} and an engine of --engines ({', '.join(engines)})")
        rates[(engine, kind)] = rate
    return rates


def start_rate(rates: dict[tuple[str, str], float], engine: str, kind: str) -> float:
    """The most specific of ENGINE:KIND, KIND and the default."""
    return rates.get((engine, kind), rates.get(("", kind), rates[("", "")]))


# -- the search's settings, shared with engine_compare.py ---------------------------------------

def add_search_options(ap: argparse.ArgumentParser, prefix: str = "", max_steps: int = 8) -> None:
    """The search's settings as options (`--{prefix}step-seconds`, ...), dests `search_*`."""
    ap.add_argument(f"--{prefix}step-seconds", dest="search_seconds", type=float, default=20.0, metavar="S",
                    help="length of each search step's run in seconds (20)")
    ap.add_argument(f"--{prefix}max-steps", dest="search_steps", type=int, default=max_steps, metavar="N",
                    help=f"most runs per search, the confirmation included, at least 2 ({max_steps})")
    ap.add_argument(f"--{prefix}growth", dest="search_growth", type=float, default=4.0, metavar="X",
                    help="rate factor per exploring step (4)")
    ap.add_argument(f"--{prefix}precision", dest="search_precision", type=float, default=1.4, metavar="X",
                    help="stop bisecting once the highest rate kept up and the lowest not are within this factor (1.4)")
    ap.add_argument(f"--{prefix}confirm-fraction", dest="search_confirm", type=float, default=0.9, metavar="F",
                    help="the confirming run's rate as a fraction of the rate found (0.9)")
    ap.add_argument(f"--{prefix}validate-confirmation-only", dest="search_validate_confirmation_only",
                    action="store_true", help="validate only the confirming run, not every step (a workload that "
                                              "answers millions of events spends minutes validating each step)")


def search_config(args: argparse.Namespace, start_eps: float = DEFAULT_START_EPS,
                  start_rates: tuple[tuple[str, float], ...] = ()) -> SearchConfig:
    """The SearchConfig of the options (CepkitError for a bad value, before any run)."""
    return SearchConfig(duration_s=args.search_seconds, max_steps=args.search_steps, growth=args.search_growth,
                        precision=args.search_precision, confirm_fraction=args.search_confirm,
                        start_rate_eps=start_eps, start_rates=start_rates,
                        validate_steps=not getattr(args, "search_validate_confirmation_only", False))


# -- one search as a point ---------------------------------------------------------------------

def search_point(engine: str, suite: str, workload: Workload, result, search: SearchConfig, wall_s: float,
                 run_dir: Path, kind: str | None = None) -> dict:
    """A point from the pipeline's SearchResult; rates in events/s over all the workload's streams."""
    streams = len(workload.dataset.stream_names)
    best = result.best_step()
    failing = result.lowest_failing_eps()
    first = result.first_failing()
    connectors = next((s.connectors for s in result.steps if s.connectors), None)
    work = next((s.work for s in result.steps if getattr(s, "work", None)), None)
    scale = lambda v: None if v is None else round(v * streams, 1)       # noqa: E731
    return {"bench": "sustainable", "engine": engine, "suite": suite, "workload": result.workload, "kind": kind,
            "status": "completed", "message": "", "verdict": "CONFIRMED" if result.confirmed else "NOT CONFIRMED",
            "confirmed": result.confirmed, "sustainable_eps": scale(result.sustainable_eps),
            "best_eps": scale(best.rate_eps if best else None), "lowest_failing_eps": scale(failing),
            "lowest_tried_eps": scale(min((s.rate_eps for s in result.steps), default=None)),
            "steps": len(result.steps), "streams": streams, "step_seconds": search.duration_s,
            "max_steps": search.max_steps, "wall_s": round(wall_s, 1), "run": str(run_dir),
            "connectors": connectors, "work": work, "bound": first.bound if first is not None else None,
            "kit_bound": result.kit_bound()}


def _eps(v) -> str:
    return f"{v:,.0f}"


def sustainable_cell(pt: dict) -> str:
    """The rate a search found, saying what kind of figure it is: a confirmed rate; a lower bound
    (no rate tried failed); the best unconfirmed step; or none kept up."""
    if pt.get("status") != "completed":
        return "–"
    if pt.get("confirmed") and pt.get("sustainable_eps") is not None:
        bound = " (lower bound: every rate tried kept up)" if pt.get("lowest_failing_eps") is None else ""
        if pt.get("kit_bound"):
            bound += f" ({(pt.get('bound') or {}).get('label')}: the kit's limit, not the engine's)"
        elif (pt.get("bound") or {}).get("bound") == "other":
            bound += " (other load on the machine: not a figure; measure again alone)"
        return _eps(pt["sustainable_eps"]) + bound
    if pt.get("best_eps") is not None:
        return f"{_eps(pt['best_eps'])} (not confirmed)"
    low = pt.get("lowest_tried_eps")
    return "none kept up" + (f" (lowest tried {_eps(low)})" if low is not None else "")


def failing_cell(pt: dict) -> str:
    if pt.get("status") != "completed":
        return "–"
    return "none" if pt.get("lowest_failing_eps") is None else _eps(pt["lowest_failing_eps"])


def confirmed_cell(pt: dict) -> str:
    if pt.get("status") != "completed":
        return f"– ({pt.get('status')})"
    return "yes" if pt.get("confirmed") else "no"


HEAD = ("workload", "kind", "engine", "sustainable ev/s (all streams)", "steps", "confirmed", "lowest failing ev/s",
        "connectors", "bound (first failing step)")


def connectors_cell(pt: dict) -> str:
    """The plan family, each query's plan and the connectors (`engine: q7: ...; jvm -> jvm`)."""
    c, w = pt.get("connectors"), pt.get("work") or {}
    conn = "–" if not c else f"{c.get('source')} -> {c.get('sink')}"
    if not w:
        return conn
    queries = "; ".join(f"{q}: {p}" for q, p in (w.get("queries") or {}).items())
    return f"{w.get('family')}" + (f" ({queries})" if queries else "") + f"; {conn}"


def bound_cell(pt: dict) -> str:
    b = pt.get("bound")
    return "–" if not b else str(b.get("label"))


def table(points: list[dict]) -> str:
    """The closing table, one row per (workload, engine), in run order."""
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for p in points:
        steps = "–" if p.get("status") != "completed" else str(p.get("steps"))
        lines.append(f"| {p['workload']} | {p.get('kind') or '–'} | {p['engine']} | {sustainable_cell(p)} | "
                     f"{steps} | "
                     f"{confirmed_cell(p)} | {failing_cell(p)} | {connectors_cell(p)} | {bound_cell(p)} |")
    odd = [f"- {p['workload']} on {p['engine']}: {p['status']}: {p.get('message', '')}"
           for p in points if p.get("status") != "completed"]
    odd += [f"- {p['workload']} on {p['engine']}: bounded by: {p['bound'].get('why')}"
            for p in points if p.get("status") == "completed" and p.get("bound")]
    return "\n".join(lines + ([""] + odd if odd else []))


def run_search(engine: str, suite_name: str, workload: Workload, search: SearchConfig, run_dir: Path,
               overrides: list[str], master: str, kind: str | None = None) -> dict:
    """One workload's search on one engine (its runs in `run_dir`, a `cepkit micro` run directory);
    an exception becomes a point with status "error"."""
    from cepkit_app.pipelines.micro import MicroSuiteRequest, run_micro_suite

    started = time.time()
    try:
        config = load_config(None, overrides, {"run.master": master, "run.engine": engine})
        suite = read_suite(suite_path(suite_name, quick=kind not in FULL))
        req = MicroSuiteRequest(config, suite, run_dir, (workload.name,))
        result = run_micro_suite(req, stage=lambda s: print(f"  [{engine}] {s}", file=sys.stderr, flush=True),
                                 search=search)[0]
        return search_point(engine, suite_name, workload, result, search, time.time() - started, run_dir, kind)
    except Exception as e:      # noqa: BLE001 - one search's failure must not end the comparison
        traceback.print_exc()
        return {"bench": "sustainable", "engine": engine, "suite": suite_name, "workload": workload.name,
                "kind": kind, "status": "error", "verdict": "NOT VALIDATED",
                "message": f"{type(e).__name__}: {e}".splitlines()[0], "wall_s": round(time.time() - started, 1),
                "run": str(run_dir)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="spark,flink", help="engines, in the table's order (spark,flink)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"workload kinds to search ({','.join(KINDS)})")
    add_search_options(ap)
    ap.add_argument("--start-rate", action="append", default=[], metavar="[[ENGINE:]KIND=]EPS",
                    help=f"first rate tried, per stream ({DEFAULT_START_EPS:g}); KIND=EPS for one kind, "
                         "ENGINE:KIND=EPS for one kind on one engine, e.g. Q1=50000 or flink:Q7=20000, so a fast "
                         "workload does not spend its steps getting there (repeatable)")
    ap.add_argument("--master", default="local[2]", help="run.master of every run (local[2])")
    ap.add_argument("--runs", default=None, help="directory for everything (must not exist; default "
                                                 "runs/sustainable-compare-DATE-TIME)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for every run (repeatable); --master and the engine win over it")
    ap.add_argument("--results", default=None, metavar="FILE",
                    help="also record every point, with its provenance, in this results file (kind "
                         "cepkit.throughput-figures; e.g. results/throughput/figures.json)")
    args = ap.parse_args()
    try:
        engines = list(engine_list(args.engines))
        kinds = parse_kinds(args.kinds)
        starts = parse_start_rates(args.start_rate, engines)
        picks = [(k, *kind_workload(k)) for k in kinds]
        for e in engines:           # a bad --set is one line now, not after an hour of runs
            load_config(None, args.overrides, {"run.master": args.master, "run.engine": e})
        configs = {(k, e): search_config(args, start_rate(starts, e, k)) for k in kinds for e in engines}
        runs = Path(args.runs or f"runs/sustainable-compare-{time.strftime('%Y%m%d-%H%M%S')}")
        check_parent(runs)
        if args.results:
            check_parent(Path(args.results))
            read_figures(Path(args.results))        # a bad file is one line now, not after the runs
        runs.mkdir(parents=True)
    except FileExistsError:
        ap.error(f"--runs {args.runs}: exists; give a new directory")
    except CepkitError as e:
        ap.error(str(e))
    print(f"runs: {runs}", file=sys.stderr, flush=True)
    points, started, code = [], time.time(), 0
    try:
        for kind, suite_name, workload in picks:
            for engine in engines:
                print(f"== {kind} {workload.name} on {engine}: sustainable-throughput search", file=sys.stderr,
                      flush=True)
                point = run_search(engine, suite_name, workload, configs[(kind, engine)], runs / workload.name / engine,
                                   args.overrides, args.master, kind)
                points.append(point)
                with open(runs / "sustainable_compare.jsonl", "a", encoding="utf-8") as fh:
                    fh.write(dumps_json(point, indent=None))
                print(f"  {workload.name} on {engine}: {sustainable_cell(point)} ev/s, "
                      f"{point.get('steps', '–')} steps, confirmed {confirmed_cell(point)}", file=sys.stderr,
                      flush=True)
    except KeyboardInterrupt:
        print("interrupted: the table of what finished follows", file=sys.stderr)
        code = 130
    text = table(points)
    print("\n" + text)
    command = shlex.join(["python", "benchmarks/sustainable_compare.py", *sys.argv[1:]])
    notes = (f"Measured with cepkit {checkout_version()} on {os.cpu_count()} cores, run.master {args.master}, "
             f"to be run alone on the machine; steps of {args.search_seconds:g} s, at most {args.search_steps} "
             f"a search; "
             f"command: `{command}`; {(time.time() - started) / 60:.0f} min.")
    atomic_write(runs / "sustainable_compare.md",
                 f"# Maximum sustainable throughput: {', '.join(engines)}\n\n{notes}\n\n{text}\n")
    if args.results:
        record_figures(Path(args.results), points, command, args)
        print(f"results: {args.results}", file=sys.stderr)
    print(f"\ntable: {runs / 'sustainable_compare.md'}", file=sys.stderr)
    return code


# -- the committed results file ---------------------------------------------------------------

FIGURES_KIND = "cepkit.throughput-figures"


def read_figures(path: Path) -> dict:
    """The results file (a new one when absent); CepkitError naming the file when it is not one."""
    if not path.exists():
        return {"kind": FIGURES_KIND, "schema_version": 1, "points": []}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CepkitError(f"{path}: cannot read: {e}") from None
    if not isinstance(doc, dict) or doc.get("kind") != FIGURES_KIND or not isinstance(doc.get("points"), list):
        raise CepkitError(f"{path}: kind: expected a {FIGURES_KIND} file with a points list")
    return doc


def machine() -> dict:
    """What the figures were measured on."""
    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu": model or None,
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1)}


def record_figures(path: Path, points: list[dict], command: str, args) -> None:
    """Put `points` into the results file at `path`, each with its provenance (module doc)."""
    doc = read_figures(path)
    overrides = dict(o.split("=", 1) for o in args.overrides if "=" in o)
    trigger = overrides.get("run.trigger", "micro-batch").strip("'\"")
    family = overrides.get("run.work", "engine").strip("'\"")
    provenance = {"command": command, "commit": checkout_version(), "machine": machine(),
                  "measured": time.strftime("%Y-%m-%d"), "master": args.master, "trigger": trigger, "family": family,
                  "step_seconds": args.search_seconds, "max_steps": args.search_steps, "repetitions": 1,
                  "alone": True}
    # A point replaces the earlier point of its workload, engine, trigger and plan family (points
    # recorded before plan families were the kit's plans of the time: "legacy").
    keep = {(p["workload"], p["engine"], trigger, family) for p in points}
    doc["points"] = [p for p in doc["points"]
                     if (p["workload"], p["engine"], p.get("trigger"), p.get("family", "legacy")) not in keep]
    doc["points"] += [{**p, **provenance} for p in points]
    # The file is a record that grows: it is replaced whole (atomically), never left half-written.
    atomic_write(path, dumps_json(doc, indent=1), overwrite=True)


if __name__ == "__main__":
    raise SystemExit(main())
