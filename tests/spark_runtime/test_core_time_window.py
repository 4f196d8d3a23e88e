"""The time-window core (spark_runtime/micro_cores/time_window.py) against the reference.

Q3 (per-event plan) and Q4 (paned plan) must give the reference's rows (specs/SEMANTICS.md
section 5) over any batching, with the state JSON round-tripped between micro-batches.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from kit.workload import Aggregate, TimeWindowAggregation, TwoLevelAggregation, output_schema
from spark_runtime.micro_cores import time_window as CORE
from translators.micro_literal import query_literal
from validator.compare import compare_stream
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

FUNCS = ("SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN", "COUNT")


def _aggs(kind, field="A1"):
    return tuple(Aggregate(f, None if f == "COUNT" else field, f.lower()) for f in FUNCS
                 if kind is TimeWindowAggregation or f != "MEDIAN")


def _stream(seed, n=300, close_values=False):
    """Repeated TS, TS on pane boundaries, and gaps longer than every range used here."""
    rng = np.random.default_rng(seed)
    steps = rng.choice([0, 0, 1, 37, 120, 499, 500, 6000, 13000], n,
                       p=[.25, .1, .1, .15, .15, .1, .1, .03, .02])
    ts = 123_457 + np.cumsum(steps)
    on_boundary = rng.random(n) < 0.15
    ts = np.maximum.accumulate(np.where(on_boundary, -(-ts // 500) * 500, ts))
    a1 = 50 + rng.uniform(0, 1e-6, n) if close_values else rng.uniform(1, 100, n)
    return pd.DataFrame({"ID": rng.integers(1, 5, n).astype(np.int32), "A1": a1,
                         "A2": rng.choice([1.5, 2.5, 3.5], n), "TS": ts.astype(np.int64)})


def _batches(n, how, rng):
    start = 0
    while start < n:
        size = {"one": 1, "seven": 7, "random": int(rng.integers(1, 60)), "all": n}[how]
        yield start, min(n, start + size)
        start += size


def _events(df):
    ev = merge_order({"S1": df})["S1"].sort_values("_pos").rename(columns={"_pos": "offset"})
    return ev.assign(stream="S1", ingestTS=np.int64(0)).reset_index(drop=True)


def _run(core, events, how, seed=0, check_state=None):
    state, rows, rng = core.initial_state(), [], np.random.default_rng(seed)
    for a, b in _batches(len(events), how, rng):
        state = json.loads(json.dumps(state))
        rows += core.process(state, events.iloc[a:b].reset_index(drop=True))
        if check_state:
            check_state(state, events.iloc[:b])
    return rows


def _check(query, df, how, seed=0):
    q = query_literal(query)
    expected = expected_for_query(query, merge_order({"S1": df}), None)
    got = pd.DataFrame(_run(CORE.TimeWindowCore(q), _events(df), how, seed), columns=q["fields"])
    assert len(expected) > 20
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
def test_stdev_of_close_values(kind, how):
    # Values 1e-6 apart around 50: a sum of squares would cancel every significant digit.
    query = kind("q", "S1", 5000, 500, _aggs(kind), ("ID",))
    _check(query, _stream(11, close_values=True), how, seed=2)


def _hand_rows(core_class, how):
    q = query_literal(TimeWindowAggregation("q", "S1", 20, 10, (Aggregate("SUM", "A1", "s"),)))
    df = pd.DataFrame({"ID": np.ones(6, np.int32), "A1": [1.0, 3.0, 5.0, 7.0, 9.0, 11.0],
                       "A2": np.zeros(6), "TS": np.array([0, 5, 10, 10, 45, 100], np.int64)})
    return _run(core_class(q), _events(df), how)


@pytest.mark.parametrize("how", ["one", "all"])
def test_by_hand(how):
    # slide 10, range 20. TS 10 closes [-10, 10); TS 45 closes [0, 20) and [10, 30), while
    # [20, 40) is empty; TS 100 closes [30, 50) and [40, 60) and jumps over empty ones;
    # [90, 110) never closes. Rows: (SUM, windowEnd, inputTS).
    assert _hand_rows(CORE.TimeWindowCore, how) == [(4.0, 10, 10), (16.0, 20, 45), (12.0, 30, 45),
                                                    (9.0, 50, 100), (9.0, 60, 100)]


@pytest.mark.parametrize("kind", [TimeWindowAggregation, TwoLevelAggregation])
def test_state_holds_only_the_range(kind):
    query = kind("q", "S1", 5000, 500, _aggs(kind), ("ID",))
    k = query.range_ms // query.slide_ms
    events = _events(_stream(5))
    sizes = []

    def check(state, seen):
        panes = np.asarray(state["cols"]["pane"])
        assert panes.min() >= state["next"] - k           # nothing older than the open windows
        if kind is TwoLevelAggregation:                   # one partial per (pane, group)
            assert len(set(zip(panes.tolist(), state["cols"]["g:ID"]))) == len(panes)
        else:                                             # exactly the events the range still sees
            assert len(panes) == int((seen.TS >= (state["next"] - k) * query.slide_ms).sum())
        sizes.append(len(panes))

    _run(CORE.TimeWindowCore(query_literal(query)), events, "seven", check_state=check)
    assert max(sizes) < len(events) / 4


def test_median_is_refused_by_the_paned_plan():
    q = query_literal(TimeWindowAggregation("q", "S1", 20, 10, (Aggregate("MEDIAN", "A1", "m"),)))
    with pytest.raises(ValueError, match="MEDIAN"):
        CORE.TimeWindowCore(q | {"paned": True})
