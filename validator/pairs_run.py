"""Validating a Pairs run: expected answers, comparison with the engine's log, metrics, report.

`validate_pairs(PairsValidation(...))` ties the validator's parts together for one run: the
reference engine's answers for the dataset and strategies, the engine's output log compared
stream by stream, event-time latency, pscore over the measurement interval, and the report. With
no engine log it still writes the expected answers (and a report marked NOT VALIDATED).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kit.errors import CepkitError
from kit.jsonfile import read_json_object
from kit.manifest import Manifest, read_manifest
from kit.profiles import RateProfile, profile_from_dict, whole_run_profile
from kit.records import INDICATOR, MARKET_ORDER
from kit.workload import INPUT_TS, read_strategies
from validator.company_names import names_seed
from validator.compare import PAIRS_KEYS, StreamComparison, compare_stream
from validator.health import HEALTH_CSV, metrics_dir, read_health_report
from validator.latency import pscore_for_run, stream_latency
from validator.outputlog import Clocks, read_output_log, read_resources
from validator.pairs_reference import StrategyParams, compute_reference
from validator.phase_table import PhaseRow, phase_rows, phase_table_text
from validator.recovery import Recovery, recoveries
from validator.report import format_text_report, pscore_lines
from validator.report_page import ReportInputs, StrategyChart, run_record_facts, write_report

SCHEMAS = {"Indicator": INDICATOR, "MarketOrder": MARKET_ORDER}


@dataclass(frozen=True)
class PairsValidation:
    """What to validate: a dataset, its strategies, optionally an engine's output log."""

    data_dir: Path
    strategies_file: Path
    out_dir: Path
    log: Path | None = None
    chart_strategy: str | None = None
    # The measurement interval in ms on the run's time axis; None ends: the profile's (see run_profile).
    measure_ms: tuple[int | None, int | None] = (None, None)
    # Verify the dataset's files against its manifest (sha256, CSV row counts); False (--no-verify)
    # still checks presence, paths, sizes and Parquet row counts (kit.manifest).
    verify: bool = True
    # The dataset's manifest, when the caller has read (and verified) it already: not read again.
    manifest: Manifest | None = None

    def __post_init__(self) -> None:
        if not Path(self.data_dir).is_dir():
            raise CepkitError(f"{self.data_dir}: dataset directory not found")
        if not Path(self.strategies_file).is_file():
            raise CepkitError(f"{self.strategies_file}: strategies file not found")


@dataclass(frozen=True)
class PairsOutcome:
    verdict: str
    comparisons: tuple[StreamComparison, ...]
    report: Path
    text: str
    pscore: float | None
    p99_ms: float | None = None          # MarketOrder event-time latency p99 in the measurement interval
    latency_p99_ms: dict | None = None   # per stream, over the whole run
    pscore_note: str | None = None       # why there is no pscore, when there is none
    p99_count: int | None = None         # the MarketOrder rows in the measurement interval behind p99 and pscore
    p99_ci_ms: tuple | None = None       # (low, high) 95 % interval of that p99 in ms; None on an open side
    pscore_ci: tuple | None = None       # (low, high) 95 % interval of the pscore; None on an open side
    lines: tuple[str, ...] = ()          # p99 and pscore in words with count and interval (report.pscore_lines)
    recoveries: tuple[Recovery, ...] = ()  # one per fault injected into the engine (validator/recovery.py)
    phases: tuple[PhaseRow, ...] = ()    # per phase of the run's profile: input rate, outputs, p50/p99


def _chart(strategy: str | None, expected: dict[str, pd.DataFrame]) -> StrategyChart | None:
    orders = expected["MarketOrder"]
    if strategy is None:
        if orders.empty:
            return None
        strategy = str(orders["strategy"].iloc[0])
    ind = expected["Indicator"]
    return StrategyChart(strategy, ind[ind.strategy == strategy], orders[orders.strategy == strategy])


def run_profile(manifest: dict, clocks: Clocks | None, outputs, measure_ms=(None, None)) -> RateProfile | None:
    """The time axis outputs are placed on, and its measurement interval (specs/VALIDATION.md).

    A run paced by the dataset's times follows the dataset's rate profile, or for a dataset with
    none (converted from a user's CSV) one phase spanning its recorded times; a run at a constant
    rate or pulled by the engine has no such relation, so its axis is wall time since the run
    start and the profile is the whole run (up to the last output's inputTS). `measure_ms` moves
    the measurement interval; without it the profile's measured phases (all of a whole run) count.
    """
    recorded = clocks is None or clocks.pacing == "tickts"
    if recorded and isinstance(manifest.get("profile"), dict):
        profile = profile_from_dict(manifest["profile"])
    elif recorded and isinstance(manifest.get("last_epoch_ms"), int):
        span = manifest["last_epoch_ms"] - int(manifest["start_epoch_ms"]) + 1
        profile = whole_run_profile(span, int(manifest.get("total_rows") or 1))
    elif clocks is not None:
        last = max((float(np.nanmax(clocks.run_ms(df[INPUT_TS].astype("float64").to_numpy())))
                    for df in outputs if len(df) and df[INPUT_TS].notna().any()), default=0.0)
        profile = whole_run_profile(int(last) + 1, int(manifest.get("total_rows") or 1))
    else:
        return None
    if measure_ms != (None, None):
        profile = profile.with_measurement(*measure_ms)
    return profile


def _run_record(path: Path) -> dict | None:
    """The engine run's run.json beside its output log, for what it records of the run (plan, what
    bounded it); None where there is none (an external engine's log) or it cannot be read."""
    try:
        return read_json_object(path, kind="run")
    except CepkitError:
        return None


def validate_pairs(v: PairsValidation) -> PairsOutcome:
    spec = read_strategies(v.strategies_file)
    params = [StrategyParams.of(s) for s in spec.strategies]
    dataset = v.manifest or read_manifest(Path(v.data_dir), verify=v.verify)
    dataset.rate_profile()        # a malformed profile is one line naming the manifest
    manifest = dict(dataset.doc)
    ref = compute_reference(dataset, params, count_from_ms=dataset.start_epoch_ms,
                            strategies_file=Path(v.strategies_file))
    expected = {"Indicator": ref.indicators.drop(columns="inputOffset"),
                "MarketOrder": ref.orders.drop(columns="inputOffset")}
    profile = run_profile(manifest, None, (), v.measure_ms)
    # Every input is read (and refused if malformed) before anything is written.
    log = read_output_log(v.log, SCHEMAS, only=True) if v.log is not None else None
    out = Path(v.out_dir)
    (out / "expected").mkdir(parents=True, exist_ok=False)
    for name, df in expected.items():
        df.to_parquet(out / "expected" / f"{name}.parquet", index=False)
    ref.final.to_csv(out / "expected" / "final-positions.csv", index=False)
    comparisons: list[StreamComparison] = []
    latency, pscore, clocks, resources, pscore_note, recovered, health = [], None, None, None, None, (), None
    plan = bound = None
    if log is not None:
        clocks = log.clocks
        profile = run_profile(manifest, clocks, [log.stream(name) for name in SCHEMAS], v.measure_ms)
        for name, schema in SCHEMAS.items():
            engine = log.stream(name)
            comparisons.append(compare_stream(expected[name], engine, schema, PAIRS_KEYS[name]))
            latency.append(stream_latency(name, engine, clocks, profile))
        try:
            pscore = pscore_for_run(spec.scale_factor, log.stream("MarketOrder"), profile, clocks)
        except CepkitError as e:  # e.g. no order in the measurement interval: a fact, not an error
            pscore_note = str(e)
        recovered = recoveries(log.faults, [log.stream(name) for name in SCHEMAS])
        # metrics/ lies beside outputs/ in the engine run directory (the log may be output-log.json).
        metrics = metrics_dir(v.log)
        resources = read_resources(metrics / "resources.csv")
        health = read_health_report(metrics / HEALTH_CSV)      # None: a run without one (older, external)
        plan, bound = run_record_facts(_run_record(metrics.parent / "run.json"))
    phases = () if profile is None else phase_rows(
        profile, clocks, {name: log.stream(name) for name in SCHEMAS} if log is not None else {}, ref.input_per_second)
    inputs = ReportInputs(
        title=f"Pairs validation, SF={spec.scale_factor}",
        run_info={"dataset": str(v.data_dir), "strategies": f"{v.strategies_file} ({len(params)})",
                  "engine log": str(v.log) if v.log else "none (expected answers only)",
                  "expected Indicator rows": len(expected["Indicator"]),
                  "expected MarketOrder rows": len(expected["MarketOrder"]),
                  **({"pscore": f"not computed: {pscore_note}"} if pscore_note else {})},
        comparisons=tuple(comparisons), latency=tuple(latency), pscore=pscore, profile=profile, clocks=clocks,
        input_series=ref.input_per_second, resources=resources,
        chart=_chart(v.chart_strategy, expected), recoveries=recovered,
        strategies=tuple(params), names_seed=names_seed(manifest), phase_table=phases, health=health,
        plan=plan, bound=bound)
    report = write_report(inputs, out)
    text = format_text_report(tuple(comparisons), latency=tuple(latency)) if comparisons \
        else "no engine log: expected answers only"
    if log is not None and phases:
        text += "\n\n" + phase_table_text(phases, tuple(SCHEMAS)[::-1])     # MarketOrder first: the scored one
    return PairsOutcome(inputs.verdict, tuple(comparisons), report, text,
                        None if pscore is None else pscore.pscore,
                        None if pscore is None else pscore.p99_latency_s * 1000.0,
                        {lat.stream: lat.event.p99_ms for lat in latency} if latency else None, pscore_note,
                        None if pscore is None else pscore.mi_rows,
                        None if pscore is None else (pscore.p99_ci_low_ms, pscore.p99_ci_high_ms),
                        None if pscore is None else (pscore.pscore_ci_low, pscore.pscore_ci_high),
                        (*pscore_lines(pscore, pscore_note), *(r.line() for r in recovered)) if v.log is not None else (),
                        recovered, phases)
