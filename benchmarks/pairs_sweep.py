"""Pairs scalability sweep on Spark (default) or Flink (--engine flink): quick runs at rising SFs.

On one engine, quick-profile runs at rising scale factors for each plan, written up as a page with
the table and charts (validator/sweep_page.py).

Plans (--plans, default: every plan the engine's translator takes, PLANS_BY_ENGINE): on Spark
keyed, shared and per-strategy; the Flink translator takes the same three (flink_runtime/pairs.py:
keyed = buckets over the parallel instances, shared = one bucket, per-strategy = one bucket per
strategy's pair), so `--engine flink --plans keyed` sweeps Flink's default plan alone. On Flink the
series is named "PLAN (flink)", the run directories "sfSF-PLAN-flink"; Spark's keep their names.

For each plan the runs go through --sfs in order (by default 1, 2, 4, then Table A.1's market
boundaries 10 and 11, then doubling to 512, with 384 between 256 and 512) until a run's MarketOrder
p99 passes --stop-ms, the run is stopped as unsustainable (backlog above q^b), it fails, or the
list ends. Each run is a full `cepkit pairs` pipeline (fresh data and strategies, program, run,
validation) in its own directory under --runs. After every run the sweep rewrites
RUNS/points.jsonl (one line a run, so an interrupted sweep keeps what it measured),
RUNS/sweep.html (+ sweep.json, figures/) and prints the table so far; the page's title, its
notes and the table's engine column name the engine. Each point records its SF, the MarketOrder
p99 with the number of orders behind it (n) and its 95 % interval, pscore, mean cores, peak RSS.

--include FILE[=LABEL] adds the points of another sweep (its points.jsonl, or the JSON lines an
older version of this script printed) as series LABEL, e.g. a sweep run on an older checkout of
the kit: `--include runs/sweep-old/points.jsonl="shared (landed 032e424)"`.

--repeat K (default 1) runs each point K times over the same dataset and strategies, as `cepkit
pairs --repeat K` does (cepkit_app/pipelines/repeat.py): the point's directory is a repetition
directory (run-1 ... run-K and repeat.json, which `cepkit compare` reads), and the point is the
median of the runs that completed and PASSED with their range (min-max) and n, in the table, in
points.jsonl (with each run's row under "runs") and on the page (error bars). A point is a result,
and the plan goes on, only when every one of its runs completed; the stop rule reads the median p99.

    .venv/bin/python benchmarks/pairs_sweep.py [--engine spark|flink] [--plans keyed,shared,per-strategy]
           [--sfs 1,2,4,...] [--runs runs/sweep] [--per-strategy-limit 25] [--include FILE=LABEL] [--repeat K]
           [--set KEY=VALUE ...]

Run it alone on the machine: on 2 cores another engine job or test run skews every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks_common import checkout_version
from cepkit_app.pipelines.pairs import PairsRunRequest, run_pairs_pipeline
from cepkit_app.pipelines.repeat import RepeatPlan, RunInputs, repeat_count, run_repeats
from kit.atomic import atomic_write
from kit.config import PLANS, load_config
from kit.engines import engine_name
from kit.errors import CepkitError
from kit.jsonfile import dumps_json, read_json_object
from kit.manifest import load_manifest
from kit.paths import fresh_path
from kit.profiles import RateProfile
from kit.shipped import config_path
from validator.latency import LatencyStats, Pscore, event_time_latency_ms, latency_stats, measurement_mask
from validator.order_stats import percentile_text
from validator.outputlog import read_output_log
from validator.compare_runs import Spread, spread
from validator.sweep_page import SweepPoint, write_sweep_page

DEFAULT_SFS = "1,2,4,10,11,16,32,64,128,256,384,512"
STOP_MS = 2000.0
# The Pairs plans each engine's translator takes (translators/request.py checks kit.config.PLANS
# for every engine; flink_runtime/pairs.py runs all three). A sweep's default is all of them.
PLANS_BY_ENGINE = {"spark": PLANS, "flink": PLANS}
ENGINE_TITLES = {"spark": "Spark", "flink": "Flink"}


def series_name(plan: str, engine: str) -> str:
    """The sweep's series of a plan: the plan itself on Spark (as before), "PLAN (ENGINE)" elsewhere."""
    return plan if engine == "spark" else f"{plan} ({engine})"


def run_name(sf: int, plan: str, engine: str) -> str:
    return f"sf{sf}-{plan}" if engine == "spark" else f"sf{sf}-{plan}-{engine}"


def parse_plans(text: str, engine: str) -> list[str]:
    """--plans for `engine` (None: all its plans), in the order given; CepkitError for a plan it lacks."""
    known = PLANS_BY_ENGINE.get(engine, PLANS)
    plans = list(dict.fromkeys(p.strip() for p in (text or ",".join(known)).split(",") if p.strip()))
    if bad := [p for p in plans if p not in known]:
        raise CepkitError(f"--plans: {', '.join(bad)}: not a Pairs plan of {engine} (it has {', '.join(known)})")
    if not plans:
        raise CepkitError("--plans: name at least one plan")
    return plans


def sweep_title(rows: list[dict]) -> str:
    """The page's title, naming the engines of its points (an included older sweep's are Spark's)."""
    engines = dict.fromkeys(ENGINE_TITLES.get(r.get("engine", "spark"), r.get("engine")) for r in rows)
    return "Pairs scalability sweep on " + (" and ".join(engines) or "Spark")


def stops(row: dict, stop_ms: float) -> bool:
    """A plan's sweep ends after this run: it did not complete (failed, or stopped as unsustainable),
    or its MarketOrder p99 passed `stop_ms`."""
    return row["status"] != "completed" or (row["order_p99_ms"] or 0) > stop_ms


def _latency(run_dir: Path, profile: RateProfile) -> LatencyStats | None:
    """Event-time latency of every output row whose input is in the measurement interval."""
    log = read_output_log(run_dir / "engine" / "outputs")
    lat = []
    for name in ("Indicator", "MarketOrder"):
        rows = log.stream(name)
        if len(rows):
            mask = measurement_mask(rows["inputTS"].to_numpy(np.int64), profile, log.clocks)
            lat.append(event_time_latency_ms(rows[mask]))
    values = np.concatenate(lat) if lat else np.array([])
    return latency_stats(values) if len(values) else None


def _order_p99(run_dir: Path) -> tuple[int | None, str | None]:
    """The pscore's MarketOrder p99: its order count and its text with the 95 % interval."""
    path = run_dir / "report" / "summary.json"
    pscore = read_json_object(path).get("pscore") if path.exists() else None
    if pscore is None:
        return None, None
    p = Pscore(**pscore).p99
    return p.n, f"{p.n:,} orders: {percentile_text(p, unit='', short=True)}"


def sweep_config(base_args: list[str], sf: int, plan: str, engine: str = "spark"):
    """The quick config of one run; the engine, SF and plan win over --set."""
    return load_config(config_path("quick"), base_args + [f"pairs.scale_factor={sf}", f"run.plan={plan!r}",
                                                          f"run.engine={engine!r}"])


def one_run(base_args: list[str], sf: int, plan: str, runs: Path, limit: int | None, engine: str = "spark",
            run_dir: Path | None = None, inputs: RunInputs | None = None) -> dict:
    """One run's row: into a fresh `sfSF-PLAN` directory under `runs`, or into `run_dir` with
    `inputs` (a repetition's later run: the first run's dataset and strategies)."""
    config = sweep_config(base_args, sf, plan, engine)
    run_dir = fresh_path(runs, run_name(sf, plan, engine)) if run_dir is None else run_dir
    inputs = RunInputs(strategy_limit=limit) if inputs is None else inputs
    series = series_name(plan, engine)
    started = time.time()
    outcome = run_pairs_pipeline(PairsRunRequest(config, run_dir, inputs.data_dir, inputs.strategies_file,
                                                 inputs.strategy_limit, verify=inputs.verify),
                                 stage=lambda s: print(f"  [{series} SF={sf}] {s}", file=sys.stderr, flush=True))
    manifest = load_manifest(inputs.data_dir or run_dir / "data")
    profile = manifest.rate_profile()
    duration_s = profile.duration_ms / 1000
    eng = outcome.engine
    strategies = (run_dir / "strategies.xml").read_text().count("<PairsStrategy ")
    stats = _latency(run_dir, profile) if outcome.status != "failed" else None
    orders, order_text = _order_p99(run_dir)
    return {"series": series, "engine": engine, "sf": sf, "plan": plan,
            "mean_eps": manifest.get("total_rows") / duration_s,
            "peak_eps": manifest.get("scale")["peak_rate_eps"], "strategies": strategies,
            "p50_ms": None if stats is None else stats.p50_ms,
            "latencies": None if stats is None else stats.count,
            "p99": None if stats is None else percentile_text(stats.percentile("p99"), unit="", short=True),
            "order_p99_ms": outcome.p99_ms, "orders": orders, "order_p99_text": order_text,
            "pscore": outcome.pscore, "cores": None if eng.mean_cpu_percent is None else eng.mean_cpu_percent / 100,
            "peak_rss_mib": (eng.peak_rss_bytes or 0) / 2**20, "status": outcome.status,
            "verdict": outcome.verdict, "wall_s": time.time() - started, "run": str(run_dir)}


def repeated_run(base_args: list[str], sf: int, plan: str, runs: Path, limit: int | None, engine: str,
                 repeat: int) -> dict:
    """`repeat` runs of one point over the same inputs, in a repetition directory `sfSF-PLAN`
    (run-1 ... run-K, repeat.json); the point's row is their summary (`repeated_row`)."""
    parent = fresh_path(runs, run_name(sf, plan, engine))
    rows: list[dict] = []

    def one(_engine: str, i: int, run_dir: Path, inputs: RunInputs) -> None:
        rows.append(one_run(base_args, sf, plan, runs, None, engine, run_dir, inputs))

    doc = run_repeats(RepeatPlan(parent, repeat, (engine,)), RunInputs(strategy_limit=limit), one,
                      stage=lambda s: print(f"  [{series_name(plan, engine)} SF={sf}] {s}", file=sys.stderr,
                                            flush=True))
    return repeated_row(rows, doc, parent)


def repeated_row(rows: list[dict], doc: dict, parent: Path) -> dict:
    """The point of repeated runs (`rows`, their repeat.json `doc`): the median and range (min-max)
    of the MarketOrder p99 and pscore over the runs that completed and PASSED, with n in the table's
    text; the median cores and RSS of those runs; completed and PASSED only when every run was."""
    (group,) = doc["spread"]
    p99, ps = Spread.from_dict(group["p99_ms"]), Spread.from_dict(group["pscore"])
    counted = [r for r in rows if r["status"] == "completed" and r["verdict"] == "PASSED"]
    statuses, verdicts = [r["status"] for r in rows], [r["verdict"] for r in rows]
    status = next((s for s in statuses if s != "completed"), "completed")
    verdict = "PASSED" if all(v == "PASSED" for v in verdicts) else "FAILED" if "FAILED" in verdicts \
        else "NOT VALIDATED"
    median = lambda key: spread([r[key] for r in counted if r.get(key) is not None]).median  # noqa: E731
    first = rows[0]
    return {**{k: first[k] for k in ("series", "engine", "sf", "plan", "mean_eps", "peak_eps", "strategies")},
            "p50_ms": None, "latencies": None, "p99": None,
            "order_p99_ms": p99.median, "order_p99_low": p99.low, "order_p99_high": p99.high, "orders": None,
            "order_p99_text": p99.text(unit=""), "pscore": ps.median, "pscore_low": ps.low, "pscore_high": ps.high,
            "pscore_text": ps.text(lambda v: f"{v:,.2f}"), "cores": median("cores"),
            "peak_rss_mib": median("peak_rss_mib"), "status": status, "verdict": verdict,
            "repeat": len(rows), "counted": len(counted), "wall_s": sum(r["wall_s"] for r in rows),
            "run": str(parent), "runs": rows}


def read_points(path: Path, label: str | None) -> list[dict]:
    """Points of another sweep: JSON lines, each a run's dict (this script's, or an older one's)."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise CepkitError(f"{path}: cannot read: {e.strerror}") from None
    for i, line in enumerate(lines, 1):
        line = line.strip()
        if not line.startswith("{"):
            continue            # an older script printed its progress lines around the JSON
        try:
            row = json.loads(line)
        except ValueError as e:
            raise CepkitError(f"{path}:{i}: not JSON: {e}") from None
        if "sf" not in row:
            continue
        row["series"] = label or row.get("series") or row.get("plan", "?")
        row.setdefault("engine", "spark")       # sweeps before --engine ran on Spark only
        row.setdefault("cores", row["cpu"] / 100 if row.get("cpu") is not None else None)
        row.setdefault("peak_rss_mib", row.get("rss_mib"))
        row.setdefault("order_p99_text", row.get("order_p99"))
        out.append(row)
    return out


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict]) -> None:
    head = ("engine", "series", "SF", "in ev/s (mean/peak)", "strategies", "order p99 ms (95 % CI)", "pscore",
            "cores", "RSS MiB", "status", "verdict")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print(f"| {r.get('engine', 'spark')} | {r['series']} | {r['sf']} | "
              f"{r['mean_eps']:,.0f} / {r['peak_eps']:,.0f} | {r['strategies']} | "
              f"{r.get('order_p99_text') or _fmt(r.get('order_p99_ms'), ',.0f')} | "
              f"{r.get('pscore_text') or _fmt(r.get('pscore'), ',.2f')} | "
              f"{_fmt(r.get('cores'), '.2f')} | {_fmt(r.get('peak_rss_mib'), ',.0f')} | {r['status']} | "
              f"{r['verdict']} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="spark", help="the engine under test: spark (default) or flink")
    ap.add_argument("--plans", default=None, help="Pairs plans, in order (default: every plan of the engine: "
                                                  + "; ".join(f"{e} {','.join(p)}" for e, p in PLANS_BY_ENGINE.items())
                                                  + ")")
    ap.add_argument("--sfs", default=DEFAULT_SFS, help=f"scale factors, in order (default {DEFAULT_SFS})")
    ap.add_argument("--stop-ms", type=float, default=STOP_MS, help="stop a plan once its MarketOrder p99 passes this")
    ap.add_argument("--runs", default="runs/sweep")
    ap.add_argument("--per-strategy-limit", type=int, default=25,
                    help="keep only the first N strategies in per-strategy runs (0: all)")
    ap.add_argument("--strategy-limit", type=int, default=None,
                    help="keep only the first N strategies in every run (a like-for-like comparison)")
    ap.add_argument("--include", action="append", default=[], metavar="FILE[=LABEL]",
                    help="add another sweep's points (JSON lines) as series LABEL")
    ap.add_argument("--repeat", default="1", metavar="K",
                    help="run each point K times over the same inputs: median and range (default 1)")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    try:
        repeat = repeat_count(args.repeat)
        engine = engine_name(args.engine)
        plans = parse_plans(args.plans, engine)
        sfs = [int(x) for x in args.sfs.split(",") if x.strip()]
        for plan in plans:          # a bad --set is one line now, not after the first runs
            sweep_config(args.overrides, sfs[0] if sfs else 1, plan, engine)
        included = []
        for item in args.include:
            path, _, label = item.partition("=")
            included += read_points(Path(path), label or None)
    except (ValueError, CepkitError) as e:
        sys.exit(f"pairs_sweep: {e}")
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    version = checkout_version()
    rows: list[dict] = []
    notes = [f"Engine: {engine}. Measured with cepkit {version}, quick standard profile (~2 minutes a run), --master "
             f"from the config ({' '.join(args.overrides) or 'defaults'}); per-strategy runs keep the first "
             f"{args.per_strategy_limit or 'all'} strategies."
             + (f" Each point: {repeat} runs over the same inputs, the median of those that completed and PASSED, "
                f"with their range." if repeat > 1 else "")]
    for plan in plans:
        for sf in sfs:
            limit = args.strategy_limit or ((args.per_strategy_limit or None) if plan == "per-strategy" else None)
            row = one_run(args.overrides, sf, plan, runs, limit, engine) if repeat == 1 else \
                repeated_run(args.overrides, sf, plan, runs, limit, engine, repeat)
            rows.append(row)
            atomic_write(runs / "points.jsonl", "".join(dumps_json(r, indent=None) for r in rows), overwrite=True)
            points = [SweepPoint.from_dict(r) for r in included + rows]
            page = write_sweep_page(points, runs, title=sweep_title(included + rows), notes=notes)
            print_table(included + rows)
            print(f"page: {page}", file=sys.stderr, flush=True)
            if stops(row, args.stop_ms):
                break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
