"""The count-window core (spark_runtime/micro_cores/count_window.py) against the reference.

Random streams go through the core in batches of various sizes, with the state JSON-round-tripped
between calls as a generated program does; the rows must be exactly the reference's
(validator.micro_reference) under the validator's own comparison, and in the same order.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from kit.workload import Aggregate, CountWindowAggregation, output_schema
from spark_runtime.micro_cores import count_window as CORE
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


def _run(core_cls, q, events, how, seed=0):
    core = core_cls(q)
    state = json.loads(json.dumps(core.initial_state()))
    rows, start = [], 0
    for size in _batches(len(events), how, np.random.default_rng(seed)):
        rows += core.process(state, events.iloc[start:start + size].reset_index(drop=True))
        state = json.loads(json.dumps(state))
        start += size
    assert start == len(events)
    return pd.DataFrame(rows, columns=q["fields"]) if rows else pd.DataFrame({f: [] for f in q["fields"]})


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


@pytest.mark.parametrize("rows, slide, ids", [(300, 1, 3), (200, 1, 1), (400, 37, 4), (300, 300, 3)])
def test_long_stream_without_drift(rows, slide, ids):
    """Thousands of updates per group, and a level that jumps: running sums must not drift."""
    df = _random_stream(seed=8, n=4000, ids=ids, span_ms=600_000)
    i = np.arange(len(df))
    df["A1"] += np.where((i >= 1000) & (i < 2000), 1e8, 0.0) - np.where(i >= 3000, 1e6, 0.0)
    df.loc[[1500, 2500, 3500], "A1"] = [1e12, -1e11, 1e10]             # spikes that come and go
    _check(CountWindowAggregation("q", "S1", rows, slide, ALL_FUNCS, ("ID",)), df, "random")
