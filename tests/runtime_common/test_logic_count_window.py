"""The Java count-window twin (runtime_common/java/cepkit/logic/CountWindowLogic.java) gives the
reference's rows (validator/micro_windows.py `count_window`) in its order, on the traces and
batchings the Python core is tested with (test_core_count_window.py), its state written to bytes and
read back after every batch and at random events: every aggregate function, grouped (by an int,
by a double and an int) and not, sliding, tumbling and in between, windows longer than the stream,
values that jump by 1e12 and back.

Bit for bit: group values, COUNT, MAX, MIN, MEDIAN and STDEV (the twin repeats the reference's
two-pass arithmetic), inputTS and ingestTS. SUM and AVG: the reference sums in extended precision
from a centre of the whole input, which no streaming operator can know, so its last bit is not
reproducible; the twin's SUM is the exact sum correctly rounded (and AVG that over the count),
checked bit for bit against math.fsum of each window, and within the validator's tolerance of the
reference (specs/SEMANTICS.md section 2). The state stays bounded by the window.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kit.workload import Aggregate, CountWindowAggregation
from translators.micro_literal import query_literal
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

from tests.runtime_common.logic_trace import HAVE_JDK, Case, assert_bits, bits, run_cases
from tests.runtime_common.test_core_count_window import (ALL_FUNCS, BATCHINGS, FUNCS, MORE_FUNCS, _batches, _events,
                                                         _random_stream)

pytestmark = pytest.mark.skipif(not HAVE_JDK, reason="needs a JDK (javac, java), as scripts/setup.sh installs")

CASES: dict[str, tuple[Case, CountWindowAggregation, dict]] = {}


def _add(name, query, df, how, seed=0):
    streams = merge_order({"S1": df})
    events = _events(streams["S1"])
    sizes = _batches(len(events), how, np.random.default_rng(seed))
    ends = np.cumsum(sizes)
    cuts = list(zip(ends - sizes, ends))
    CASES[name] = (Case(name, query_literal(query), events, cuts, seed), query, streams)


_STREAM = _random_stream()
for _how in BATCHINGS:
    for _rows, _slide, _gb in [(7, 1, ("ID",)), (10, 10, ("ID",)), (10, 3, ("ID",)), (10, 3, ()), (9, 9, ()),
                               (1, 1, ("ID",)), (100, 1, ()), (60, 7, ("ID",)), (12, 5, ("A2", "ID"))]:
        _add(f"all-{_rows}-{_slide}-{'-'.join(_gb)}-{_how}",
             CountWindowAggregation("q", "S1", _rows, _slide, ALL_FUNCS, _gb), _STREAM, _how)

_STREAM5 = _random_stream(seed=5)
for _f in FUNCS:
    for _rows, _slide in [(9, 4), (8, 1), (8, 8)]:
        _agg = Aggregate(_f, None if _f == "COUNT" else "A1", "x")
        _add(f"alone-{_f}-{_rows}-{_slide}", CountWindowAggregation("q", "S1", _rows, _slide, (_agg,), ("ID",)),
             _STREAM5, "random")

_STREAM6 = _random_stream(seed=6, n=150)
for _slide in (1, 5, 150):
    for _how in (7, "random", "all"):
        _add(f"longer-{_slide}-{_how}", CountWindowAggregation("q", "S1", 151, _slide, ALL_FUNCS, ("ID",)),
             _STREAM6, _how)
        _add(f"equal-{_slide}-{_how}", CountWindowAggregation("q", "S1", 150, _slide, ALL_FUNCS, ()), _STREAM6, _how)

_add("constant-group", CountWindowAggregation("q", "S1", 150, 2, (Aggregate("STDEV", "A2", "sd"),
                                                                   Aggregate("MEDIAN", "A2", "md"),
                                                                   Aggregate("STDEV", "A1", "sd1")), ("A2",)),
     _random_stream(seed=7, n=1500), 13)

_DRIFT = _random_stream(seed=8, n=4000, ids=4, span_ms=600_000)
_i = np.arange(len(_DRIFT))
_DRIFT["A1"] += np.where((_i >= 1000) & (_i < 2000), 1e8, 0.0) - np.where(_i >= 3000, 1e6, 0.0)
_DRIFT.loc[[1500, 2500, 3500], "A1"] = [1e12, -1e11, 1e10]          # spikes that come and go
for _how in ("random", "all"):
    for _rows, _slide, _ids in [(300, 1, 3), (200, 1, 1), (400, 37, 4), (300, 300, 3)]:
        _df = _DRIFT.assign(ID=(_DRIFT["ID"] - 1) % _ids + 1)
        _add(f"drift-{_rows}-{_slide}-{_ids}-{_how}",
             CountWindowAggregation("q", "S1", _rows, _slide, ALL_FUNCS, ("ID",)), _df, _how)

for _seed in (11, 12, 13):
    _df = _random_stream(seed=_seed, n=300, ids=int(np.random.default_rng(_seed).choice([1, 4, 40])))
    _gb = [("ID",), (), ("A2", "ID")][_seed % 3]
    for _how in BATCHINGS:
        for _rows, _slide in [(1, 1), (3, 1), (3, 2), (3, 3), (50, 1), (50, 9), (50, 50), (400, 3)]:
            _add(f"random-{_seed}-{_how}-{_rows}-{_slide}",
                 CountWindowAggregation("q", "S1", _rows, _slide, MORE_FUNCS, _gb), _df, _how)

_LONG = _random_stream(seed=9, n=6000, ids=20, span_ms=600_000)
for _rows, _slide in [(50, 1), (50, 7), (50, 50), (1, 1)]:
    _add(f"bounded-{_rows}-{_slide}", CountWindowAggregation("q", "S1", _rows, _slide, MORE_FUNCS, ("ID",)), _LONG, 97)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    run_cases([c for c, _, _ in CASES.values()], tmp_path_factory.mktemp("logic-count-window"))
    return CASES


def exact_sums(query: CountWindowAggregation, ev: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per SUM or AVG aggregate, its value for every reference row, from math.fsum of the group's
    events in the window (the exact sum, correctly rounded), rows in the reference order."""
    n, rows, slide = len(ev), query.rows, query.slide
    keys = ev[list(query.group_by)].to_numpy() if query.group_by else np.zeros((n, 1))
    wanted = [a for a in query.aggregates if a.function in ("SUM", "AVG")]
    out = {a.alias: [] for a in wanted}
    for e in range(rows - 1, n, slide):
        lo = e - rows + 1
        entered = keys[0 if e == rows - 1 else e - slide + 1: e + 1]
        for g in sorted({tuple(k) for k in entered.tolist()}):
            mine = (keys[lo:e + 1] == np.asarray(g)).all(axis=1)
            for a in wanted:
                vals = ev[a.field].to_numpy(np.float64)[lo:e + 1][mine]
                s = math.fsum(vals.tolist())
                out[a.alias].append(s if a.function == "SUM" else s / len(vals))
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


FAMILIES = sorted({n.split("-")[0] for n in CASES})


@pytest.mark.parametrize("family", FAMILIES)
def test_java_count_window_gives_the_reference(ran, family):
    names = [n for n in ran if n.split("-")[0] == family]
    rows = 0
    for name in names:
        case, query, streams = ran[name]
        exp = expected_for_query(query, streams, None)
        near = tuple(a.alias for a in query.aggregates if a.function in ("SUM", "AVG"))
        try:
            assert_bits(case.rows, exp, case.query, near)
            for alias, want in exact_sums(query, streams["S1"]).items():
                bad = np.flatnonzero(bits(case.rows[alias]) != bits(want))
                assert len(bad) == 0, f"{alias} is not the exact sum rounded at row {bad[0]}"
            ingest = dict(zip(case.events["offset"], case.events["ingestTS"]))
            assert case.rows["ingestTS"].tolist() == [ingest[t] for t in case.rows["_trigger"]]
            # State: the count, and per event of the last `rows` its group and values (8 bytes each).
            width = len(query.group_by) + len({a.field for a in query.aggregates if a.function != "COUNT"})
            assert case.state_bytes <= 25 + 8 * width * query.rows
        except AssertionError as e:
            raise AssertionError(f"case {name}: {e}") from None
        rows += len(exp)
    assert rows > 0 or family == "longer"


def test_the_longer_window_emits_nothing_and_the_equal_one_once(ran):
    for name, (case, _, _) in ran.items():
        if name.startswith("longer"):
            assert len(case.rows) == 0
        if name.startswith("equal"):
            assert len(case.rows) == 1 and case.rows["count"].iloc[0] == 150


def test_constant_group_field_has_zero_stdev(ran):
    rows = ran["constant-group"][0].rows
    assert len(rows) > 500 and (rows["sd"] == 0.0).all() and (rows["md"] == rows["A2"]).all()
