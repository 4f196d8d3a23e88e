"""The driver-run cores (spark_runtime/driver_cores.py) without Spark: a micro-batch's collected
table in, the queries' rows out, states in files that make a replayed batch give the same rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from kit.workload import Aggregate, CountWindowAggregation, WindowJoin
from spark_runtime.driver_cores import INPUT_PREFIX, INPUT_STREAM, KEEP, DriverCores
from runtime_common.micro_cores import CORES
from translators.micro_literal import query_literal

Q2 = query_literal(CountWindowAggregation("q2", "S1", 10, 1, (Aggregate("SUM", "A1", "s"),), ("ID",)))
OUT_COLUMNS = ["stream", "ID", "s", "inputTS", "ingestTS"]
OUT_TYPES = [pa.string(), pa.int32(), pa.float64(), pa.int64(), pa.int64()]
INPUT_COLUMNS = ["ID", "A1", "TS", "offset", "ingestTS", "stream"]


def _events(n=200, seed=4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"ID": rng.integers(1, 5, n).astype(np.int32), "A1": rng.uniform(0, 100, n),
                         "TS": np.sort(rng.integers(0, 20_000, n)).astype(np.int64),
                         "offset": np.arange(n, dtype=np.int64), "ingestTS": np.arange(n, dtype=np.int64) + 7,
                         "stream": "S1"})


def _collected(events: pd.DataFrame, other_rows: int = 0) -> pa.Table:
    """What foreachBatch collects: other queries' rows, then the pass-through events (shuffled:
    the stage must sort by offset)."""
    events = events.sample(frac=1.0, random_state=1)
    n = len(events) + other_rows
    cols = {"stream": ["f1"] * other_rows + [INPUT_STREAM] * len(events)}
    for name, typ in zip(OUT_COLUMNS[1:], OUT_TYPES[1:]):
        cols[name] = pa.array([1] * other_rows + [None] * len(events), typ) if name != "s" else \
            pa.array([0.5] * other_rows + [None] * len(events), typ)
    for c in INPUT_COLUMNS:
        cols[INPUT_PREFIX + c] = [None] * other_rows + events[c].tolist()
    table = pa.table({k: pa.array(v) if not isinstance(v, pa.Array) else v for k, v in cols.items()})
    assert table.num_rows == n
    return table


def _stage(tmp_path, copies=None):
    stage = DriverCores([Q2], copies or {"q2": ["q2"]}, OUT_COLUMNS, INPUT_COLUMNS)
    stage.open(str(tmp_path / "checkpoint"))
    return stage


def _direct(events: pd.DataFrame) -> pd.DataFrame:
    core = CORES["count_window"](Q2)
    return core.process(core.initial_state(), events.reset_index(drop=True))


def _cuts(n):
    return [(0, 37), (37, 37), (37, 120), (120, n)]        # an empty batch included


def test_batches_give_the_rows_of_the_core_over_the_whole_input(tmp_path):
    events, stage = _events(), _stage(tmp_path)
    got = [stage(b, _collected(events.iloc[lo:hi], other_rows=3)).to_pandas() for b, (lo, hi) in
           enumerate(_cuts(len(events)))]
    out = pd.concat(got, ignore_index=True)
    assert (out["stream"] == "f1").sum() == 3 * 4             # the other queries' rows pass untouched
    mine = out[out["stream"] == "q2"].reset_index(drop=True)
    want = _direct(events)
    assert len(mine) == len(want) > 0
    pd.testing.assert_frame_equal(mine[["ID", "s", "inputTS"]], want[["ID", "s", "inputTS"]], check_dtype=False)
    # ingestTS is the triggering event's
    assert (mine["ingestTS"].to_numpy() == events.set_index("TS").groupby(level=0)["ingestTS"].max()
            .loc[mine["inputTS"]].to_numpy()).all()
    assert list(out.columns) == OUT_COLUMNS


def test_a_replayed_batch_gives_the_same_rows_in_a_new_process_and_in_the_same_one(tmp_path):
    events = _events()
    cuts = _cuts(len(events))
    first = _stage(tmp_path)
    rows = [first(b, _collected(events.iloc[lo:hi])) for b, (lo, hi) in enumerate(cuts)]
    # Spark runs the last batch again after a crash: a new program reads the states from the checkpoint.
    again = _stage(tmp_path)
    assert again(3, _collected(events.iloc[120:])).equals(rows[3])
    # ... or the same program retries it (its in-memory state is already past batch 3).
    assert first(3, _collected(events.iloc[120:])).equals(rows[3])
    assert first(2, _collected(events.iloc[37:120])).equals(rows[2])


def test_only_the_last_states_are_kept_and_no_temporary_file_stays(tmp_path):
    events, stage = _events(), _stage(tmp_path)
    for b in range(KEEP + 3):
        stage(b, _collected(events.iloc[b * 10:(b + 1) * 10]))
    files = sorted(p.name for p in (tmp_path / "checkpoint" / "driver-cores").iterdir())
    assert files == [f"{b}.state" for b in range(3, KEEP + 3)]


def test_identical_queries_get_a_copy_of_every_row(tmp_path):
    events = _events()
    out = _stage(tmp_path, {"q2": ["q2", "q2b", "q2c"]})(0, _collected(events)).to_pandas()
    counts = out["stream"].value_counts()
    assert counts["q2"] == counts["q2b"] == counts["q2c"] == len(_direct(events))
    for name in ("q2b", "q2c"):
        pd.testing.assert_frame_equal(out[out["stream"] == name].drop(columns="stream").reset_index(drop=True),
                                      out[out["stream"] == "q2"].drop(columns="stream").reset_index(drop=True))


def test_a_window_join_reads_only_its_streams(tmp_path):
    q = query_literal(WindowJoin("j1", "S1", "S2", 5, "ID", "ID", ("S1.A1", "S2.A1")))
    fields = q["fields"]
    ev = _events(n=60)
    ev["stream"] = np.where(np.arange(60) % 3 == 0, "S2", np.where(np.arange(60) % 3 == 1, "S1", "S9"))
    stage = DriverCores([q], {"j1": ["j1"]}, ["stream", *fields, "ingestTS"], INPUT_COLUMNS)
    stage.open(str(tmp_path / "cp"))
    table = pa.table({"stream": [INPUT_STREAM] * 60,
                      **{f: pa.nulls(60, pa.float64() if "A1" in f else pa.int64()) for f in fields},
                      "ingestTS": pa.nulls(60, pa.int64()),
                      **{INPUT_PREFIX + c: ev[c].to_numpy() for c in INPUT_COLUMNS}})
    got = stage(0, table).to_pandas()
    core = CORES["window_join"](q)
    mine = ev[ev["stream"].isin(["S1", "S2"])].reset_index(drop=True)
    want = core.process(core.initial_state(), mine)
    assert len(got) == len(want) > 0
    assert (got["stream"] == "j1").all()


def test_a_checkpoint_on_shared_storage_is_refused_by_name(tmp_path):
    stage = DriverCores([Q2], {"q2": ["q2"]}, OUT_COLUMNS, INPUT_COLUMNS)
    with pytest.raises(RuntimeError, match="hdfs://nn/cp.*cores"):
        stage.open("hdfs://nn/cp")
    stage.open(f"file://{tmp_path}/cp")
    assert (tmp_path / "cp" / "driver-cores").is_dir()


def test_the_stored_state_is_reported_like_a_stateful_operators(tmp_path):
    stage = _stage(tmp_path)
    stage(0, _collected(_events()))
    figures = stage.state_figures
    assert figures["operatorName"] == "driverCores" and figures["commitTimeMs"] >= 0
    assert figures["memoryUsedBytes"] == (tmp_path / "checkpoint" / "driver-cores" / "0.state").stat().st_size > 0


# -- a chunked pattern core: chunks written once, state files naming them ---------------------------

def _q7(within_ms=3_000):
    from querygen.micro import q7_pattern
    return query_literal(q7_pattern("q7", within_ms, 50.0))


def _pattern_stage(tmp_path, q):
    fields = list(q["fields"])
    stage = DriverCores([q], {"q7": ["q7"]}, ["stream", *fields, "ingestTS"], INPUT_COLUMNS)
    stage.open(str(tmp_path / "checkpoint"))
    return stage, fields


def _pattern_table(events: pd.DataFrame, fields) -> pa.Table:
    n = len(events)
    return pa.table({"stream": [INPUT_STREAM] * n,
                     **{f: pa.nulls(n, pa.float64() if "A1" in f else pa.int64()) for f in fields},
                     "ingestTS": pa.nulls(n, pa.int64()),
                     **{INPUT_PREFIX + c: events[c].to_numpy() for c in INPUT_COLUMNS}})


def _chunk_files(tmp_path) -> set[str]:
    return {p.name for p in (tmp_path / "checkpoint" / "driver-cores" / "chunks").iterdir()}


def test_a_chunked_pattern_gives_the_plain_cores_rows_and_keeps_only_the_chunks_its_states_name(tmp_path):
    from runtime_common.micro_cores import ChunkedPatternCore, PatternCore
    q = _q7()
    events = _events(n=600, seed=9)
    stage, fields = _pattern_stage(tmp_path, q)
    assert isinstance(stage.cores["q7"], ChunkedPatternCore)
    cuts = [(i, min(i + 40, 600)) for i in range(0, 600, 40)]
    got = pd.concat([stage(b, _pattern_table(events.iloc[lo:hi], fields)).to_pandas()
                     for b, (lo, hi) in enumerate(cuts)], ignore_index=True)
    plain = PatternCore(q)
    want = plain.process(plain.initial_state(), events)
    assert len(got) == len(want) > 100
    np.testing.assert_array_equal(got["a1_TS"].to_numpy(), want["a1_TS"].to_numpy())
    np.testing.assert_array_equal(got["a2_A1"].to_numpy(), want["a2_A1"].to_numpy())
    # The 3 s window over 20 s of events: early chunks were dropped, and their files with them.
    state = stage._states["q7"]
    named = set().union(*stage._refs.values())
    assert _chunk_files(tmp_path) == named
    assert {f"0-{c['id']}.chunk" for c in state["chunks"]} <= named
    assert 0 < len(named) < len(cuts)
    directory = tmp_path / "checkpoint" / "driver-cores"
    last = directory / f"{len(cuts) - 1}.state"
    assert stage.state_figures["memoryUsedBytes"] == last.stat().st_size + sum(
        (directory / "chunks" / f"0-{c['id']}.chunk").stat().st_size for c in state["chunks"])
    assert last.stat().st_size < 1_000               # the window's candidates are not in it
    assert not [p for p in directory.rglob("*.tmp")]


def test_a_chunked_patterns_batch_replayed_in_a_new_process_gives_the_same_rows(tmp_path):
    q = _q7()
    events = _events(n=400, seed=11)
    cuts = [(i, min(i + 50, 400)) for i in range(0, 400, 50)]
    first, fields = _pattern_stage(tmp_path, q)
    rows = [first(b, _pattern_table(events.iloc[lo:hi], fields)) for b, (lo, hi) in enumerate(cuts)]
    b = len(cuts) - 1
    again, _ = _pattern_stage(tmp_path, q)
    assert again(b, _pattern_table(events.iloc[cuts[b][0]:], fields)).equals(rows[b])
    assert first(b - 1, _pattern_table(events.iloc[cuts[b - 1][0]:cuts[b - 1][1]], fields)).equals(rows[b - 1])
    # A state file naming a chunk that is gone is one line naming both.
    for p in (tmp_path / "checkpoint" / "driver-cores" / "chunks").iterdir():
        p.unlink()
    with pytest.raises(RuntimeError, match=r"driver-cores/\d+\.state names chunk .*\.chunk, which is missing"):
        _pattern_stage(tmp_path, q)[0](b, _pattern_table(events.iloc[cuts[b][0]:], fields))
