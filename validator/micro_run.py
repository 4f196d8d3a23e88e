"""Validating one microbenchmark run: each query's output log stream against its reference answers.

The engine saw the dataset's `TS` shifted onto the wall clock (the driver's clocks,
specs/OUTPUT_LOG.md); time-valued output fields (`windowEnd` and any selected `TS`) are shifted
back before comparing, and the triggering event's TS (inputTS shifted back) joins each row's
key. Only tickTS-style pacing at speed 1 keeps time windows meaningful, so a run
at another speed is refused. Latency is event-time latency (arrivalTS - inputTS) per query.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kit.errors import CepkitError
from kit.outputlog import ARRIVAL_TS, INGEST_TS
from kit.profiles import RateProfile
from kit.workload import Workload, output_schema
from kit.records import Field, RecordSchema
from kit.workload.query_base import INPUT_TS, WINDOW_END
from validator.compare import StreamComparison, compare_stream
from validator.latency import LatencyStats, event_time_latency_ms, latency_stats
from validator.micro_partitions import (PARTITION_ROWS, input_index, input_part, merge, partition_columns,
                                       partition_count, read_part, spill, spill_directory)
from validator.micro_reference import expected_for_query
from validator.micro_inputs import load_micro_dataset
from validator.adaptivity import PEAK, AdaptivityMetrics, adaptivity_metrics
from validator.outputlog import Clocks, read_output_log
from validator.recovery import Recovery, recoveries

ADAPTIVITY_METRICS = ("max-latency", "latency-degradation", "recovery-time", "post-peak-latency-variation")
TRIGGER_TS = "triggerTS"      # inputTS in the dataset's time: a comparison key


@dataclass(frozen=True)
class QueryOutcome:
    query_id: str
    kind: str
    comparison: StreamComparison
    latency: LatencyStats

    def to_dict(self) -> dict:
        return {"query": self.query_id, "kind": self.kind, **self.comparison.to_dict(),
                "latency": self.latency.to_dict()}


@dataclass(frozen=True)
class MicroOutcome:
    workload: str
    queries: tuple[QueryOutcome, ...]
    adaptivity: AdaptivityMetrics | None = None
    adaptivity_note: str | None = None       # why no adaptivity metrics were computed, when asked for
    recoveries: tuple[Recovery, ...] = ()    # one per fault injected into the engine

    @property
    def passed(self) -> bool:
        return bool(self.queries) and all(q.comparison.passed for q in self.queries)

    @property
    def verdict(self) -> str:
        return "PASSED" if self.passed else "FAILED"

    def to_dict(self) -> dict:
        return {"workload": self.workload, "verdict": self.verdict, "queries": [q.to_dict() for q in self.queries],
                "adaptivity": self.adaptivity.to_dict() if self.adaptivity else None,
                "adaptivity_note": self.adaptivity_note, "faults": [r.to_dict() for r in self.recoveries]}


def time_fields(query) -> list[str]:
    """Output fields holding a TS value (compared after shifting back to the dataset's time)."""
    return [n for n in output_schema(query).names if n == WINDOW_END or n == "TS" or n.endswith("_TS")]


def shift_ms(clocks: Clocks, log_dir: Path) -> int:
    if clocks.speed != 1:
        raise CepkitError(f"{log_dir}: the run played at speed {clocks.speed:g}; microbenchmark time windows "
                          f"are only checked at speed 1")
    return int(clocks.run_start_wall_ms - clocks.sim_start_ms)


def validate_micro_run(workload: Workload, dataset_dir: Path, log_dir: Path, profile: RateProfile | None = None,
                       partition_rows: int = PARTITION_ROWS) -> tuple[MicroOutcome, np.ndarray]:
    """Compare every query's stream; returns the outcome and all rows' event-time latencies (ms).
    With the load's `profile`, a workload whose metrics include the adaptivity ones (thesis 4.5.5)
    also gets the four adaptivity metrics over all its output rows. A query with more than
    `partition_rows` answers is compared in key partitions where its answers split by key
    (validator/micro_partitions.py)."""
    streams, table = load_micro_dataset(Path(dataset_dir))
    schemas = {q.id: output_schema(q) for q in workload.queries}
    log = read_output_log(log_dir, schemas, only=True, lazy=True)
    shift = shift_ms(log.clocks, Path(log_dir))
    outcomes, every = [], []
    for q in workload.queries:
        split = partition_columns(q)
        parts = partition_count(log.rows(q.id), partition_rows) if split else 1
        if parts == 1:
            comparison, lat = _compare(q, expected_for_query(q, streams, table), log.stream(q.id).copy(), shift)
        else:
            comparison, lat = _compare_in_parts(q, streams, table, log, shift, split, parts)
        every.append(lat)
        outcomes.append(QueryOutcome(q.id, q.KIND, comparison, latency_stats(lat)))
    adaptivity, note = None, None
    # Only a burst run has them (a calibration step at constant load does not).
    if profile is not None and set(workload.metrics) & set(ADAPTIVITY_METRICS) \
            and PEAK in (ph.name for ph in profile.phases):
        rows = [log.stream(q.id) for q in workload.queries]
        rows = [df[[c for c in (ARRIVAL_TS, INPUT_TS, INGEST_TS) if c in df]] for df in rows]
        try:
            adaptivity = adaptivity_metrics(pd.concat(rows, ignore_index=True), profile, log.clocks)
        except CepkitError as e:        # e.g. no output in the peak phase: a finding, not a crash
            note = str(e)
    recovered = recoveries(log.faults, [log.stream(q.id) for q in workload.queries]) if log.faults else ()
    return (MicroOutcome(workload.name, tuple(outcomes), adaptivity, note, recovered),
            np.concatenate(every) if every else np.array([]))


def _compare(q, exp: pd.DataFrame, engine: pd.DataFrame, shift: int) -> tuple[StreamComparison, np.ndarray]:
    """One query's expected rows against the engine's (modified in place: times shifted back)."""
    schema = _schema(q)
    for name in time_fields(q):
        engine[name] = engine[name] - shift
    if WINDOW_END not in schema.names:
        # The triggering event's TS, back in the dataset's time, joins the row's identity:
        # without it a dropped row would shift the pairing of all later rows with that key.
        # (A time window's row is already unique by windowEnd and group, and a plan that
        # cannot name the closing event, such as Spark's own window(), is still checked.)
        engine[TRIGGER_TS] = engine[INPUT_TS] - shift
        exp = exp.assign(**{TRIGGER_TS: exp[INPUT_TS]})
    lat = event_time_latency_ms(engine) if len(engine) else np.array([], dtype=np.int64)
    return compare_stream(exp, engine, schema), lat.astype(np.int32 if _fits_int32(lat) else np.int64)


def _schema(q) -> RecordSchema:
    schema = output_schema(q)
    if WINDOW_END in schema.names:
        return schema
    return RecordSchema(q.id, schema.fields + (Field(TRIGGER_TS, "long"),))


def _fits_int32(lat: np.ndarray) -> bool:
    return not len(lat) or (int(lat.min()) >= np.iinfo(np.int32).min and int(lat.max()) <= np.iinfo(np.int32).max)


def _compare_in_parts(q, streams, table, log, shift: int, split: tuple[str, str], parts: int
                      ) -> tuple[StreamComparison, np.ndarray]:
    key_in, key_out = split
    results, lats = [], []
    index = input_index(streams, key_in, parts)
    empty = _empty_like(log, q.id)
    with spill_directory(log.directory) as tmp:
        paths = spill(log.iter_stream(q.id), key_out, parts, Path(tmp))
        for p, path in enumerate(paths):
            exp = expected_for_query(q, input_part(streams, index, p), table)
            comparison, lat = _compare(q, exp, read_part(path, empty), shift)
            results.append(comparison)
            lats.append(lat)
            path.unlink(missing_ok=True)
    return merge(results, _schema(q)), np.concatenate(lats)


def _empty_like(log, name: str) -> pd.DataFrame:
    """The stream's columns and types without its rows (from its first file, or its schema)."""
    for frame in log.iter_stream(name):
        return frame.iloc[0:0].copy()
    return pd.DataFrame({f.name: pd.Series([], dtype=object) for f in log.schemas[name].fields})
