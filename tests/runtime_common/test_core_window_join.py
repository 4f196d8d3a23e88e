"""The window-join core (runtime_common/micro_cores/window_join.py) gives the reference
answers (validator/micro_joins.py) under every batching of the input,
with their state stored and read back (state_codec) between micro-batches."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

from kit.workload import Comparison, WindowJoin
from runtime_common.micro_cores import WindowJoinCore as WJ
from runtime_common.micro_cores.state_codec import round_trip
from translators.micro_literal import query_literal
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

from tests.spark_runtime.two_streams import BATCHINGS, DTYPES, assert_reference_rows
from tests.spark_runtime.two_streams import bounds as _bounds, events_of as _events, inputs as _inputs
from tests.spark_runtime.two_streams import stream as _stream



def _run(core_cls, q, events, how, seed=0):
    core = core_cls(q)
    state = round_trip(core.initial_state())
    parts = []
    for a, b in _bounds(len(events), how, seed):
        out = core.process(state, events.iloc[a:b])
        # The contract: exactly the query's fields, in order, with their dtypes, rows or not.
        assert list(out.columns) == q["fields"]
        assert [str(t) for t in out.dtypes] == [DTYPES[t] for t in q["types"]]
        parts.append(out)
        state = round_trip(state)
    return pd.concat(parts, ignore_index=True), state


def _window(state, side, rows, stream_len):
    """Events kept for a side, checking the state layout: parallel arrays sorted by (key, index),
    only events still in the window, at most `rows` of them; returns their number."""
    st = state[side]
    assert st["n"] == stream_len
    idx, key = st["idx"], st["key"]
    assert all(len(v) == len(idx) for v in [key, *st["vals"]])
    assert len(idx) <= min(rows, stream_len)
    assert (idx >= stream_len - rows).all() and (idx < stream_len).all()
    assert np.all((key[:-1] < key[1:]) | ((key[:-1] == key[1:]) & (idx[:-1] < idx[1:])))
    return len(idx)


def _check(query, inputs, core_cls, how, seed=0, rows_expected=True):
    got, state = _run(core_cls, query_literal(query), inputs[1], how, seed)
    assert_reference_rows(query, inputs[0], got, rows_expected)
    for side, name in (("0", query.left), ("1", query.right)):
        _window(state, side, query.rows, len(inputs[0][name]))
    return state


WJ_WHERE = (Comparison("S1.A1", "gt", 30), Comparison("S2.A2", "le", 70))
WJ_SELECT = ("S2.A2", "S1.ID", "S1.A1", "S2.TS", "S1.TS", "S2.ID")


@pytest.mark.parametrize("how", BATCHINGS)
@pytest.mark.parametrize("ids", [3, 20])
@pytest.mark.parametrize("where", [(), WJ_WHERE], ids=["nowhere", "where"])
@pytest.mark.parametrize("rows", [4, 1000])
def test_window_join_matches_reference(rows, where, ids, how):
    streams = _inputs(ids)[0]
    state = _check(WindowJoin("j", "S1", "S2", rows, "ID", "ID", WJ_SELECT, where), _inputs(ids), WJ, how)
    for side, name in (("0", "S1"), ("1", "S2")):
        kept = _window(state, side, rows, len(streams[name]))
        if not where:                         # every event can match: the whole window is kept
            assert kept == min(rows, len(streams[name]))


@pytest.mark.parametrize("how", ["one", "random"])
@pytest.mark.parametrize("rows", [5, 50])
def test_window_join_single_key(rows, how):
    # One key: every kept event matches every trigger; exactly `rows` are kept per side.
    state = _check(WindowJoin("j", "S1", "S2", rows, "ID", "ID", WJ_SELECT), _inputs(1), WJ, how)
    assert [_window(state, side, rows, n) for side, n in (("0", 100), ("1", 90))] == [rows, rows]


@pytest.mark.parametrize("how", ["one", "random"])
def test_window_join_right_stream_first_in_order(how):
    # Left is S2: the trigger side and the select order differ from the stream order.
    q = WindowJoin("j", "S2", "S1", 9, "ID", "ID", ("S1.A2", "S2.A1", "S1.TS"), (Comparison("S1.ID", "ne", 2),))
    _check(q, _inputs(4, seed=7), WJ, how)


def test_window_join_rejects_self_join():
    q = query_literal(WindowJoin("j", "S1", "S2", 5, "ID", "ID", ("S1.ID",)))
    q["right"] = "S1"
    with pytest.raises(ValueError, match="two different streams"):
        WJ(q)


# Hand-worked: (stream, ID, A1) at positions 0..11 (TS = position); rows 2, key ID 7 many times,
# the right stream (S2) first in order.
HAND = [("S2", 7, 10.0), ("S2", 7, 11.0), ("S2", 7, 12.0), ("S1", 7, 1.0), ("S2", 5, 13.0),
        ("S1", 7, 2.0), ("S2", 7, 14.0), ("S1", 7, 3.0), ("S2", 7, 15.0), ("S1", 7, 0.5),
        ("S1", 9, 5.0), ("S2", 7, 16.0)]
HAND_ROWS = {   # (S1.A1, S2.A1, inputTS), worked out by hand from the rules of SEMANTICS.md 6
    # 3 sees S2's {1, 2}; 4 (ID 5) nothing; 5 sees {2, 4}; 6 sees S1's {3, 5}; 7 {4, 6}; 8 {5, 7};
    # 9 {6, 8}; 10 (ID 9) nothing; 11 sees S1's {9, 10}.
    "nowhere": [(1, 11, 3), (1, 12, 3), (2, 12, 5), (1, 14, 6), (2, 14, 6), (3, 14, 7), (2, 15, 8),
                (3, 15, 8), (0.5, 14, 9), (0.5, 15, 9), (0.5, 16, 11)],
    # S1.A1 > 1 rejects 3 and 9, S2.A1 <> 12 rejects 2; rejected events still fill their window:
    # 5 sees {2, 4} (nothing), 11 sees {9, 10} (nothing).
    "where": [(2, 14, 6), (3, 14, 7), (2, 15, 8), (3, 15, 8)],
}


def _hand_inputs():
    streams = {}
    for name in ("S1", "S2"):
        ev = [(pos, i, a1) for pos, (s, i, a1) in enumerate(HAND) if s == name]
        streams[name] = pd.DataFrame({"ID": np.array([i for _, i, _ in ev], np.int32),
                                      "A1": [a for _, _, a in ev], "A2": 50.0,
                                      "TS": np.array([p for p, _, _ in ev], np.int64),
                                      "_pos": np.array([p for p, _, _ in ev], np.int64)})
    return streams, _events(streams)


@pytest.mark.parametrize("how", BATCHINGS)
@pytest.mark.parametrize("sides", [("S1", "S2"), ("S2", "S1")], ids=["S1-left", "S2-left"])
@pytest.mark.parametrize("case", ["nowhere", "where"])
def test_window_join_hand_worked(case, sides, how):
    # The join is symmetric: which stream is `left` changes nothing in the rows.
    where = (Comparison("S1.A1", "gt", 1), Comparison("S2.A1", "ne", 12)) if case == "where" else ()
    q = WindowJoin("j", *sides, 2, "ID", "ID", ("S1.A1", "S2.A1"), where)
    want = pd.DataFrame(HAND_ROWS[case], columns=["S1_A1", "S2_A1", "inputTS"]).astype({"S1_A1": float,
                                                                                      "S2_A1": float})
    inputs = _hand_inputs()
    pd.testing.assert_frame_equal(expected_for_query(q, inputs[0], None), want, check_dtype=False)
    _check(q, inputs, WJ, how)


@functools.lru_cache(maxsize=None)
def _random_inputs(seed, ids):
    rng = np.random.default_rng(100 + seed)
    n1, n2 = (int(x) for x in rng.integers(50, 250, 2))
    s1 = _stream(seed * 2, n1, ids, 3000)
    streams = merge_order({"S1": s1, "S2": _stream(seed * 2 + 1, n2, ids, 3000, s1["TS"].to_numpy())})
    return streams, _events(streams)


@pytest.mark.parametrize("ids", [1, 3, 100])
@pytest.mark.parametrize("rows", [1, 4, 100, 10_000])     # 10 000: larger than the input
def test_window_join_random_against_reference(rows, ids):
    for seed in range(3):
        # Seed 1 filters both sides; seed 2 has the right stream as `left`.
        where = (Comparison("S1.A2", "lt", 60), Comparison("S2.A1", "ge", 25)) if seed == 1 else ()
        left, right = ("S2", "S1") if seed == 2 else ("S1", "S2")
        q = WindowJoin("j", left, right, rows, "ID", "ID", ("S1.ID", "S2.A1", "S1.TS", "S2.TS", "S1.A2"), where)
        for how in ("all", "seven", "random"):
            _check(q, _random_inputs(seed, ids), WJ, how, seed=seed, rows_expected=False)


def _keyed_inputs(seed, keys):
    """Random streams whose ID takes the given values, with A3 = ID as a double."""
    streams, _ = _random_inputs(seed, 3)
    streams = {n: df.assign(ID=np.asarray(keys)[df["ID"].to_numpy() - 1]) for n, df in streams.items()}
    streams = {n: df.assign(A3=df["ID"].to_numpy(np.float64)) for n, df in streams.items()}
    return streams, _events(streams)


@pytest.mark.parametrize("keys", ["S1.A3=S2.ID", "S1.A3=S2.A3"])
def test_window_join_double_keys(keys):
    # A double key is matched by value, also against an int key on the other side.
    (lk, rk) = (k.split(".")[1] for k in keys.split("="))
    q = WindowJoin("j", "S1", "S2", 20, lk, rk, ("S1.ID", "S2.A3", "S2.TS"))
    for how in ("all", "random"):
        _check(q, _keyed_inputs(0, np.array([1, 2, 3], np.int32)), WJ, how)


@pytest.mark.parametrize("keys", [[1, 65_537, 100_000], [-2**60, 3, 2**60]], ids=["wide", "huge"])
def test_window_join_widely_spread_int_keys(keys):
    # Wide: more than 2^16 possible key codes (no radix sort on 16 bits). Huge, ±2^60: an offset
    # from the smallest key would overflow the composite sort key.
    q = WindowJoin("j", "S1", "S2", 30, "ID", "ID", ("S1.ID", "S2.ID", "S1.A1"))
    for how in ("all", "random"):
        _check(q, _keyed_inputs(1, np.array(keys, np.int64)), WJ, how)


def test_window_join_many_pairs_per_trigger():
    # rows >> keys (like J1-2's rows 50000 / maxId 5): each event matches hundreds of events.
    streams = merge_order({"S1": _stream(5, 1500, 2, 10_000), "S2": _stream(6, 1500, 2, 10_000)})
    q = WindowJoin("j", "S1", "S2", 400, "ID", "ID", ("S1.A1", "S2.A2", "S2.ID"))
    for how in ("all", "random"):
        _check(q, (streams, _events(streams)), WJ, how)
