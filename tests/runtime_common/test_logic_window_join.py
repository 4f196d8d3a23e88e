"""The Java window-join twin (runtime_common/java/cepkit/logic/WindowJoinLogic.java) gives the
reference's rows (validator/micro_joins.py) bit for bit and in its order, on the traces and
batchings the Python core is tested with (test_core_window_join.py), its state written to bytes and
read back after every batch and at random events: with and without `where`, either stream as
`left`, one key or many, windows of one event to longer than the input, int keys against double
keys, widely spread keys, hundreds of matches per trigger. The state holds at most `rows` events
per side.

Not taken over: the core test's keys of +-2^60, which no event carries (ID is an int,
specs/SEMANTICS.md section 1; an Event holds it as one)."""

from __future__ import annotations

import numpy as np
import pytest

from kit.workload import Comparison, WindowJoin
from translators.micro_literal import query_literal
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

from tests.runtime_common.logic_trace import HAVE_JDK, Case, assert_bits, run_cases
from tests.runtime_common.test_core_window_join import (WJ_SELECT, WJ_WHERE, _hand_inputs, _keyed_inputs,
                                                        _random_inputs)
from tests.spark_runtime.two_streams import BATCHINGS, bounds, events_of, inputs, stream

pytestmark = pytest.mark.skipif(not HAVE_JDK, reason="needs a JDK (javac, java), as scripts/setup.sh installs")

CASES: dict[str, tuple[Case, WindowJoin, dict]] = {}


def _add(name, query, data, how, seed=0):
    streams, events = data
    CASES[name] = (Case(name, query_literal(query), events, bounds(len(events), how, seed), seed), query, streams)


for _how in BATCHINGS:
    for _ids in (3, 20):
        for _rows in (4, 1000):
            for _wname, _where in (("nowhere", ()), ("where", WJ_WHERE)):
                _add(f"fixed-{_rows}-{_wname}-{_ids}-{_how}",
                     WindowJoin("j", "S1", "S2", _rows, "ID", "ID", WJ_SELECT, _where), inputs(_ids), _how)
for _how in ("one", "random"):
    for _rows in (5, 50):
        _add(f"single-key-{_rows}-{_how}", WindowJoin("j", "S1", "S2", _rows, "ID", "ID", WJ_SELECT), inputs(1), _how)
    _add(f"right-first-{_how}", WindowJoin("j", "S2", "S1", 9, "ID", "ID", ("S1.A2", "S2.A1", "S1.TS"),
                                           (Comparison("S1.ID", "ne", 2),)), inputs(4, seed=7), _how)
for _how in BATCHINGS:
    for _sides in (("S1", "S2"), ("S2", "S1")):
        for _case in ("nowhere", "where"):
            _where = (Comparison("S1.A1", "gt", 1), Comparison("S2.A1", "ne", 12)) if _case == "where" else ()
            _add(f"hand-{_case}-{_sides[0]}-{_how}",
                 WindowJoin("j", *_sides, 2, "ID", "ID", ("S1.A1", "S2.A1"), _where), _hand_inputs(), _how)
for _ids in (1, 3, 100):
    for _rows in (1, 4, 100, 10_000):
        for _seed in range(3):
            _where = (Comparison("S1.A2", "lt", 60), Comparison("S2.A1", "ge", 25)) if _seed == 1 else ()
            _left, _right = ("S2", "S1") if _seed == 2 else ("S1", "S2")
            for _how in ("all", "seven", "random"):
                _add(f"random-{_ids}-{_rows}-{_seed}-{_how}",
                     WindowJoin("j", _left, _right, _rows, "ID", "ID", ("S1.ID", "S2.A1", "S1.TS", "S2.TS", "S1.A2"),
                                _where), _random_inputs(_seed, _ids), _how, seed=_seed)
for _keys in ("S1.A3=S2.ID", "S1.A3=S2.A3"):
    _lk, _rk = (k.split(".")[1] for k in _keys.split("="))
    for _how in ("all", "random"):
        _add(f"double-keys-{_lk}-{_rk}-{_how}", WindowJoin("j", "S1", "S2", 20, _lk, _rk, ("S1.ID", "S2.A3", "S2.TS")),
             _keyed_inputs(0, np.array([1, 2, 3], np.int32)), _how)
        _add(f"wide-keys-{_how}", WindowJoin("j", "S1", "S2", 30, "ID", "ID", ("S1.ID", "S2.ID", "S1.A1")),
             _keyed_inputs(1, np.array([1, 65_537, 100_000], np.int64)), _how)
_MANY = merge_order({"S1": stream(5, 1500, 2, 10_000), "S2": stream(6, 1500, 2, 10_000)})
for _how in ("all", "random"):
    _add(f"many-pairs-{_how}", WindowJoin("j", "S1", "S2", 400, "ID", "ID", ("S1.A1", "S2.A2", "S2.ID")),
         (_MANY, events_of(_MANY)), _how)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    run_cases([c for c, _, _ in CASES.values()], tmp_path_factory.mktemp("logic-window-join"))
    return CASES


FAMILIES = sorted({n.split("-")[0] for n in CASES})


@pytest.mark.parametrize("family", FAMILIES)
def test_java_window_join_gives_the_reference_bit_for_bit(ran, family):
    rows = 0
    for name in [n for n in ran if n.split("-")[0] == family]:
        case, query, streams = ran[name]
        exp = expected_for_query(query, streams, None)
        try:
            assert_bits(case.rows, exp, case.query)
            ingest = dict(zip(case.events["offset"], case.events["ingestTS"]))
            assert case.rows["ingestTS"].tolist() == [ingest[t] for t in case.rows["_trigger"]]
            # Per side: its count, and per kept event its number, key and selected fields.
            per = [8 * (2 + len({s for s in query.select if s.startswith(side + ".")})) for side in query.inputs]
            assert case.state_bytes <= 5 + 24 + query.rows * sum(per)
        except AssertionError as e:
            raise AssertionError(f"case {name}: {e}") from None
        rows += len(exp)
    assert rows > 0
