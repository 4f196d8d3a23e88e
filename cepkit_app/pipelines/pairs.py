"""The whole Pairs benchmark in one call: datagen -> querygen -> translate -> run -> validate.

`run_pairs_pipeline(PairsRunRequest(...))` is what `cepkit pairs` and benchmarks/pairs_sweep.py
call. Everything lands in one new run directory:

    <run>/config.toml            the resolved configuration
    <run>/data/                  the tick dataset (unless an existing one was given)
    <run>/strategies.xml         the strategies (unless given)
    <run>/program.py             the generated engine program
    <run>/engine/                the harness run: outputs/, metrics/, logs/, run.json, versions.json
    <run>/report/                the validation: report.html, summary.json, expected/
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from cepkit_app.pipelines.engine import RunProgress, engine_run_spec, plan_lines, refused_line, restart_line, validates
from datagen.pairs import generate_pairs
from harness.config import DriverConfig
from harness.engine_run import run_engine
from kit.config import Config, write_config
from kit.errors import CepkitError
from kit.manifest import Manifest, load_manifest, read_manifest
from kit.profiles import profile_from_dict, whole_run_profile
from kit.records import INDICATOR, MARKET_ORDER
from kit.workload import StrategySet, load_aux, read_strategies, write_spec
from querygen.output import write_strategies
from translators.output import write_program
from translators.registry import engine_module
from translators.request import PairsTranslation
from validator.pairs_run import PairsValidation, validate_pairs


@dataclass(frozen=True)
class PairsRunRequest:
    """One Pairs run. `data_dir`/`strategies_file` reuse existing inputs instead of generating
    them; `strategy_limit` keeps only the first N strategies (e.g. for the per-strategy plan)."""

    config: Config
    run_dir: Path
    data_dir: Path | None = None
    strategies_file: Path | None = None
    strategy_limit: int | None = None
    chart_strategy: str | None = None
    verify: bool = True         # check a given dataset's files against its manifest (sha256, rows)

    def __post_init__(self) -> None:
        if Path(self.run_dir).exists():
            raise CepkitError(f"{self.run_dir}: run directory already exists; refusing to overwrite it")
        if self.strategy_limit is not None and self.strategy_limit < 1:
            raise CepkitError(f"strategy limit must be >= 1, got {self.strategy_limit}")
        for name in ("data_dir", "strategies_file"):
            p = getattr(self, name)
            if p is not None and not Path(p).exists():
                raise CepkitError(f"{p}: not found")


@dataclass(frozen=True)
class PairsRunOutcome:
    run_dir: Path
    status: str                 # the engine run's status: completed, unsustainable, failed
    message: str
    verdict: str                # the validator's: PASSED, FAILED, NOT VALIDATED
    text: str                   # the validator's text report
    report: Path | None
    pscore: float | None
    p99_ms: float | None        # event-time latency of MarketOrder rows in the measurement interval
    engine: object              # harness EngineRunResult
    lines: tuple[str, ...] = ()  # p99 and pscore in words, with their order count and 95 % interval


Stage = Callable[[str], None]


def prepare_inputs(req: PairsRunRequest, stage: Stage, data_progress=None) -> tuple[Path, Path]:
    """The dataset and strategies of the run: given, or generated into the run directory."""
    run = Path(req.run_dir)
    cfg = req.config
    data = Path(req.data_dir) if req.data_dir else None
    if data is None:
        stage(f"datagen: SF={cfg.pairs.scale_factor}, {cfg.pairs.rate.profile}"
              f"{' (quick)' if cfg.pairs.rate.quick else ''} profile")
        data = generate_pairs(cfg.pairs, run / "data", config_toml=cfg.to_toml(), progress=data_progress).directory
    strategies = run / "strategies.xml"
    if req.strategies_file:
        shutil.copyfile(req.strategies_file, strategies)
    else:
        stage("querygen: strategies")
        write_strategies(load_aux(data), cfg.pairs.seed, strategies, cfg.pairs.strategies)
    if req.strategy_limit is not None:
        spec = read_strategies(strategies)
        if req.strategy_limit < len(spec.strategies):
            strategies.rename(run / "strategies-all.xml")
            write_spec(StrategySet(spec.scale_factor, spec.seed, spec.strategies[:req.strategy_limit]), strategies)
    return data, strategies


def driver_config(cfg: Config, data: Path):
    """The driver's pacing for `run.replay`: the data's recorded times scaled by `run.speed`, a
    constant `run.replay_rate_eps`, or as fast as the engine pulls (send stamps: no due times)."""
    r = cfg.run
    pacing = {"recorded": dict(pacing="tickts", speed=r.speed, stamp=r.stamp),
              "constant": dict(pacing="rate", rate_eps=r.replay_rate_eps, stamp=r.stamp),
              "pull": dict(pacing="pull", stamp="send")}[r.replay]
    # Pairs windows are over tickTS, which the driver never rewrites: no need to wait for a whole
    # minute to align the run start (specs/DRIVER.md, Clocks).
    # The pipeline verified the dataset once already (run_pairs_pipeline): no second hashing.
    return DriverConfig(dataset_dir=data, align_ms=1000, hold=True, verify=False, **pacing)


def mean_release_eps(cfg: Config, manifest: dict) -> float | None:
    """Events per wall second the driver releases on average; None when the engine sets the pace."""
    if cfg.run.replay == "pull":
        return None
    if cfg.run.replay == "constant":
        return float(cfg.run.replay_rate_eps)
    rows = int(manifest["total_rows"])
    if isinstance(manifest.get("profile"), dict):
        span_ms = manifest["profile"]["duration_ms"]
    else:                    # a converted dataset: its recorded span
        span_ms = int(manifest["last_epoch_ms"]) - int(manifest["start_epoch_ms"]) + 1
    return rows / max(span_ms / 1000.0, 1e-9) * cfg.run.speed


def run_pairs_pipeline(req: PairsRunRequest, *, stage: Stage = lambda s: None, data_progress=None,
                       on_progress=None, verify_progress=None) -> PairsRunOutcome:
    cfg = req.config
    run = Path(req.run_dir)
    given: Manifest | None = None
    if req.data_dir is not None:         # a bad given dataset is one line before anything is written
        given = read_manifest(req.data_dir, verify=req.verify, progress=verify_progress)
    run.mkdir(parents=True)
    try:
        write_config(cfg, run / "config.toml")
        data, strategies = prepare_inputs(req, stage, data_progress)
        stage(f"translate: {cfg.run.engine}, {cfg.run.plan} plan")
        translation = PairsTranslation.from_file(strategies, cfg.run.plan, cfg.run.buckets, cfg.run.trigger,
                                                 cfg.run.work)
        program = write_program(engine_module(cfg.run.engine).translate_pairs(translation), run / "program.py")
        # A given dataset was verified above, a generated one was just written: read, not re-hashed.
        dataset = given or load_manifest(data)
        manifest = dataset.doc
    except BaseException:
        # Nothing ran yet: a run directory holding only inputs would look like a run. (Once the
        # engine has started, the directory is kept whatever happens, as partial results.)
        shutil.rmtree(run, ignore_errors=True)
        raise
    stage(f"run: {len(translation.strategies)} strategies on {cfg.run.master}, {_replay_text(cfg, manifest)}")
    spec = engine_run_spec(cfg, program, run / "engine", driver_config(cfg, data),
                           {"Indicator": INDICATOR.arrow_schema(), "MarketOrder": MARKET_ORDER.arrow_schema()},
                           mean_release_eps(cfg, manifest), say=stage)
    result = run_engine(spec, on_progress=_with_phase(on_progress, cfg, manifest), on_event=stage)

    # What the command line says of the run besides its figures: each death, any refused stranger.
    notes = (plan_lines(result) + tuple(restart_line(r) for r in result.restarts)
             + tuple(filter(None, [refused_line(result)])))
    if not validates(result):      # a run stopped as unsustainable on purpose proves nothing
        return PairsRunOutcome(run, result.status, result.message, "NOT VALIDATED", "", None, None, None, result,
                               notes)
    stage("validate: reference answers, comparison, latency, pscore" +
          (" (of what a failed run put out: answers it never gave count as missing)" if result.status == "failed"
           else ""))
    outcome = validate_pairs(PairsValidation(data, strategies, run / "report", result.output_log,
                                             req.chart_strategy, cfg.run.measure_ms, verify=False, manifest=dataset))
    return PairsRunOutcome(run, result.status, result.message, outcome.verdict, outcome.text, outcome.report,
                           outcome.pscore, outcome.p99_ms, result, notes + tuple(outcome.lines))


def _replay_text(cfg: Config, manifest: dict) -> str:
    if cfg.run.replay == "pull":
        return "as fast as the engine pulls"
    eps = mean_release_eps(cfg, manifest)
    if cfg.run.replay == "constant":
        return f"{eps:,.0f} ev/s constant"
    return f"recorded pace x {cfg.run.speed:g} (mean {eps:,.0f} ev/s)"


def _with_phase(on_progress, cfg: Config, manifest: dict):
    if on_progress is None:
        return None
    if cfg.run.replay == "recorded" and isinstance(manifest.get("profile"), dict):
        profile = profile_from_dict(manifest["profile"])
    else:    # no profile to follow: one phase "run" (its length is only an estimate when pulled)
        eps = mean_release_eps(cfg, manifest)
        rows = int(manifest["total_rows"])
        span_ms = int(rows / eps * 1000) if eps else 1
        profile = whole_run_profile(span_ms * (cfg.run.speed if cfg.run.replay == "recorded" else 1), rows)
    starts = profile.phase_starts_ms()

    def callback(snap) -> None:
        t = snap.sim_ms
        i = int(np.searchsorted(starts, t, side="right")) - 1
        phase = "lead-in" if t < 0 else "drain" if t >= profile.duration_ms else profile.phases[i].name
        on_progress(RunProgress(snap, phase, profile.duration_ms))

    return callback
