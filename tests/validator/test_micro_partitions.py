"""Validating a keyed pattern's output in key partitions gives the outcome the whole comparison
gives (counts, mismatches, duplicates, listed answers, latencies), leaves no spilled file behind,
and the output log reads lazily, file by file and column by column, for runs too large to hold."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import validator.micro_run as micro_run
from datagen.micro import generate_micro
from harness.sink import SinkServer
from kit.config import load_config
from kit.errors import CepkitError
from kit.outputlog import ARRIVAL_TS
from kit.shipped import suite_path
from kit.wire.sink_client import SinkClient
from kit.workload import Filter, INPUT_TS, Load, read_suite
from validator.micro_partitions import partition_columns, partition_count
from validator.micro_reference import expected_for_dataset
from validator.micro_run import validate_micro_run
from validator.outputlog import read_output_log

SHIFT_MS = 5 * 60_000


def _workload(name: str):
    w = next(w for w in read_suite(suite_path("patterns", quick=True)).workloads if w.name == name)
    return dataclasses.replace(w, load=Load("constant", 400.0, 8000))


def _write_log(out, stream: str, df: pd.DataFrame, files: int) -> None:
    clocks = {"run_start_wall_ms": 1_800_000_060_000, "sim_start_ms": 1_800_000_060_000 - SHIFT_MS, "speed": 1.0}
    with SinkServer(out, roll_rows=-(-len(df) // files)) as sink, SinkClient(port=sink.port) as client:
        for batch, part in enumerate(np.array_split(np.arange(len(df)), files)):
            client.emit(stream, batch, pa.Table.from_pandas(df.iloc[part], preserve_index=False))
        sink.finish(clocks)


@pytest.fixture(params=["patterns-consumption-all-all", "patterns-consumption-one-one"])
def damaged_run(request, tmp_path):
    """A keyed pattern's answers written as an engine would, with every kind of incorrect answer."""
    w = _workload(request.param)
    data = generate_micro(load_config(settings=w.micro_settings()).micro, tmp_path / "data").directory
    exp = expected_for_dataset(w.query_set, data)["q7"]
    eng = exp.assign(inputTS=exp[INPUT_TS] + SHIFT_MS, a1_TS=exp["a1_TS"] + SHIFT_MS)
    eng = eng.drop(index=eng.index[[3, 40]])                                    # two missing
    eng.loc[eng.index[7], "a2_A1"] += 0.5                                       # one wrong
    eng = pd.concat([eng, eng.iloc[[11, 12]]], ignore_index=True)               # two duplicates
    stray = eng.iloc[[20]].assign(a1_ID=pd.array([None], dtype="Int32"))        # undue, with a null key
    eng = pd.concat([eng.astype({"a1_ID": "Int32"}), stray], ignore_index=True)
    eng = eng.sample(frac=1.0, random_state=1).reset_index(drop=True)           # any arrival order
    _write_log(tmp_path / "outputs", "q7", eng, files=6)
    assert len(exp) > 300
    return w, data, tmp_path / "outputs", len(exp)


def test_partitions_give_the_whole_comparison(damaged_run):
    w, data, out, n = damaged_run
    whole, whole_lat = validate_micro_run(w, data, out)
    parted, parted_lat = validate_micro_run(w, data, out, partition_rows=n // 7)
    assert partition_count(n, n // 7) >= 7
    assert parted.to_dict() == whole.to_dict()
    c = whole.queries[0].comparison
    assert (c.missing, c.wrong, c.duplicates, c.undue) == (2, 1, 2, 3) and whole.verdict == "FAILED"
    listed = [q.comparison.incorrect for q in (whole.queries[0], parted.queries[0])]
    assert len(listed[0]) == c.incorrect_count
    assert sorted(map(repr, listed[0].to_dict("records"))) == sorted(map(repr, listed[1].to_dict("records")))
    assert np.array_equal(np.sort(whole_lat), np.sort(parted_lat)) and len(whole_lat) == c.engine
    assert not list(out.parent.glob(".cepkit-validate-*"))                    # the spill is gone


def test_a_correct_log_passes_in_partitions(tmp_path):
    w = _workload("patterns-consumption-all-all")
    data = generate_micro(load_config(settings=w.micro_settings()).micro, tmp_path / "data").directory
    exp = expected_for_dataset(w.query_set, data)["q7"]
    eng = exp.assign(inputTS=exp[INPUT_TS] + SHIFT_MS, a1_TS=exp["a1_TS"] + SHIFT_MS)
    _write_log(tmp_path / "outputs", "q7", eng, files=3)
    outcome, lat = validate_micro_run(w, data, tmp_path / "outputs", partition_rows=100)
    assert outcome.verdict == "PASSED" and outcome.queries[0].comparison.correct == len(exp) == len(lat)


def test_a_failure_midway_leaves_no_spilled_file(damaged_run, monkeypatch):
    w, data, out, n = damaged_run
    calls = []

    def failing(*args):
        calls.append(1)
        if len(calls) == 3:
            raise CepkitError("stopped on purpose")
        return real(*args)

    real = micro_run.expected_for_query
    monkeypatch.setattr(micro_run, "expected_for_query", failing)
    with pytest.raises(CepkitError, match="on purpose"):
        validate_micro_run(w, data, out, partition_rows=n // 5)
    assert len(calls) == 3 and not list(out.parent.glob(".cepkit-validate-*"))


def test_only_keyed_patterns_naming_their_key_are_split():
    assert partition_columns(_workload("patterns-consumption-all-all").queries[0]) == ("ID", "a1_ID")
    assert partition_columns(Filter("f", "S1", ("ID", "A1"), ())) is None
    assert partition_count(None) == partition_count(10, 10) == 1 and partition_count(11, 10) == 2
    with pytest.raises(CepkitError, match=">= 1"):
        partition_count(5, 0)


def test_a_lazy_log_reads_a_stream_when_asked_file_by_file_and_column_by_column(damaged_run):
    w, data, out, n = damaged_run
    log = read_output_log(out, lazy=True)
    assert log.rows("q7") == n - 2 + 2 + 1
    frames = list(log.iter_stream("q7", (ARRIVAL_TS, INPUT_TS)))
    assert len(frames) == 6 and all(sorted(f.columns) == sorted([ARRIVAL_TS, INPUT_TS]) for f in frames)
    assert sum(len(f) for f in frames) == log.rows("q7") == len(log.stream("q7"))
    with pytest.raises(CepkitError, match="no stream 'nope'"):
        log.rows("nope")
    broken = log.files["q7"][-1]
    broken.write_bytes(b"not parquet")
    lazy = read_output_log(out, lazy=True)                  # nothing read yet, so nothing wrong yet
    with pytest.raises(CepkitError, match=f"{broken.name}: cannot read as Parquet"):
        lazy.stream("q7")
    with pytest.raises(CepkitError, match=f"{broken.name}: cannot read as Parquet"):
        read_output_log(out)
