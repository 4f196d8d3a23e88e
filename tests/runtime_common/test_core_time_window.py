"""The time-window core (runtime_common/micro_cores/time_window.py) against the reference.

Q3 and Q4 (both from pane partials; Q3 also keeps the raw values for MEDIAN) must give the
reference's rows (specs/SEMANTICS.md section 5), in its order and with the contract's dtypes, over
any batching (empty micro-batches included), with the state stored and read back (state_codec)
between micro-batches. Hand-computed cases and a bound on the state complete it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kit.workload import Aggregate, TimeWindowAggregation, TwoLevelAggregation, output_schema
from runtime_common.micro_cores import time_window as CORE
from runtime_common.micro_cores.state_codec import dumps, round_trip
from translators.micro_literal import query_literal
from validator.compare import compare_stream
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

FUNCS = ("SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN", "COUNT")


def _aggs(kind, field="A1"):
    return tuple(Aggregate(f, None if f == "COUNT" else field, f.lower()) for f in FUNCS
                 if kind is TimeWindowAggregation or f != "MEDIAN")


def _stream(seed, n=300, close_values=None):
    """Repeated TS, TS on pane boundaries, and gaps longer than every range used here."""
    rng = np.random.default_rng(seed)
    steps = rng.choice([0, 0, 1, 37, 120, 499, 500, 6000, 13000], n,
                       p=[.25, .1, .1, .15, .15, .1, .1, .03, .02])
    ts = 123_457 + np.cumsum(steps)
    on_boundary = rng.random(n) < 0.15
    ts = np.maximum.accumulate(np.where(on_boundary, -(-ts // 500) * 500, ts))
    a1 = close_values[0] + rng.uniform(0, close_values[1], n) if close_values else rng.uniform(1, 100, n)
    return pd.DataFrame({"ID": rng.integers(1, 5, n).astype(np.int32), "A1": a1,
                         "A2": rng.choice([1.5, 2.5, 3.5], n), "TS": ts.astype(np.int64)})


def _batches(n, how, rng):
    """Batch bounds: `how` is a size, or "random" (sizes 1..59, and one batch in five empty)."""
    start = 0
    while start < n:
        size = {"one": 1, "seven": 7, "all": n}.get(how, how)
        if how == "random":
            size = 0 if rng.random() < 0.2 else int(rng.integers(1, 60))
        yield start, min(n, start + size)
        start += size


def _events(df):
    ev = merge_order({"S1": df})["S1"].sort_values("_pos").rename(columns={"_pos": "offset"})
    return ev.assign(stream="S1", ingestTS=np.int64(0)).reset_index(drop=True)


def _run(core, events, how, seed=0, check_state=None):
    state, frames, rng = core.initial_state(), [], np.random.default_rng(seed)
    for a, b in _batches(len(events), how, rng):
        state = round_trip(state)
        frames.append(core.process(state, events.iloc[a:b].reset_index(drop=True)))
        if check_state:
            check_state(state, events.iloc[:b])
    return pd.concat(frames, ignore_index=True)


def _check(query, df, how, seed=0, min_rows=20):
    q = query_literal(query)
    expected = expected_for_query(query, merge_order({"S1": df}), None)
    got = _run(CORE.TimeWindowCore(q), _events(df), how, seed)
    assert len(expected) > min_rows
    assert list(got.columns) == q["fields"]
    for name, t in zip(q["fields"], q["types"]):
        assert got[name].dtype == (np.int64 if t in ("int", "long") else np.float64), name
    r = compare_stream(expected, got, output_schema(query))
    assert (r.missing, r.undue, r.wrong) == (0, 0, 0), r.incorrect.head(10).to_string()
    # inputTS is not compared by compare_stream, and rows must come in the reference order.
    for c in ["windowEnd", *query.group_by, "inputTS"]:
        assert got[c].tolist() == expected[c].tolist(), c


@pytest.mark.parametrize("how", ["one", "seven", "random", "all"])
@pytest.mark.parametrize("group_by", [(), ("ID",), ("ID", "A2")])
@pytest.mark.parametrize("range_ms, slide_ms", [(1000, 1000), (5000, 500)])
@pytest.mark.parametrize("kind", [TimeWindowAggregation, TwoLevelAggregation])
def test_matches_reference_over_any_batching(kind, range_ms, slide_ms, group_by, how):
    _check(kind("q", "S1", range_ms, slide_ms, _aggs(kind), group_by), _stream(7), how, seed=1)


@pytest.mark.parametrize("kind", [TimeWindowAggregation, TwoLevelAggregation])
@pytest.mark.parametrize("how", ["one", "random"])
@pytest.mark.parametrize("center, spread", [(50, 1e-6), (1e9, 1.0)])
def test_stdev_of_close_values(kind, how, center, spread):
    # Values close together far from 0: a sum of squares would cancel every significant digit,
    # and pane means rounded at the scale of the values would spoil Chan's between-pane term.
    query = kind("q", "S1", 5000, 500, _aggs(kind), ("ID",))
    _check(query, _stream(11, close_values=(center, spread)), how, seed=2)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("how", ["one", "seven", "random", "all"])
def test_random_queries_match_reference(seed, how):
    # Per seed: Q3 or Q4, a range/slide (k from 1 to 8), a GROUP BY of 0-2 columns, a value field.
    rng = np.random.default_rng(100 + seed)
    kind = [TimeWindowAggregation, TwoLevelAggregation][seed % 2]
    range_ms, slide_ms = [(500, 500), (1000, 250), (3000, 1000), (2000, 500), (4000, 500), (750, 250),
                          (2000, 250), (1500, 500)][seed]
    group_by = [(), ("ID",), ("A2",), ("ID", "A2")][seed // 2]
    field = ["A1", "A2"][int(rng.integers(0, 2))]
    _check(kind("q", "S1", range_ms, slide_ms, _aggs(kind, field), group_by), _stream(seed, n=400), how,
           seed=seed, min_rows=100)


@pytest.mark.parametrize("how", [333, "all"])
@pytest.mark.parametrize("kind", [TimeWindowAggregation, TwoLevelAggregation])
def test_many_groups_in_big_batches(kind, how):
    # 50 IDs and 4000 events: many records per pane and window; values 1e6 +- 1 for STDEV.
    rng = np.random.default_rng(3)
    n = 4000
    df = pd.DataFrame({"ID": rng.integers(0, 50, n).astype(np.int32), "A1": rng.normal(1e6, 1.0, n),
                       "A2": rng.choice([1.5, 2.5], n), "TS": np.sort(rng.integers(0, 60_000, n)).astype(np.int64)})
    _check(kind("q", "S1", 6000, 1500, _aggs(kind), ("ID",)), df, how)


def _rows(query, df, how):
    return list(_run(CORE.TimeWindowCore(query_literal(query)), _events(df), how).itertuples(index=False, name=None))


@pytest.mark.parametrize("how", ["one", "all"])
def test_by_hand(how):
    # slide 10, range 20. TS 10 closes [-10, 10); TS 45 closes [0, 20) and [10, 30), while
    # [20, 40) is empty; TS 100 closes [30, 50) and [40, 60) and jumps over empty ones;
    # [90, 110) never closes. Rows: (SUM, windowEnd, inputTS).
    df = pd.DataFrame({"ID": np.ones(6, np.int32), "A1": [1.0, 3.0, 5.0, 7.0, 9.0, 11.0],
                       "A2": np.zeros(6), "TS": np.array([0, 5, 10, 10, 45, 100], np.int64)})
    for kind in (TimeWindowAggregation, TwoLevelAggregation):
        query = kind("q", "S1", 20, 10, (Aggregate("SUM", "A1", "s"),))
        assert _rows(query, df, how) == [(4.0, 10, 10), (16.0, 20, 45), (12.0, 30, 45), (9.0, 50, 100),
                                         (9.0, 60, 100)]


@pytest.mark.parametrize("how", ["one", "seven", "all"])
@pytest.mark.parametrize("kind", [TimeWindowAggregation, TwoLevelAggregation])
def test_by_hand_with_groups(kind, how):
    # slide 10, range 20, GROUP BY ID. Events (ID, A1, TS): (2, 4, 3) (1, 1, 5) (1, 3, 12) (2, 8, 15)
    # (1, 5, 31) (2, 10, 95). TS 12 closes [-10, 10): ID 1 {1}, ID 2 {4}. TS 31 closes [0, 20):
    # ID 1 {1, 3}, ID 2 {4, 8}, and [10, 30): ID 1 {3}, ID 2 {8}. TS 95 closes [20, 40) and
    # [30, 50): ID 1 {5}; ID 2 has nothing there, and [40, 60) .. [70, 90) are empty.
    # One value has STDEV 0. Rows: (ID, COUNT, AVG, STDEV, MAX, windowEnd, inputTS).
    df = pd.DataFrame({"ID": np.array([2, 1, 1, 2, 1, 2], np.int32), "A1": [4.0, 1.0, 3.0, 8.0, 5.0, 10.0],
                       "A2": np.zeros(6), "TS": np.array([3, 5, 12, 15, 31, 95], np.int64)})
    aggs = tuple(Aggregate(f, None if f == "COUNT" else "A1", f.lower()) for f in ("COUNT", "AVG", "STDEV", "MAX"))
    assert _rows(kind("q", "S1", 20, 10, aggs, ("ID",)), df, how) == [
        (1, 1, 1.0, 0.0, 1.0, 10, 12), (2, 1, 4.0, 0.0, 4.0, 10, 12),
        (1, 2, 2.0, 1.0, 3.0, 20, 31), (2, 2, 6.0, 2.0, 8.0, 20, 31),
        (1, 1, 3.0, 0.0, 3.0, 30, 31), (2, 1, 8.0, 0.0, 8.0, 30, 31),
        (1, 1, 5.0, 0.0, 5.0, 40, 95), (1, 1, 5.0, 0.0, 5.0, 50, 95)]


def test_no_rows_is_an_empty_frame_with_the_columns():
    query = TwoLevelAggregation("q", "S1", 20, 10, (Aggregate("COUNT", None, "c"),), ("ID",))
    q = query_literal(query)
    core = CORE.TimeWindowCore(q)
    state = core.initial_state()
    events = _events(pd.DataFrame({"ID": np.ones(2, np.int32), "A1": [1.0, 2.0], "A2": np.zeros(2),
                                   "TS": np.array([1, 2], np.int64)}))
    for batch in (events.iloc[:0], events):
        out = core.process(state, batch)
        assert out.empty and list(out.columns) == q["fields"]
        assert [out[c].dtype for c in q["fields"]] == [np.int64] * 4


@pytest.mark.parametrize("kind", [TimeWindowAggregation, TwoLevelAggregation])
def test_state_holds_only_the_range(kind):
    # A long input (20 K events over ~2000 panes): the state never holds more than the open
    # range, and its stored size at the end is no larger than early on.
    query = kind("q", "S1", 5000, 500, _aggs(kind), ("ID",))
    k = query.range_ms // query.slide_ms
    rng = np.random.default_rng(5)
    n = 20_000
    df = pd.DataFrame({"ID": rng.integers(1, 5, n).astype(np.int32), "A1": rng.uniform(1, 100, n),
                       "A2": np.zeros(n), "TS": 123_457 + np.cumsum(rng.integers(0, 100, n))})
    sizes = []

    def check(state, seen):
        panes = state["rec"]["pane"]
        assert panes.min() >= state["next"] - k           # nothing older than the open windows
        pairs = set(zip(panes.tolist(), state["rec"]["g:ID"].tolist()))
        assert len(pairs) == len(panes) <= k * 4          # one record per (pane, group) of the range
        if kind is TimeWindowAggregation:                 # MEDIAN: exactly the events the range still sees
            assert len(state["raw"]["pane"]) == int((seen.TS >= (state["next"] - k) * query.slide_ms).sum())
        sizes.append((len(seen), len(dumps(state))))

    _run(CORE.TimeWindowCore(query_literal(query)), _events(df), "random", check_state=check)
    early = max(size for seen, size in sizes if seen < 3000)
    assert max(size for seen, size in sizes) < 1.5 * early


def test_median_is_refused_by_the_paned_plan():
    q = query_literal(TimeWindowAggregation("q", "S1", 20, 10, (Aggregate("MEDIAN", "A1", "m"),)))
    with pytest.raises(ValueError, match="MEDIAN"):
        CORE.TimeWindowCore(q | {"paned": True})
