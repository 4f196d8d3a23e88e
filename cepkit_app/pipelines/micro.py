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
    (--sustainable: <run>/<workload>/search.json, search.jsonl and a step-NN-... directory per
    step, each laid out as a workload's; with --repeat K, one search each in <run>/<workload>/run-1
    ... run-K)
    <run>/summary.json, summary.md   one row per workload
    <run>/report.html                the suite's report: table, charts per experiment, adaptivity, memory
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

from cepkit_app.pipelines.engine import RunProgress, engine_run_spec, plan_lines, refused_line, restart_line, validates
from cepkit_app.pipelines.micro_summary import WorkloadResult, write_report, write_summary
from cepkit_app.pipelines.sustainable import calibrated, choose_lambda, find_sustainable_rate, repeat_search
from datagen.micro import generate_micro
from harness.config import DriverConfig
from harness.engine_run import run_engine
from harness.postgres import PostgresServer, jdbc_driver_jar, load_table, own_database, read_database_dsn
from kit.config import Config, with_settings, write_config
from kit.errors import CepkitError
from kit.jsonfile import dumps_json
from kit.profiles import profile_from_dict
from kit.workload import (Suite, TableJoin, TimeWindowAggregation, TwoLevelAggregation, Workload, output_schema,
                          write_spec)
from translators.output import write_program
from translators.registry import engine_module
from translators.request import MicroTranslation, table_of
from validator.latency import latency_stats
from validator.micro_run import validate_micro_run
from validator.report import format_text_report

Stage = Callable[[str], None]


@dataclass(frozen=True)
class MicroSuiteRequest:
    """One suite run: the resolved config (each workload sets its dataset and load in it), the
    suite, and `workloads`, the names to keep (default: all)."""

    config: Config
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

    def selected(self) -> tuple[Workload, ...]:
        return tuple(w for w in self.suite.workloads if not self.workloads or w.name in self.workloads)


def align_ms(workload: Workload) -> int:
    """The driver's start alignment: the rebased TS must keep every time window's boundaries
    (specs/SEMANTICS.md section 1), so a multiple of every slideMs; whole seconds otherwise."""
    out = 1000
    for q in workload.queries:
        if isinstance(q, (TimeWindowAggregation, TwoLevelAggregation)):
            out = math.lcm(out, q.slide_ms)
    return out


def run_workload(req: MicroSuiteRequest, workload: Workload, wdir: Path, stage: Stage, on_progress=None,
                 run_changes: Mapping[str, object] = {}, validate: bool = True) -> WorkloadResult:
    """One fixed-rate run of `workload` in `wdir`; `run_changes` are `[run]` settings of this run
    only (a search step's backlog limits)."""
    cfg = dataclasses.replace(req.config, run=dataclasses.replace(req.config.run, **run_changes)) \
        if run_changes else req.config
    wcfg = with_settings(cfg, workload.micro_settings())
    jdbc_jar = jdbc_driver_jar() if cfg.run.database_join == "jdbc" and _joins_database(workload) else None
    stage(f"{workload.name}: datagen ({workload.dataset.streams} stream(s), {workload.load.rate_eps:g} ev/s)")
    ds = generate_micro(wcfg.micro, wdir / "data", config_toml=wcfg.to_toml())
    spec_path = write_spec(workload, wdir / "workload.xml")
    translation = MicroTranslation.from_files(spec_path, ds.directory, database_join=cfg.run.database_join,
                                              trigger=cfg.run.trigger, work=cfg.run.work)
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
    profile = profile_from_dict(ds.manifest["profile"])
    duration_s = profile.duration_ms / 1000.0
    mean_eps = ds.total_rows / max(duration_s, 1e-9)
    # The dataset was generated by this command a moment ago (the validator still verifies it).
    driver = DriverConfig(dataset_dir=ds.directory, pacing="tickts", speed=1.0, stamp=cfg.run.stamp,
                          align_ms=align_ms(workload), hold=True, verify=False)
    jars = (("spark.jars", str(jdbc_jar)),) if jdbc_jar is not None else ()
    with _database(workload, ds.directory, wdir, stage, cfg.run) as env:
        spec = engine_run_spec(cfg, program, wdir / "engine", driver,
                               {q.id: output_schema(q).arrow_schema() for q in workload.queries}, mean_eps,
                               extra_conf=jars, secret_env=env, say=stage)
        result = run_engine(spec, on_progress=_on_the_clock(on_progress, profile.duration_ms), on_event=stage)
    if result.status != "completed":
        stage(f"{workload.name}: run {result.status}: {result.message}")
    # The sink's latency histogram covers every row; validation recomputes it from the log.
    verdict, text, p50, p99, adaptivity = "NOT VALIDATED", "", result.latency_p50_ms, result.latency_p99_ms, None
    stats = None
    for line in plan_lines(result):
        stage(f"{workload.name}: {line}")
    for r in result.restarts:
        stage(f"{workload.name}: {restart_line(r)}")
    if refused_line(result):
        stage(f"{workload.name}: {refused_line(result)}")
    if validates(result) and validate:     # not a run stopped as unsustainable (proves nothing)
        stage(f"{workload.name}: validate")
        outcome, latencies = validate_micro_run(workload, ds.directory, wdir / "engine" / "outputs", profile)
        adaptivity = outcome.adaptivity.to_dict() if outcome.adaptivity else None
        if outcome.adaptivity_note:
            stage(f"{workload.name}: no adaptivity metrics: {outcome.adaptivity_note}")
        (wdir / "validation.json").write_text(dumps_json(outcome.to_dict()))
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
        p99_ci_high_ms=None if stats is None else stats.p99_ci_high_ms,
        connectors=dict(result.connectors) if result.connectors else None,
        bound=dict(result.bound) if result.bound else None, work=dict(result.work) if result.work else None)


def _joins_database(workload: Workload) -> bool:
    return any(isinstance(q, TableJoin) and q.storage == "database" for q in workload.queries)


@contextlib.contextmanager
def _database(workload: Workload, data: Path, wdir: Path, stage: Stage, run):
    """For J3: the dataset's table in PostgreSQL while the engine runs, a private server's (on
    run.feed_bind, where a cluster's workers reach the harness, with a password of its own) or in
    a fresh schema of the user's own database (run.database_dsn); yields the program's secret
    environment (its connection string, password included: harness/run_spec.py secret_env)."""
    if not _joins_database(workload):
        yield ()
        return
    table = table_of(data)
    if table is None:
        raise CepkitError(f"workload {workload.name}: joins a database table but {data} has none")
    if run.database_dsn:
        with own_database(read_database_dsn(run.database_dsn), "run.database_dsn") as (dsn, schema):
            rows = load_table(dsn, table)
            stage(f"{workload.name}: your database ({run.database_dsn}) holds the table in schema {schema} "
                  f"({rows:,} rows)")
            yield (("CEPKIT_PG_DSN", dsn),)
        return
    advertised = run.advertised_host or (socket.gethostname() if run.feed_bind == "0.0.0.0" else None)
    with PostgresServer(wdir / "postgres", host=run.feed_bind, advertised=advertised) as pg:
        rows = pg.load_table(table)
        stage(f"{workload.name}: PostgreSQL on {pg.host}:{pg.port} holds the table ({rows:,} rows)")
        yield (("CEPKIT_PG_DSN", pg.dsn), ("CEPKIT_PG_JDBC_URL", pg.jdbc_url))


def _on_the_clock(on_progress, duration_ms: int):
    """Micro loads have no named phases: place a snapshot on the run's own clock."""
    if on_progress is None:
        return None
    return lambda snap: on_progress(RunProgress(snap, "run" if snap.sim_ms >= 0 else "lead-in", duration_ms))


def run_micro_suite(req: MicroSuiteRequest, *, stage: Stage = lambda s: None, on_progress=None,
                    search=None, calibrate=None, lambda_fraction: float = 0.75, repeat: int = 1) -> list:
    """Fixed-rate runs at each workload's own load; with `search` (a cepkit_app.pipelines.sustainable.SearchConfig)
    a maximum-sustainable-throughput search per workload instead, made `repeat` times over the same
    inputs when `repeat` > 1 (a RepeatedSearch per workload, its searches in <workload>/run-i/;
    only with `search`). With `calibrate` (a SearchConfig),
    a burst (adaptivity-profile) workload first gets a search at constant load and then runs at the
    lambda where the engine used `lambda_fraction` of the machine's CPU during that search, or
    `lambda_fraction` x the rate found if it fell behind first (thesis 4.5.5; choose_lambda).
    Returns the WorkloadResults or the SearchResults, in workload order."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise CepkitError(f"micro suite: repeat must be a whole number >= 1, got {repeat!r}")
    if repeat > 1 and search is None:
        raise CepkitError(f"micro suite: repeating ({repeat} times) is for the sustainable-throughput search only")
    run = Path(req.run_dir)
    run.mkdir(parents=True)
    write_config(req.config, run / "config.toml")
    workloads = req.selected()
    write_spec(dataclasses.replace(req.suite, workloads=workloads), run / "suite.xml")
    results = []
    def step(wl, step_dir, run_changes, validate):
        return run_workload(req, wl, step_dir, stage, on_progress, run_changes, validate)

    for w in workloads:
        if search is not None and repeat > 1:
            results.append(repeat_search(step, w, run / w.name, search, repeat, stage))
        elif search is not None:
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
