"""A microbenchmark suite end to end: per workload datagen -> translate -> run -> validate.

`run_micro_suite(MicroSuiteRequest(...))` is what `cepkit micro` calls. Everything lands in one
new run directory:

    <run>/config.toml                the resolved base configuration
    <run>/suite.xml                  the suite as run (after --workload selection)
    <run>/<workload>/data/           its dataset (datagen micro with the workload's Dataset and Load)
    <run>/<workload>/workload.xml    the workload spec
    <run>/<workload>/program.py      the generated engine program
    <run>/<workload>/engine/         the harness run: outputs/, metrics/, logs/, run.json
    <run>/<workload>/postgres/       J3 only: the private PostgreSQL's directory and server log
    <run>/<workload>/validation.json each query's comparison and latency
    <run>/summary.json, summary.md   one row per workload
    <run>/report.html                the suite's report: table, charts per experiment, adaptivity, memory

It lives in the CLI package because it is the one place allowed to wire every package together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from kit.config import Config, load_config, write_config
from kit.errors import CepkitError
from kit.workload import Suite, TableJoin, TimeWindowAggregation, TwoLevelAggregation, Workload

Stage = Callable[[str], None]


@dataclass(frozen=True)
class MicroSuiteRequest:
    """One suite run: the config file and `--set` overrides (each workload adds its dataset and
    load to them), the suite, and `workloads`, the names to keep (default: all)."""

    config_path: Path | None
    overrides: tuple[str, ...]
    suite: Suite
    run_dir: Path
    workloads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if Path(self.run_dir).exists():
            raise CepkitError(f"{self.run_dir}: run directory already exists; refusing to overwrite it")
        known = {w.name for w in self.suite.workloads}
        for name in self.workloads:
            if name not in known:
                raise CepkitError(f"suite {self.suite.name}: no workload {name!r} (has {', '.join(sorted(known))})")

    @property
    def config(self) -> Config:
        return load_config(self.config_path, self.overrides)

    def selected(self) -> tuple[Workload, ...]:
        return tuple(w for w in self.suite.workloads if not self.workloads or w.name in self.workloads)


@dataclass(frozen=True)
class WorkloadResult:
    workload: str
    params: dict
    queries: int
    status: str                 # the engine run's: completed, unsustainable, failed; or not translated
    message: str
    verdict: str                # PASSED, FAILED, NOT VALIDATED
    events: int | None
    input_eps: float | None     # events per second of the dataset (mean)
    outputs: int
    p50_ms: int | None
    p99_ms: int | None
    peak_rss_mib: float | None
    mean_cpu_percent: float | None
    text: str                   # the per-query comparison, one line each
    adaptivity: dict | None = None   # the thesis 4.5.5 metrics, for adaptivity workloads
    lambda_eps: float | None = None  # the calibrated lambda of a burst workload (per stream)
    lambda_rule: str = ""            # how it was chosen (kit.cli.sustainable.choose_lambda)
    state_mib: float | None = None   # peak state-store memory of Spark's stateful operators
    # The latencies behind p50/p99 and the p99's 95 % interval (validator.order_stats; None on an
    # open side); all None when the run was not validated (p50/p99 then come from the sink).
    latency_count: int | None = None
    p99_ci_low_ms: int | None = None
    p99_ci_high_ms: int | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def align_ms(workload: Workload) -> int:
    """The driver's start alignment: the rebased TS must keep every time window's boundaries
    (specs/SEMANTICS.md section 1), so a multiple of every slideMs; whole seconds otherwise."""
    out = 1000
    for q in workload.queries:
        if isinstance(q, (TimeWindowAggregation, TwoLevelAggregation)):
            out = math.lcm(out, q.slide_ms)
    return out


def run_workload(req: MicroSuiteRequest, workload: Workload, wdir: Path, stage: Stage, on_progress=None,
                 extra_overrides: tuple[str, ...] = (), validate: bool = True) -> WorkloadResult:
    """One fixed-rate run of `workload` in `wdir`; `extra_overrides` go after the request's."""
    from datagen.micro import generate_micro
    from harness.config import DriverConfig
    from harness.engine_run import run_engine
    from harness.postgres import jdbc_driver_jar
    from kit.cli.pairs_pipeline import engine_run_spec
    from kit.profiles import profile_from_dict
    from kit.workload import output_schema, write_spec
    from translators.output import write_program
    from translators.registry import engine_module
    from translators.spark_micro import MicroTranslation
    from validator.latency import latency_stats
    from validator.micro_run import validate_micro_run
    from validator.report import format_text_report

    overrides = (*req.overrides, *extra_overrides)
    cfg = load_config(req.config_path, overrides)
    wcfg = load_config(req.config_path, (*overrides, *workload.config_overrides()))
    jdbc_jar = jdbc_driver_jar() if cfg.run.database_join == "jdbc" and _joins_database(workload) else None
    stage(f"{workload.name}: datagen ({workload.dataset.streams} stream(s), {workload.load.rate_eps:g} ev/s)")
    ds = generate_micro(wcfg.micro, wdir / "data", config_toml=wcfg.to_toml())
    spec_path = write_spec(workload, wdir / "workload.xml")
    translation = MicroTranslation.from_files(spec_path, ds.directory, time_windows=cfg.run.time_windows,
                                              database_join=cfg.run.database_join)
    try:
        text = engine_module(cfg.run.engine).translate_micro(translation)
    except CepkitError as e:     # a kind this engine cannot run yet: say so, go on with the suite
        stage(f"{workload.name}: not run: {e}")
        return WorkloadResult(workload.name, {p.name: p.value for p in workload.params}, len(workload.queries),
                              "not translated", str(e), "NOT VALIDATED", ds.total_rows, None, 0, None, None, None,
                              None, "")
    program = write_program(text, wdir / "program.py")
    stage(f"{workload.name}: run {len(workload.queries)} quer{'y' if len(workload.queries) == 1 else 'ies'} "
          f"on {cfg.run.master}")
    duration_s = ds.manifest["profile"]["duration_ms"] / 1000.0
    mean_eps = ds.total_rows / max(duration_s, 1e-9)
    backlog_limit = max(1000, int(cfg.run.max_backlog_s * mean_eps))
    # The dataset was generated by this command a moment ago (the validator still verifies it).
    driver = DriverConfig(dataset_dir=ds.directory, pacing="tickts", speed=1.0, stamp=cfg.run.stamp,
                          align_ms=align_ms(workload), hold=True, verify=False)
    spec = engine_run_spec(cfg, program, wdir / "engine", driver,
                           {q.id: output_schema(q).arrow_schema() for q in workload.queries}, backlog_limit)
    if jdbc_jar is not None:
        spec = dataclasses.replace(spec, spark_conf=(*spec.spark_conf, ("spark.jars", str(jdbc_jar))))
    with _database(workload, ds.directory, wdir, stage) as env:
        result = run_engine(dataclasses.replace(spec, env=env),
                            on_progress=_on_the_clock(on_progress, int(duration_s * 1000)))
    # The sink's latency histogram covers every row; validation recomputes it from the log.
    verdict, text, p50, p99, adaptivity = "NOT VALIDATED", "", result.latency_p50_ms, result.latency_p99_ms, None
    stats = None
    if result.status == "completed" and validate:     # partial output of a stopped run proves nothing
        stage(f"{workload.name}: validate")
        outcome, latencies = validate_micro_run(workload, ds.directory, wdir / "engine" / "outputs",
                                                profile_from_dict(ds.manifest["profile"]))
        adaptivity = outcome.adaptivity.to_dict() if outcome.adaptivity else None
        if outcome.adaptivity_note:
            stage(f"{workload.name}: no adaptivity metrics: {outcome.adaptivity_note}")
        (wdir / "validation.json").write_text(json.dumps(outcome.to_dict(), indent=2, default=str) + "\n")
        verdict = outcome.verdict
        text = format_text_report(tuple(q.comparison for q in outcome.queries))
        stats = latency_stats(latencies)
        p50, p99 = stats.p50_ms, stats.p99_ms
    return WorkloadResult(
        workload=workload.name, params={p.name: p.value for p in workload.params}, queries=len(workload.queries),
        status=result.status, message=result.message, verdict=verdict, events=result.events_total,
        input_eps=round(mean_eps, 1), outputs=sum(result.outputs.values()), p50_ms=p50, p99_ms=p99,
        peak_rss_mib=None if result.peak_rss_bytes is None else round(result.peak_rss_bytes / 2**20, 1),
        mean_cpu_percent=result.mean_cpu_percent, text=text, adaptivity=adaptivity,
        state_mib=None if result.peak_state_bytes is None else round(result.peak_state_bytes / 2**20, 2),
        latency_count=None if stats is None else stats.count,
        p99_ci_low_ms=None if stats is None else stats.p99_ci_low_ms,
        p99_ci_high_ms=None if stats is None else stats.p99_ci_high_ms)


def _joins_database(workload: Workload) -> bool:
    return any(isinstance(q, TableJoin) and q.storage == "database" for q in workload.queries)


@contextlib.contextmanager
def _database(workload: Workload, data: Path, wdir: Path, stage: Stage):
    """For J3: a private PostgreSQL holding the dataset's table while the engine runs; yields the
    program's extra environment (its connection string)."""
    from harness.postgres import PostgresServer
    from translators.spark_micro import table_of

    if not _joins_database(workload):
        yield ()
        return
    table = table_of(data)
    if table is None:
        raise CepkitError(f"workload {workload.name}: joins a database table but {data} has none")
    with PostgresServer(wdir / "postgres") as pg:
        rows = pg.load_table(table)
        stage(f"{workload.name}: PostgreSQL on {pg.host}:{pg.port} holds the table ({rows:,} rows)")
        yield (("CEPKIT_PG_DSN", pg.dsn), ("CEPKIT_PG_JDBC_URL", pg.jdbc_url))


def _on_the_clock(on_progress, duration_ms: int):
    """Micro loads have no named phases: place a snapshot on the run's own clock."""
    from kit.cli.pairs_pipeline import RunProgress

    if on_progress is None:
        return None
    return lambda snap: on_progress(RunProgress(snap, "run" if snap.sim_ms >= 0 else "lead-in", duration_ms))


def run_micro_suite(req: MicroSuiteRequest, *, stage: Stage = lambda s: None, on_progress=None,
                    search=None, calibrate=None, lambda_fraction: float = 0.75) -> list:
    """Fixed-rate runs at each workload's own load; with `search` (a kit.cli.sustainable.SearchConfig)
    a maximum-sustainable-throughput search per workload instead. With `calibrate` (a SearchConfig),
    a burst (adaptivity-profile) workload first gets a search at constant load and then runs at the
    lambda where the engine used `lambda_fraction` of the machine's CPU during that search, or
    `lambda_fraction` x the rate found if it fell behind first (thesis 4.5.5; choose_lambda).
    Returns the WorkloadResults or the SearchResults, in workload order."""
    import psutil

    from kit.cli.sustainable import calibrated, choose_lambda, find_sustainable_rate
    from kit.workload import write_spec

    run = Path(req.run_dir)
    run.mkdir(parents=True)
    write_config(req.config, run / "config.toml")
    workloads = req.selected()
    write_spec(dataclasses.replace(req.suite, workloads=workloads), run / "suite.xml")
    results = []
    def step(wl, step_dir, overrides, validate):
        return run_workload(req, wl, step_dir, stage, on_progress, overrides, validate)

    for w in workloads:
        if search is not None:
            results.append(find_sustainable_rate(step, w, run / w.name, search, stage))
        elif calibrate is not None and w.load.profile == "adaptivity":
            found = find_sustainable_rate(step, w, run / w.name / "calibration", calibrate, stage)
            choice = choose_lambda(found, lambda_fraction, 100.0 * (psutil.cpu_count() or 1))
            if choice is None:
                results.append(WorkloadResult(w.name, {p.name: p.value for p in w.params}, len(w.queries),
                                              "not calibrated", "no sustainable rate was confirmed", "NOT VALIDATED",
                                              None, None, 0, None, None, None, None, ""))
            else:
                burst = calibrated(w, choice.lambda_eps)
                stage(f"{w.name}: lambda = {choice.lambda_eps:,.0f} ev/s ({choice.note})")
                results.append(dataclasses.replace(run_workload(req, burst, run / w.name, stage, on_progress),
                                                   lambda_eps=choice.lambda_eps, lambda_rule=choice.note))
        else:
            results.append(run_workload(req, w, run / w.name, stage, on_progress))
        write_summary(req.suite, results, run)       # after every workload: a crash keeps what is done
    report = write_report(req.suite, workloads, results, run)
    stage(f"report: {report}")
    return results


def _profile_of(run_dir: Path):
    from kit.profiles import profile_from_dict

    try:
        return profile_from_dict(json.loads((run_dir / "data" / "manifest.json").read_text())["profile"])
    except (OSError, KeyError, ValueError):
        return None


def write_report(suite: Suite, workloads, results: list, run: Path) -> Path:
    """The suite's report.html: a table of every workload and the chapter 4 charts."""
    from validator.adaptivity import AdaptivityMetrics
    from validator.micro_report import WorkloadPoint, write_suite_report

    points, searched = [], bool(results) and not isinstance(results[0], WorkloadResult)
    for w, r in zip(workloads, results):
        params = {p.name: p.value for p in w.params}
        if searched:
            best = r.best_step()
            step_dir = Path(best.run_dir) if best else None
            streams = len(w.dataset.stream_names)
            points.append(WorkloadPoint(
                w.name, w.experiment, params, len(w.queries), "completed" if best else "unsustainable",
                "PASSED" if r.confirmed else "NOT CONFIRMED", best.p50_ms if best else None,
                best.p99_ms if best else None, best.peak_rss_mib if best else None,
                best.mean_cpu_percent if best else None, None,
                None if r.sustainable_eps is None else r.sustainable_eps * streams, None,
                step_dir / "engine" if step_dir else None, _profile_of(step_dir) if step_dir else None,
                best.state_mib if best else None, **p99_detail(best)))
        else:
            fields = {f.name for f in dataclasses.fields(AdaptivityMetrics)}
            adaptivity = AdaptivityMetrics(**{k: v for k, v in r.adaptivity.items() if k in fields}) \
                if r.adaptivity else None
            wdir = run / w.name
            points.append(WorkloadPoint(
                w.name, w.experiment, params, r.queries, r.status, r.verdict, r.p50_ms, r.p99_ms, r.peak_rss_mib,
                r.mean_cpu_percent, r.input_eps, None, adaptivity,
                wdir / "engine" if (wdir / "engine").exists() else None, _profile_of(wdir), r.state_mib,
                **p99_detail(r)))
    title = f"Microbenchmark suite {suite.name}{' (quick)' if suite.quick else ''}"
    return write_suite_report(title, "sustainable" if searched else "fixed-rate", points, run)


def write_summary(suite: Suite, results: list, run: Path) -> None:
    searched = bool(results) and not isinstance(results[0], WorkloadResult)
    rows = [search_row(r) for r in results] if searched else [r.to_dict() for r in results]
    data = {"kind": "cepkit.micro-summary", "schema_version": 1, "suite": suite.name, "quick": suite.quick,
            "mode": "sustainable" if searched else "fixed-rate", "workloads": rows}
    tmp = run / ".summary.json.tmp"
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(run / "summary.json")
    (run / "summary.md").write_text((search_table(results) if searched else summary_table(results)) + "\n")


def p99_detail(r) -> dict:
    """latency_count, p99_ci_low_ms and p99_ci_high_ms of a WorkloadResult or a search Step (all
    None for no result)."""
    return {k: getattr(r, k) if r is not None else None for k in ("latency_count", "p99_ci_low_ms", "p99_ci_high_ms")}


def _p99(row) -> str:
    """The summary.md p99 cell: value, 95 % interval, small-sample wording (validator.order_stats)."""
    from validator.micro_report import p99_cell

    return p99_cell(row["p99_ms"], row["latency_count"], row["p99_ci_low_ms"], row["p99_ci_high_ms"], missing="-")


def search_row(r) -> dict:
    best = r.best_step()
    return {"workload": r.workload, "sustainable_eps": r.sustainable_eps, "confirmed": r.confirmed,
            "steps": len(r.steps), "p50_ms": best.p50_ms if best else None, "p99_ms": best.p99_ms if best else None,
            **p99_detail(best),
            "peak_rss_mib": best.peak_rss_mib if best else None, "state_mib": best.state_mib if best else None,
            "verdicts": sorted({s.verdict for s in r.steps})}


def search_table(results: list) -> str:
    head = ("workload", "max sustainable ev/s", "confirmed", "steps", "latencies", "p50 ms", "p99 ms (95 % CI)",
            "peak RSS MiB", "state MiB", "verdicts")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        row = search_row(r)
        lines.append(f"| {r.workload} | {_fmt(row['sustainable_eps'], ',.0f')} | {'yes' if r.confirmed else 'no'} | "
                     f"{row['steps']} | {_fmt(row['latency_count'], ',')} | {_fmt(row['p50_ms'], ',')} | "
                     f"{_p99(row)} | "
                     f"{_fmt(row['peak_rss_mib'], ',.0f')} | {_fmt(row['state_mib'], ',.1f')} | "
                     f"{', '.join(row['verdicts'])} |")
    return "\n".join(lines)


def _fmt(v, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, spec)


def summary_table(results: list[WorkloadResult]) -> str:
    head = ("workload", "params", "queries", "events", "in ev/s", "outputs", "latencies", "p50 ms",
            "p99 ms (95 % CI)", "CPU %", "RSS MiB", "state MiB", "run", "verdict")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        params = ", ".join(f"{k}={v}" for k, v in r.params.items())
        lines.append(f"| {r.workload} | {params} | {r.queries} | {_fmt(r.events, ',')} | {_fmt(r.input_eps, ',.0f')} | "
                     f"{r.outputs:,} | {_fmt(r.latency_count, ',')} | {_fmt(r.p50_ms, ',')} | {_p99(r.to_dict())} | "
                     f"{_fmt(r.mean_cpu_percent, '.0f')} | {_fmt(r.peak_rss_mib, ',.0f')} | "
                     f"{_fmt(r.state_mib, ',.1f')} | {r.status} | "
                     f"{r.verdict} |")
    notes = [f"- {r.workload}: lambda {r.lambda_eps:,.0f} ev/s per stream ({r.lambda_rule})"
             for r in results if r.lambda_eps is not None]
    return "\n".join(lines + ([""] + notes if notes else []))
