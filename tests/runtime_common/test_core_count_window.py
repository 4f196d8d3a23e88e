"""The count-window core (runtime_common/micro_cores/count_window.py) against the reference.

Random streams go through the core in batches of various sizes, with the state stored and read back
between calls as a generated program does; the rows must be exactly the reference's
(validator.micro_reference) under the validator's own comparison, and in the same order. Every call
returns a DataFrame with exactly the query's fields and dtypes. Hand-computed cases pin the meaning
on a few events, and the state must stay bounded by the window however long the stream.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from kit.workload import Aggregate, CountWindowAggregation, output_schema
from runtime_common.micro_cores import count_window as CORE
from runtime_common.micro_cores import state_codec
from runtime_common.micro_cores.state_codec import round_trip
from translators.micro_literal import query_literal
from validator.compare import compare_stream
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

FUNCS = ("SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN", "COUNT")
ALL_FUNCS = tuple(Aggregate(f, None if f == "COUNT" else "A1", f.lower()) for f in FUNCS)


def _random_stream(seed=3, n=300, ids=5, span_ms=20_000):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"ID": rng.integers(1, ids + 1, n).astype(np.int32), "A1": rng.uniform(1, 100, n),
                         "A2": rng.integers(1, 4, n).astype(np.float64),     # few values: a group key
                         "TS": np.sort(rng.integers(0, span_ms, n)).astype(np.int64)})


def _events(df: pd.DataFrame) -> pd.DataFrame:
    ev = df.rename(columns={"_pos": "offset"}).sort_values("offset").reset_index(drop=True)
    ev["stream"] = "S1"
    ev["ingestTS"] = np.arange(len(ev), dtype=np.int64) + 10**12
    return ev[["ID", "A1", "A2", "TS", "stream", "offset", "ingestTS"]]


def _batches(n, how, rng):
    if how == "all":
        return [n]
    if isinstance(how, int):
        return [how] * (n // how) + ([n % how] if n % how else [])
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(0, 60)))          # empty batches included
    sizes[-1] -= sum(sizes) - n
    return sizes


def _dtypes(q):
    return [np.dtype(np.int64) if t in ("int", "long") else np.dtype(np.float64) for t in q["types"]]


def _run(core_cls, q, events, how, seed=0, check_state=None):
    """The core's output over `events` cut into batches, the state round-tripped in between; every
    call's frame has exactly q's fields with their dtypes (empty frames too)."""
    core = core_cls(q)
    state = round_trip(core.initial_state())
    frames, start = [], 0
    for size in _batches(len(events), how, np.random.default_rng(seed)):
        out = core.process(state, events.iloc[start:start + size].reset_index(drop=True))
        assert isinstance(out, pd.DataFrame) and list(out.columns) == q["fields"]
        assert list(out.dtypes) == _dtypes(q)
        frames.append(out)
        state = round_trip(state)
        if check_state:
            check_state(state)
        start += size
    assert start == len(events)
    return pd.concat(frames, ignore_index=True)


def _check(query, df, how, core_cls=CORE.CountWindowCore):
    streams = merge_order({"S1": df})
    expected = expected_for_query(query, streams, None)
    got = _run(core_cls, query_literal(query), _events(streams["S1"]), how)
    assert len(got) == len(expected)
    res = compare_stream(expected, got, output_schema(query))
    assert (res.missing, res.undue, res.wrong) == (0, 0, 0), res.incorrect.head(10).to_string()
    # inputTS is not compared by compare_stream; the order is the reference order.
    assert got["inputTS"].astype(np.int64).tolist() == expected["inputTS"].astype(np.int64).tolist()
    for g in query.group_by:
        assert got[g].tolist() == expected[g].tolist()
    return expected


BATCHINGS = [1, 7, "random", "all"]


@pytest.mark.parametrize("how", BATCHINGS)
@pytest.mark.parametrize("rows, slide, group_by", [
    (7, 1, ("ID",)), (10, 10, ("ID",)), (10, 3, ("ID",)), (10, 3, ()), (9, 9, ()), (1, 1, ("ID",)),
    (100, 1, ()), (60, 7, ("ID",)), (12, 5, ("A2", "ID"))])
def test_all_functions_match_reference(rows, slide, group_by, how):
    exp = _check(CountWindowAggregation("q", "S1", rows, slide, ALL_FUNCS, group_by), _random_stream(), how)
    assert len(exp) > 0


@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize("rows, slide", [(9, 4), (8, 1), (8, 8)])
def test_each_function_alone(func, rows, slide):
    agg = Aggregate(func, None if func == "COUNT" else "A1", "x")
    _check(CountWindowAggregation("q", "S1", rows, slide, (agg,), ("ID",)), _random_stream(seed=5), "random")


@pytest.mark.parametrize("how", [7, "random", "all"])
@pytest.mark.parametrize("slide", [1, 5, 150])
def test_window_larger_than_stream_emits_nothing_and_equal_emits_once(slide, how):
    df = _random_stream(seed=6, n=150)
    assert len(_check(CountWindowAggregation("q", "S1", 151, slide, ALL_FUNCS, ("ID",)), df, how)) == 0
    exp = _check(CountWindowAggregation("q", "S1", 150, slide, ALL_FUNCS, ()), df, how)
    assert len(exp) == 1 and exp["count"].iloc[0] == 150


def test_constant_group_field_has_zero_stdev():
    """Grouped by A2, STDEV(A2) is exactly 0 and MEDIAN(A2) the key, however long the window."""
    aggs = (Aggregate("STDEV", "A2", "sd"), Aggregate("MEDIAN", "A2", "md"), Aggregate("STDEV", "A1", "sd1"))
    q = CountWindowAggregation("q", "S1", 150, 2, aggs, ("A2",))
    streams = merge_order({"S1": _random_stream(seed=7, n=1500)})
    got = _run(CORE.CountWindowCore, query_literal(q), _events(streams["S1"]), "random")
    assert len(got) > 500
    assert (got["sd"] == 0.0).all() and (got["md"] == got["A2"]).all()
    _check(q, _random_stream(seed=7, n=1500), 13)


@pytest.mark.parametrize("how", ["random", "all"])
@pytest.mark.parametrize("rows, slide, ids", [(300, 1, 3), (200, 1, 1), (400, 37, 4), (300, 300, 3)])
def test_long_stream_without_drift(rows, slide, ids, how):
    """Thousands of updates per group, and a level that jumps: running sums must not drift."""
    df = _random_stream(seed=8, n=4000, ids=ids, span_ms=600_000)
    i = np.arange(len(df))
    df["A1"] += np.where((i >= 1000) & (i < 2000), 1e8, 0.0) - np.where(i >= 3000, 1e6, 0.0)
    df.loc[[1500, 2500, 3500], "A1"] = [1e12, -1e11, 1e10]             # spikes that come and go
    _check(CountWindowAggregation("q", "S1", rows, slide, ALL_FUNCS, ("ID",)), df, how)


# ---- hand-computed cases ------------------------------------------------------------------------

def _hand(rows, slide, aggs, group_by, ids, a1, how=1):
    """The core's rows for events with these IDs and A1 values (TS = 10 * event number)."""
    n = len(ids)
    ev = pd.DataFrame({"ID": np.asarray(ids, np.int32), "A1": np.asarray(a1, np.float64),
                       "A2": np.zeros(n), "TS": 10 * np.arange(1, n + 1, dtype=np.int64), "stream": "S1",
                       "offset": np.arange(n, dtype=np.int64), "ingestTS": np.arange(n, dtype=np.int64)})
    q = query_literal(CountWindowAggregation("q", "S1", rows, slide, aggs, group_by))
    return _run(CORE.CountWindowCore, q, ev, how)


def _agg(*names):
    return tuple(Aggregate(f, None if f == "COUNT" else "A1", f.lower()) for f in names)


@pytest.mark.parametrize("how", [1, 2, "all"])
def test_hand_sliding_two_groups(how):
    """rows 3, slide 1: n=3 emits both groups of events 1..3; then only the newest event's group."""
    got = _hand(3, 1, _agg("SUM", "COUNT", "STDEV", "MEDIAN"), ("ID",), [1, 2, 1, 2, 1], [1, 2, 4, 8, 16], how)
    assert got.values.tolist() == [[1, 5.0, 2, 1.5, 2.5, 30],      # events 1, 3
                                   [2, 2.0, 1, 0.0, 2.0, 30],      # event 2 alone: STDEV exactly 0
                                   [2, 10.0, 2, 3.0, 5.0, 40],     # events 2, 4
                                   [1, 20.0, 2, 6.0, 10.0, 50]]    # events 3, 5


@pytest.mark.parametrize("how", [1, 3, "all"])
def test_hand_slide_2_of_rows_3(how):
    """Evaluations at n = 3, 5, 7; group 3 only leaves the window at n=5, so it emits nothing."""
    got = _hand(3, 2, _agg("SUM"), ("ID",), [1, 3, 1, 1, 2, 2, 1], [1, 2, 3, 4, 5, 6, 7], how)
    assert got.values.tolist() == [[1, 4.0, 30], [3, 2.0, 30],      # window 1..3, all entered
                                   [1, 7.0, 50], [2, 5.0, 50],      # window 3..5, entered 4, 5
                                   [1, 7.0, 70], [2, 11.0, 70]]     # window 5..7, entered 6, 7


@pytest.mark.parametrize("how", [1, 2, 4, "all"])
def test_hand_tumbling(how):
    """rows = slide = 3: blocks 1..3 and 4..6 emit every group present; event 7 never closes."""
    got = _hand(3, 3, _agg("AVG", "MAX", "MIN", "COUNT"), ("ID",), [1, 2, 1, 2, 2, 2, 1], [1, 5, 3, 2, 4, 9, 100], how)
    assert got.values.tolist() == [[1, 2.0, 3.0, 1.0, 2, 30], [2, 5.0, 5.0, 5.0, 1, 30],
                                   [2, 5.0, 9.0, 2.0, 3, 60]]


def test_hand_median_even_count_and_stdev_one_event():
    got = _hand(4, 1, _agg("MEDIAN", "STDEV"), (), [1] * 5, [10, 1, 4, 3, 7], 2)
    assert got["median"].tolist() == [3.5, 3.5]                   # (3 + 4) / 2 twice
    assert got["stdev"].tolist() == pytest.approx([np.sqrt(11.25), np.sqrt(4.6875)], rel=1e-14)
    one = _hand(1, 1, _agg("STDEV", "MEDIAN"), ("ID",), [1, 2, 1], [1e8 + 0.1, 3.3, -7.7], 2)
    assert one["stdev"].tolist() == [0.0, 0.0, 0.0] and one["median"].tolist() == [1e8 + 0.1, 3.3, -7.7]


# ---- random inputs against the reference --------------------------------------------------------

MORE_FUNCS = ALL_FUNCS + (Aggregate("STDEV", "A2", "sd2"), Aggregate("MEDIAN", "A2", "md2"),
                          Aggregate("MAX", "A2", "mx2"), Aggregate("AVG", "A2", "av2"))


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("how", BATCHINGS)
@pytest.mark.parametrize("rows, slide", [(1, 1), (3, 1), (3, 2), (3, 3), (50, 1), (50, 9), (50, 50), (400, 3)])
def test_random_against_reference(seed, how, rows, slide):
    rng = np.random.default_rng(seed)
    df = _random_stream(seed=seed, n=300, ids=int(rng.choice([1, 4, 40])))
    group_by = [("ID",), (), ("A2", "ID")][seed % 3]
    exp = _check(CountWindowAggregation("q", "S1", rows, slide, MORE_FUNCS, group_by), df, how)
    assert (len(exp) > 0) == (rows <= 300)


# ---- bounded state ------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, slide", [(50, 1), (50, 7), (50, 50), (1, 1)])
def test_state_stays_bounded(rows, slide):
    """Whatever the stream's length, the state holds at most `rows` events."""
    df = _random_stream(seed=9, n=6000, ids=20, span_ms=600_000)
    q = CountWindowAggregation("q", "S1", rows, slide, MORE_FUNCS, ("ID",))
    sizes = []

    def check(state):
        arrays = [a for a in state["tail"].values()]
        assert arrays and all(isinstance(a, np.ndarray) and len(a) <= rows for a in arrays)
        assert set(state) == {"n", "tail"}
        sizes.append(len(state_codec.dumps(state)))

    streams = merge_order({"S1": df})
    _run(CORE.CountWindowCore, query_literal(q), _events(streams["S1"]), 97, check_state=check)
    assert max(sizes) < 2000 + 60 * rows             # header plus 6 columns of 8 bytes per event
