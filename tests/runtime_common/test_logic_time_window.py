"""The Java time-window logic (runtime_common/java/cepkit/logic/TimeWindowLogic.java over the paned
WindowQuery/WindowBucket/WindowPanes that Spark's JVM plans share) gives the reference's rows
(validator/micro_windows.py `time_window`) in its order, on the traces and batchings the Python core
is tested with (test_core_time_window.py), its state written to bytes and read back after every
batch and at random events: Q3 and Q4, every aggregate, no group, one and two group fields,
tumbling and sliding, TS on pane boundaries, gaps wider than every window, close values far from 0.

Bit for bit: group values, windowEnd, inputTS, ingestTS, COUNT, MAX, MIN and MEDIAN. SUM, AVG and
STDEV come from pane partials (running sums, Chan's merge), which cannot repeat the reference's
arithmetic (extended-precision prefix sums; a two-pass STDEV over each window's values): they are
checked within the validator's tolerance (specs/SEMANTICS.md section 2).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kit.workload import Aggregate, TimeWindowAggregation, TwoLevelAggregation
from translators.micro_literal import query_literal
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

from tests.runtime_common.logic_trace import HAVE_JDK, Case, assert_bits, run_cases
from tests.runtime_common.test_core_time_window import _aggs, _batches, _stream

pytestmark = pytest.mark.skipif(not HAVE_JDK, reason="needs a JDK (javac, java), as scripts/setup.sh installs")

CASES: dict[str, tuple[Case, object, dict, int]] = {}
NEAR = ("SUM", "AVG", "STDEV")


def _add(name, query, df, how, seed=0, min_rows=20):
    streams = merge_order({"S1": df})
    ev = streams["S1"].sort_values("_pos").rename(columns={"_pos": "offset"}).reset_index(drop=True)
    ev = ev.assign(stream="S1", ingestTS=ev["offset"] + 10**12)
    cuts = list(_batches(len(ev), how, np.random.default_rng(seed)))
    CASES[name] = (Case(name, query_literal(query), ev, cuts, seed), query, streams, min_rows)


for _kind in (TimeWindowAggregation, TwoLevelAggregation):
    _k = _kind.__name__[:3]
    for _range, _slide in ((1000, 1000), (5000, 500)):
        for _gb in ((), ("ID",), ("ID", "A2")):
            for _how in ("one", "seven", "random", "all"):
                _add(f"batching-{_k}-{_range}-{_slide}-{'-'.join(_gb)}-{_how}",
                     _kind("q", "S1", _range, _slide, _aggs(_kind), _gb), _stream(7), _how, seed=1)
    for _how in ("one", "random"):
        for _center, _spread in ((50, 1e-6), (1e9, 1.0)):
            _add(f"close-{_k}-{_center}-{_how}", _kind("q", "S1", 5000, 500, _aggs(_kind), ("ID",)),
                 _stream(11, close_values=(_center, _spread)), _how, seed=2)
    _rng = np.random.default_rng(3)
    _many = pd.DataFrame({"ID": _rng.integers(0, 50, 4000).astype(np.int32), "A1": _rng.normal(1e6, 1.0, 4000),
                          "A2": _rng.choice([1.5, 2.5], 4000), "TS": np.sort(_rng.integers(0, 60_000, 4000))})
    for _how in (333, "all"):
        _add(f"many-{_k}-{_how}", _kind("q", "S1", 6000, 1500, _aggs(_kind), ("ID",)), _many, _how)
    _hand = pd.DataFrame({"ID": np.array([2, 1, 1, 2, 1, 2], np.int32), "A1": [4.0, 1.0, 3.0, 8.0, 5.0, 10.0],
                          "A2": np.zeros(6), "TS": np.array([3, 5, 12, 15, 31, 95], np.int64)})
    for _how in ("one", "seven", "all"):
        _add(f"hand-{_k}-{_how}", _kind("q", "S1", 20, 10, _aggs(_kind), ("ID",)), _hand, _how, min_rows=7)
    # A long input: the state written after a batch must not grow with it.
    _rng = np.random.default_rng(5)
    _long = pd.DataFrame({"ID": _rng.integers(1, 5, 20_000).astype(np.int32), "A1": _rng.uniform(1, 100, 20_000),
                          "A2": np.zeros(20_000), "TS": 123_457 + np.cumsum(_rng.integers(0, 100, 20_000))})
    _add(f"state-{_k}-long", _kind("q", "S1", 5000, 500, _aggs(_kind), ("ID",)), _long, "random")
    _add(f"state-{_k}-early", _kind("q", "S1", 5000, 500, _aggs(_kind), ("ID",)), _long.iloc[:3000], "random")

for _seed in range(8):
    _rng = np.random.default_rng(100 + _seed)
    _kind = [TimeWindowAggregation, TwoLevelAggregation][_seed % 2]
    _range, _slide = [(500, 500), (1000, 250), (3000, 1000), (2000, 500), (4000, 500), (750, 250),
                      (2000, 250), (1500, 500)][_seed]
    _gb = [(), ("ID",), ("A2",), ("ID", "A2")][_seed // 2]
    _field = ["A1", "A2"][int(_rng.integers(0, 2))]
    for _how in ("one", "seven", "random", "all"):
        _add(f"random-{_seed}-{_how}", _kind("q", "S1", _range, _slide, _aggs(_kind, _field), _gb),
             _stream(_seed, n=400), _how, seed=_seed, min_rows=100)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    run_cases([c for c, _, _, _ in CASES.values()], tmp_path_factory.mktemp("logic-time-window"))
    return CASES


FAMILIES = sorted({n.split("-")[0] for n in CASES})


@pytest.mark.parametrize("family", FAMILIES)
def test_java_time_window_gives_the_reference(ran, family):
    for name in [n for n in ran if n.split("-")[0] == family]:
        case, query, streams, min_rows = ran[name]
        single = query.single_level() if isinstance(query, TwoLevelAggregation) else query
        exp = expected_for_query(single, streams, None)
        try:
            assert len(exp) >= min_rows
            near = tuple(a.alias for a in query.aggregates if a.function in NEAR)
            assert_bits(case.rows, exp, case.query, near)
            ingest = dict(zip(case.events["offset"], case.events["ingestTS"]))
            assert case.rows["ingestTS"].tolist() == [ingest[t] for t in case.rows["_trigger"]]
        except AssertionError as e:
            raise AssertionError(f"case {name}: {e}") from None


def test_the_state_holds_only_the_open_range(ran):
    for k in ("Tim", "Two"):
        early, late = ran[f"state-{k}-early"][0].state_bytes, ran[f"state-{k}-long"][0].state_bytes
        assert 0 < late < 1.5 * early, (k, early, late)
