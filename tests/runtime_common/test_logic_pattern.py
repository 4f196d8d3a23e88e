"""The Java pattern twin (runtime_common/java/cepkit/logic/PatternLogic.java) gives the reference's
rows (validator/micro_patterns.py) bit for bit and in its order, on the traces and batchings the
Python core is tested with (test_core_pattern.py): every consumption policy, keyed and unkeyed, on
one stream and across two, short and long windows. A whole-stream run has its state written to
bytes and read back after every batch and at random events; a keyed pattern also runs as an
engine keeps it, per key in byte records and counters (SeqCandidates), its keys handled in random
order within a batch, pruned from the batch's last TS, and holds no more candidates at the end than
one window's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kit.workload import Comparison, Pattern, PatternEvent
from translators.micro_literal import query_literal
from validator.micro_inputs import merge_order, where_mask
from validator.micro_reference import expected_for_query

from tests.runtime_common.logic_trace import HAVE_JDK, Case, assert_bits, in_trigger_order, run_cases
from tests.runtime_common.test_core_pattern import KEYS, LAYOUTS, PAT_CASES, PAT_SELECT, POLICIES, THESIS
from tests.spark_runtime.two_streams import BATCHINGS, bounds, events_of, inputs

pytestmark = pytest.mark.skipif(not HAVE_JDK, reason="needs a JDK (javac, java), as scripts/setup.sh installs")

CASES: dict[str, tuple[Case, Pattern, dict]] = {}


def _add(name, query, streams, events, how, seed=0):
    lit = query_literal(query)
    modes = ("stream", "keyed") if query.key else ("stream",)
    for mode in modes:
        CASES[f"{name}-{mode}"] = (Case(name, lit, events, bounds(len(events), how, seed), seed, mode), query, streams)


for _policy, _key, _layout, _within, _how in PAT_CASES:
    _add(f"fixed-{_policy}-{_key}-{_layout}-{_within}-{_how}",
         Pattern("p", *LAYOUTS[_layout], _within, _policy, PAT_SELECT, _key), *inputs(4), _how)

for _seed in range(3):
    for _keys, (_key, _ids) in KEYS.items():
        _streams, _events = inputs(_ids, seed=100 + _seed, n=120, span_ms=300)
        for _policy in POLICIES:
            for _within in (1, 25, 10**5):
                for _how in BATCHINGS if _within == 25 else BATCHINGS[1:]:
                    _add(f"random-{_seed}-{_keys}-{_policy}-{_within}-{_how}",
                         Pattern("p", *LAYOUTS[("same", "cross", "back")[_seed]], _within, _policy, PAT_SELECT, _key),
                         _streams, _events, _how, seed=_seed * 7 + _within)


def _hand(rows):
    df = pd.DataFrame({"ID": np.array([r[1] for r in rows], np.int32), "A1": [float(r[2]) for r in rows],
                       "A2": 1.5, "TS": np.array([r[3] for r in rows], np.int64)})
    streams = merge_order({"S1": df})
    return streams, events_of(streams)


_HAND_FIRST = PatternEvent("a", "S1", (Comparison("A1", "lt", 50),))
_HAND_SECOND = PatternEvent("b", "S1", (Comparison("A1", "ge", 50),))
_KEYS_BY_HAND = [("A1", 1, 10, 0), ("C1", 2, 20, 0), ("A2", 1, 11, 1), ("D1", 2, 70, 2), ("B1", 1, 60, 3),
                 ("C2", 2, 21, 4), ("B2", 1, 61, 5), ("D2", 2, 71, 6), ("D3", 2, 72, 7)]
_HALF_OPEN = [("A1", 1, 10, 0), ("A2", 1, 11, 1), ("A3", 1, 12, 10), ("B1", 1, 60, 10), ("B2", 1, 61, 20)]
for _policy in POLICIES:
    for _how in ("one", "all"):
        _add(f"thesis-{_policy}-{_how}", Pattern("p", _HAND_FIRST, _HAND_SECOND, 1000, _policy, ("a.A1", "b.A1")),
             *_hand(THESIS), _how)
        for _within in (10, 11):
            _add(f"half-open-{_policy}-{_within}-{_how}",
                 Pattern("p", _HAND_FIRST, _HAND_SECOND, _within, _policy, ("a.A1", "b.A1"), "ID"),
                 *_hand(_HALF_OPEN), _how)
    for _how in ("one", "seven", "all"):
        _add(f"keys-by-hand-{_policy}-{_how}",
             Pattern("p", _HAND_FIRST, _HAND_SECOND, 1000, _policy, ("a.A1", "b.A1", "b.ID"), "ID"),
             *_hand(_KEYS_BY_HAND), _how)
    # Every event is both elements: each pairs with earlier ones only, equal TS included.
    _both = merge_order({"S1": pd.DataFrame({"ID": np.ones(4, np.int32), "A1": [1.0, 2.0, 3.0, 4.0],
                                              "TS": np.array([0, 0, 1, 1])})})
    _add(f"both-elements-{_policy}", Pattern("p", PatternEvent("a1", "S1"), PatternEvent("a2", "S1"), 100, _policy,
                                             ("a1.A1", "a2.A1"), "ID"), _both, events_of(_both), "one")
    # 200 IDs over 20 s, within 100 ms: many keys come and go; the state must not keep them.
    _rng = np.random.default_rng(5)
    _many = merge_order({"S1": pd.DataFrame({"ID": _rng.integers(1, 201, 2000).astype(np.int32),
                                              "A1": _rng.uniform(1, 100, 2000), "A2": _rng.uniform(1, 100, 2000),
                                              "TS": np.sort(_rng.integers(0, 20_000, 2000))})})
    _add(f"many-keys-{_policy}", Pattern("p", *LAYOUTS["same"], 100, _policy, PAT_SELECT, "ID"), _many,
         events_of(_many), "random", seed=3)
    _add(f"select-one-alias-{_policy}", Pattern("p", PatternEvent("a1", "S1"), PatternEvent("a2", "S2"), 200, _policy,
                                                ("a2.ID",), "ID"), *inputs(5, seed=11), "random")


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    run_cases([c for c, _, _ in CASES.values()], tmp_path_factory.mktemp("logic-pattern"))
    return CASES


def _check(case, query, streams):
    exp = expected_for_query(query, streams, None)
    got = in_trigger_order(case.rows) if case.mode == "keyed" else case.rows
    assert_bits(got, exp, case.query)
    ingest = dict(zip(case.events["offset"], case.events["ingestTS"]))
    assert got["ingestTS"].tolist() == [ingest[t] for t in got["_trigger"]]
    if case.mode == "keyed":
        # After the last batch's prune, only candidates of the last window are held.
        ev = case.events
        first = (ev["stream"] == query.first.stream).to_numpy() & where_mask(ev, query.first.where)
        assert case.live <= int((first & (ev["TS"] > ev["TS"].max() - query.within_ms)).sum())


FAMILIES = sorted({(n.split("-")[0], c.query["consumption"]) for n, (c, _, _) in CASES.items()})


@pytest.mark.parametrize("family, policy", FAMILIES)
def test_java_pattern_gives_the_reference_bit_for_bit(ran, family, policy):
    names = [n for n, (c, _, _) in ran.items() if n.split("-")[0] == family and c.query["consumption"] == policy]
    assert names
    for name in names:
        try:
            _check(*ran[name])
        except AssertionError as e:
            raise AssertionError(f"case {name}: {e}") from None


def test_the_cases_produce_rows():
    """The fixed cases are chosen to produce rows (a comparison of nothing with nothing proves nothing)."""
    empty = [n for n, (c, q, s) in CASES.items() if n.startswith(("fixed", "thesis", "keys-by-hand"))
             and len(expected_for_query(q, s, None)) == 0]
    assert not empty


def test_events_out_of_ts_order_are_refused(tmp_path):
    """Expiry relies on TS growing with the order: a whole-stream pattern refuses a TS that goes back."""
    streams, events = inputs(4)
    backwards = events.iloc[::-1].reset_index(drop=True)
    lit = query_literal(Pattern("p", *LAYOUTS["same"], 100, "all-all", PAT_SELECT, "ID"))
    err = run_cases([Case("back", lit, backwards, [(0, len(backwards))])], tmp_path, fails=True)
    assert "events must come in TS order" in err
