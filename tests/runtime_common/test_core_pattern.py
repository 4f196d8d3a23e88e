"""The pattern core (runtime_common/micro_cores/pattern.py) gives the reference
answers (validator/micro_patterns.py) under every batching of the input,
with their state stored and read back (state_codec) between micro-batches."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from kit.workload import Comparison, Pattern, PatternEvent
from runtime_common.micro_cores import PatternCore as PAT
from runtime_common.micro_cores.state_codec import round_trip
from translators.micro_literal import query_literal
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

from tests.spark_runtime.two_streams import BATCHINGS, DTYPES, assert_reference_rows
from tests.spark_runtime.two_streams import bounds as _bounds, events_of as _events, inputs as _inputs

POLICIES = ("all-all", "all-one", "one-all", "one-one")


def _run(core_cls, q, events, how, seed=0, check_state=None):
    """The core's rows over `events` in batches, the state round-tripped between them and checked
    after each (`check_state(state, events seen, within)`, this module's `_check_state` by
    default); every batch's result is a DataFrame with exactly the query's columns and dtypes."""
    check_state = check_state or _check_state
    core = core_cls(q)
    state = round_trip(core.initial_state())
    frames, dtypes = [], [DTYPES[t] for t in q["types"]]
    for a, b in _bounds(len(events), how, seed):
        out = core.process(state, events.iloc[a:b])
        assert isinstance(out, pd.DataFrame) and list(out.columns) == q["fields"]
        assert [str(t) for t in out.dtypes] == dtypes
        frames.append(out)
        state = round_trip(state)
        check_state(state, events.iloc[:b], q["within_ms"])
    return pd.concat(frames, ignore_index=True), state


def _check_state(state, seen, within):
    """The candidates are numpy arrays of one length, in TS order, none expired at the latest
    event seen: bounded by one window, so dead keys and old events do not pile up."""
    n = len(state["ts"])
    assert all(isinstance(v, np.ndarray) and len(v) == n for v in state.values())
    assert np.all(np.diff(state["ts"]) >= 0)
    if len(seen):
        last = int(seen["TS"].max())
        assert np.all(state["ts"] > last - within)
        assert n <= int((seen["TS"] > last - within).sum())


def _check(query, inputs, core_cls, how, seed=0, nonempty=True):
    got, state = _run(core_cls, query_literal(query), inputs[1], how, seed)
    assert_reference_rows(query, inputs[0], got, nonempty)
    return state


LAYOUTS = {   # (first, second): Q7 on one stream, across streams both ways
    "same": (PatternEvent("a1", "S1"), PatternEvent("a2", "S1", (Comparison("A1", "gt", 50),))),
    "cross": (PatternEvent("a1", "S1", (Comparison("A1", "lt", 60),)),
              PatternEvent("a2", "S2", (Comparison("A2", "gt", 30),))),
    "back": (PatternEvent("a1", "S2"), PatternEvent("a2", "S1", (Comparison("A1", "ge", 40),))),
}
PAT_SELECT = ("a1.ID", "a2.A1", "a1.TS", "a2.TS", "a1.A2")


# To keep the run short, each case gets random and whole-input batches and one of the fixed sizes
# (1 or 7 events), alternating over (key, within).
PAT_CASES = [(policy, key, layout, within, how)
             for policy in POLICIES for key in ("ID", None)
             for layout in LAYOUTS for within in (60, 10**6)
             for how in ("random", "all", "one" if (key is None) == (within == 60) else "seven")]


@pytest.mark.parametrize("policy, key, layout, within, how", PAT_CASES)
def test_pattern_matches_reference(policy, key, layout, within, how):
    first, second = LAYOUTS[layout]
    q = Pattern("p", first, second, within, policy, PAT_SELECT, key)
    _check(q, _inputs(4), PAT, how)


def test_pattern_select_from_one_alias_only():
    q = Pattern("p", PatternEvent("a1", "S1"), PatternEvent("a2", "S2"), 200, "one-one", ("a2.ID",), "ID")
    _check(q, _inputs(5, seed=11), PAT, "random")


# Random inputs against the reference: per (policy, key, seed) several windows and batchings;
# dense timestamps (many equal TS, also across streams), 1, 4 or 50 IDs or no key at all.
KEYS = {"none": (None, 4), "1id": ("ID", 1), "4ids": ("ID", 4), "50ids": ("ID", 50)}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("keys", KEYS)
@pytest.mark.parametrize("policy", POLICIES)
def test_pattern_random_inputs(policy, keys, seed):
    key, ids = KEYS[keys]
    inputs = _inputs(ids, seed=100 + seed, n=120, span_ms=300)
    first, second = LAYOUTS[("same", "cross", "back")[seed]]
    for within in (1, 25, 10**5):
        q = Pattern("p", first, second, within, policy, PAT_SELECT, key)
        for how in BATCHINGS if within == 25 else BATCHINGS[1:]:    # one-event batches are slow
            _check(q, inputs, PAT, how, seed=seed * 7 + within, nonempty=within > 1)


def _rows(policy, rows, within=1000, key=None, how="all"):
    """The core's (a1 name, a2 name, inputTS) rows for hand-written events (name, ID, A1, TS) of
    S1: first element A1 < 50, second A1 >= 50."""
    df = pd.DataFrame({"ID": np.array([r[1] for r in rows], np.int32), "A1": [float(r[2]) for r in rows],
                       "TS": np.array([r[3] for r in rows], np.int64)})
    query = Pattern("p", PatternEvent("a", "S1", (Comparison("A1", "lt", 50),)),
                    PatternEvent("b", "S1", (Comparison("A1", "ge", 50),)), within, policy, ("a.A1", "b.A1"), key)
    got, _ = _run(PAT, query_literal(query), _events(merge_order({"S1": df})), how)
    name = {float(r[2]): r[0] for r in rows}
    return [(name[a], name[b], ts) for a, b, ts in zip(got.a_A1, got.b_A1, got.inputTS)]


THESIS = [("A1", 1, 10, 0), ("A2", 1, 11, 1), ("B1", 1, 60, 2), ("A3", 1, 12, 3), ("B2", 1, 61, 4)]


@pytest.mark.parametrize("how", ["one", "all"])
@pytest.mark.parametrize("policy, expected", [
    ("all-all", [("A1", "B1"), ("A2", "B1"), ("A1", "B2"), ("A2", "B2"), ("A3", "B2")]),
    ("all-one", [("A1", "B1"), ("A1", "B2")]),
    ("one-all", [("A1", "B1"), ("A2", "B1"), ("A3", "B2")]),
    ("one-one", [("A1", "B1"), ("A2", "B2")]),
])
def test_pattern_thesis_example_section_8(policy, expected, how):
    # A1 A2 B1 A3 B2 at TS 0..4; B1 (TS 2) and B2 (TS 4) trigger.
    assert _rows(policy, THESIS, how=how) == [(a, b, 2 if b == "B1" else 4) for a, b in expected]


@pytest.mark.parametrize("how", ["one", "all"])
def test_pattern_window_is_half_open(how):
    # within 10: B1 at TS 10 is out of A1's window [0, 10) but in A2's [1, 11) and A3's (same TS).
    ev = [("A1", 1, 10, 0), ("A2", 1, 11, 1), ("A3", 1, 12, 10), ("B1", 1, 60, 10), ("B2", 1, 61, 20)]
    assert _rows("all-all", ev, within=10, how=how) == [("A2", "B1", 10), ("A3", "B1", 10)]
    assert _rows("all-one", ev, within=10, how=how) == [("A2", "B1", 10)]
    # one-one: within 10, B2 at TS 20 finds A3 (TS 10) expired; within 11, B1 takes A1 and B2
    # skips the expired A2 (TS 1) for A3.
    assert _rows("one-one", ev, within=10, how=how) == [("A2", "B1", 10)]
    assert _rows("one-one", ev, within=11, how=how) == [("A1", "B1", 10), ("A3", "B2", 20)]


@pytest.mark.parametrize("how", ["one", "seven", "all"])
def test_pattern_keys_and_consumption_by_hand(how):
    # Keys 1 and 2 interleaved; B's take only their own key's A's.
    ev = [("A1", 1, 10, 0), ("C1", 2, 20, 0), ("A2", 1, 11, 1), ("D1", 2, 70, 2), ("B1", 1, 60, 3),
          ("C2", 2, 21, 4), ("B2", 1, 61, 5), ("D2", 2, 71, 6), ("D3", 2, 72, 7)]
    assert _rows("all-all", ev, key="ID", how=how) == [
        ("C1", "D1", 2), ("A1", "B1", 3), ("A2", "B1", 3), ("A1", "B2", 5), ("A2", "B2", 5),
        ("C1", "D2", 6), ("C2", "D2", 6), ("C1", "D3", 7), ("C2", "D3", 7)]
    assert _rows("one-all", ev, key="ID", how=how) == [
        ("C1", "D1", 2), ("A1", "B1", 3), ("A2", "B1", 3), ("C2", "D2", 6)]
    assert _rows("one-one", ev, key="ID", how=how) == [
        ("C1", "D1", 2), ("A1", "B1", 3), ("A2", "B2", 5), ("C2", "D2", 6)]
    assert _rows("all-one", ev, key="ID", how=how) == [
        ("C1", "D1", 2), ("A1", "B1", 3), ("A1", "B2", 5), ("C1", "D2", 6), ("C1", "D3", 7)]


@pytest.mark.parametrize("policy", POLICIES)
def test_pattern_event_of_both_elements_never_matches_itself(policy):
    # Every event is a1 and a2 (no Where): each pairs with the earlier ones only, equal TS included.
    df = pd.DataFrame({"ID": np.ones(4, np.int32), "A1": [1.0, 2.0, 3.0, 4.0], "TS": np.array([0, 0, 1, 1])})
    q = Pattern("p", PatternEvent("a1", "S1"), PatternEvent("a2", "S1"), 100, policy, ("a1.A1", "a2.A1"), "ID")
    streams = merge_order({"S1": df})
    for how in ("one", "all"):
        got, _ = _run(PAT, query_literal(q), _events(streams), how)
        pairs = list(zip(got.a1_A1, got.a2_A1))
        assert all(x < y for x, y in pairs) and pairs
        pd.testing.assert_frame_equal(got, expected_for_query(q, streams, None), check_dtype=False)


def test_pattern_no_rows_and_empty_batches():
    q = query_literal(Pattern("p", *LAYOUTS["cross"], 50, "all-all", PAT_SELECT, "ID"))
    core, ev = PAT(q), _inputs(4)[1]
    state = core.initial_state()
    for part in (ev.iloc[:0], ev[ev["stream"] == "S2"].iloc[:5]):   # nothing, then only a2's
        out = core.process(state, part)
        assert out.empty and list(out.columns) == q["fields"]
        assert [str(t) for t in out.dtypes] == [DTYPES[t] for t in q["types"]]
    assert len(state["ts"]) == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_pattern_keys_split_over_two_cores(policy):
    # The Spark side may give each core instance only some keys (all their events, in order):
    # each instance yields the reference's rows of its keys, in the reference's order.
    first, second = LAYOUTS["same"]
    query = Pattern("p", first, second, 150, policy, PAT_SELECT, "ID")
    streams, events = _inputs(6, seed=21, n=150, span_ms=1000)
    exp = expected_for_query(query, streams, None)
    total = 0
    for parity in (0, 1):
        mine = events[events["ID"] % 2 == parity]
        got, _ = _run(PAT, query_literal(query), mine, "random", seed=parity)
        want = exp[exp["a1_ID"] % 2 == parity].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
        total += len(got)
    assert total == len(exp) > 0


def test_pattern_state_stays_bounded():
    # 200 IDs each seen a few times over 20 s, within 100 ms: the state never holds more than the
    # last window's events (asserted after every batch by _run), however many keys went by.
    rng = np.random.default_rng(5)
    n = 2000
    df = pd.DataFrame({"ID": rng.integers(1, 201, n).astype(np.int32), "A1": rng.uniform(1, 100, n),
                       "A2": rng.uniform(1, 100, n), "TS": np.sort(rng.integers(0, 20_000, n))})
    for policy in POLICIES:
        q = query_literal(Pattern("p", *LAYOUTS["same"], 100, policy, PAT_SELECT, "ID"))
        _, state = _run(PAT, q, _events(merge_order({"S1": df})), "random")
        assert len(state["ts"]) < 40


def test_pattern_rejects_events_out_of_ts_order():
    q = query_literal(Pattern("p", *LAYOUTS["same"], 100, "all-all", PAT_SELECT, "ID"))
    core, ev = PAT(q), _inputs(4)[1]
    state = core.initial_state()
    core.process(state, ev.iloc[50:60])
    with pytest.raises(ValueError, match="TS order"):
        core.process(state, ev.iloc[:10])
