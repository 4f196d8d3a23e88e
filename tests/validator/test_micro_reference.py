"""Reference answers of the microbenchmark queries (specs/SEMANTICS.md).

Windows are checked against a literal, loop-by-loop reading of the spec (the oracle below);
joins and patterns against small cases worked out by hand; and every query of every quick suite
gets an answer over data generated for its workload.
"""

from __future__ import annotations

import statistics

import numpy as np
import pandas as pd
import pytest

from datagen.micro import generate_micro
from kit.config import load_config
from kit.errors import CepkitError
from kit.shipped import specs_dir
from kit.workload import (Aggregate, Comparison, CountWindowAggregation, Filter, Pattern, PatternEvent,
                          TableJoin, TimeWindowAggregation, TwoLevelAggregation, WindowJoin, output_schema,
                          read_suite)
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_dataset, expected_for_query

ALL_FUNCS = tuple(Aggregate(f, None if f == "COUNT" else "A1", f.lower())
                  for f in ("SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN", "COUNT"))


def _aggs(vals):
    return {"sum": sum(vals), "avg": sum(vals) / len(vals), "max": max(vals), "min": min(vals),
            "stdev": statistics.pstdev(vals), "median": statistics.median(vals), "count": len(vals)}


def _random_stream(seed=3, n=400, ids=5, span_ms=20_000):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"ID": rng.integers(1, ids + 1, n).astype(np.int32), "A1": rng.uniform(1, 100, n),
                         "TS": np.sort(rng.integers(0, span_ms, n)).astype(np.int64)})


def _assert_frames_close(exp: pd.DataFrame, got: pd.DataFrame):
    assert list(got.columns) == list(exp.columns)
    assert len(got) == len(exp)
    for c in exp.columns:
        assert np.allclose(exp[c].to_numpy(float), got[c].to_numpy(float), rtol=1e-12, atol=1e-12), c


@pytest.mark.parametrize("rows, slide, group_by", [(7, 1, ("ID",)), (10, 10, ("ID",)), (9, 4, ("ID",)), (5, 2, ())])
def test_count_window_matches_literal_reading(rows, slide, group_by):
    df = _random_stream()
    q = CountWindowAggregation("q", "S1", rows, slide, ALL_FUNCS, group_by)
    got = expected_for_query(q, merge_order({"S1": df}), None)
    exp, prev = [], -1
    for e in range(rows - 1, len(df), slide):                     # evaluation points, once full
        win = df.iloc[e - rows + 1:e + 1]                         # the whole stream's last `rows`
        entered = df.iloc[prev + 1:e + 1]                         # events new since the last one
        for gv in (sorted(entered.ID.unique()) if group_by else [None]):
            vals = list(win[win.ID == gv].A1) if group_by else list(win.A1)
            exp.append(({"ID": gv} if group_by else {}) | _aggs(vals) | {"inputTS": df.TS.iloc[e]})
        prev = e
    _assert_frames_close(pd.DataFrame(exp), got)


@pytest.mark.parametrize("kind", [TimeWindowAggregation, TwoLevelAggregation])
@pytest.mark.parametrize("range_ms, slide_ms, group_by", [(3000, 1000, ("ID",)), (1000, 1000, ()), (5000, 500, ("ID",))])
def test_time_window_matches_literal_reading(kind, range_ms, slide_ms, group_by):
    df = _random_stream(seed=4)
    funcs = tuple(a for a in ALL_FUNCS if kind is TimeWindowAggregation or a.function != "MEDIAN")
    got = expected_for_query(kind("q", "S1", range_ms, slide_ms, funcs, group_by), merge_order({"S1": df}), None)
    ts, exp = df.TS.to_numpy(), []
    for e in range((ts[0] // slide_ms + 1) * slide_ms, ts[-1] + 1, slide_ms):
        closing = int(np.searchsorted(ts, e))                     # first event with TS >= e
        win = df[(df.TS >= e - range_ms) & (df.TS < e)]
        for gv in (sorted(win.ID.unique()) if group_by else ([None] if len(win) else [])):
            vals = list(win[win.ID == gv].A1) if group_by else list(win.A1)
            row = ({"ID": gv} if group_by else {}) | _aggs(vals) | {"windowEnd": e, "inputTS": ts[closing]}
            exp.append({k: v for k, v in row.items() if k != "median" or kind is TimeWindowAggregation})
    _assert_frames_close(pd.DataFrame(exp), got)


def test_stdev_exact_for_close_values():
    # Prefix sums would lose these: two values 1e-7 apart in a window after large ones.
    df = pd.DataFrame({"ID": np.ones(5, np.int32), "A1": [99.0, 98.0, 97.0, 50.0, 50.0000001],
                       "TS": np.arange(5, dtype=np.int64)})
    q = CountWindowAggregation("q", "S1", 2, 1, (Aggregate("STDEV", "A1", "sd"),), ())
    sd = expected_for_query(q, merge_order({"S1": df}), None)["sd"].to_numpy()
    assert sd[-1] == pytest.approx(0.5e-7, rel=1e-6)
    assert sd[:3].tolist() == [0.5, 0.5, 23.5]


@pytest.mark.parametrize("policy, expected", [
    ("all-all", [("A1", "B1"), ("A2", "B1"), ("A1", "B2"), ("A2", "B2"), ("A3", "B2")]),
    ("all-one", [("A1", "B1"), ("A1", "B2")]),
    ("one-all", [("A1", "B1"), ("A2", "B1"), ("A3", "B2")]),
    ("one-one", [("A1", "B1"), ("A2", "B2")]),
])
def test_consumption_policies_of_section_4_2_2(policy, expected):
    # A1 A2 B1 A3 B2: A events have A1 < 50, B events A1 >= 50; one key, a wide window.
    seq = [("A1", 10.0), ("A2", 11.0), ("B1", 60.0), ("A3", 12.0), ("B2", 61.0)]
    df = pd.DataFrame({"ID": [1] * 5, "A1": [v for _, v in seq], "TS": np.arange(5, dtype=np.int64)})
    q = Pattern("p", PatternEvent("a", "S1", (Comparison("A1", "lt", 50),)),
                PatternEvent("b", "S1", (Comparison("A1", "ge", 50),)), 1000, policy, ("a.A1", "b.A1"))
    out = expected_for_query(q, merge_order({"S1": df}), None)
    name = {v: n for n, v in seq}
    assert [(name[a], name[b]) for a, b in zip(out.a_A1, out.b_A1)] == expected
    assert out.inputTS.tolist() == [2 if b == "B1" else 4 for _, b in expected]


def test_q7_key_window_and_no_self_match():
    # SEQ(S1 a1, S1 a2) WHERE a1.ID = a2.ID AND a2.A1 > 90 WITHIN 100 ms.
    rows = [(1, 10.0, 0), (2, 95.0, 10), (1, 95.0, 50), (1, 96.0, 100), (1, 97.0, 200)]
    df = pd.DataFrame(rows, columns=["ID", "A1", "TS"])
    q = Pattern("q7", PatternEvent("a1", "S1"), PatternEvent("a2", "S1", (Comparison("A1", "gt", 90),)),
                100, "all-all", ("a1.TS", "a2.TS"))
    out = expected_for_query(q, merge_order({"S1": df}), None)
    # ID 2 has one event (no self-match); TS 0 -> 50 is in [0, 100); 0 -> 100 is not; 50 -> 100 is;
    # 100 -> 200 is not (200 >= 100 + 100).
    assert list(zip(out.a1_TS, out.a2_TS)) == [(0, 50), (50, 100)]


def test_window_join_by_hand():
    # rows = 2. Merged order: L1(k1) R1(k1) R2(k2) R3(k1) L2(k1) R4(k1) L3(k2)
    left = pd.DataFrame({"ID": [1, 1, 2], "A1": [1.0, 2.0, 3.0], "TS": [0, 40, 60]})
    right = pd.DataFrame({"ID": [1, 2, 1, 1], "A1": [10.0, 20.0, 30.0, 40.0], "TS": [10, 20, 30, 50]})
    q = WindowJoin("j", "S1", "S2", 2, "ID", "ID", ("S1.A1", "S2.A1"))
    out = expected_for_query(q, merge_order({"S1": left, "S2": right}), None)
    # R1 finds L1; R3 finds L1 (L window: L1); L2 finds R3 (R window: R2, R3; R1 left it);
    # R4 finds L1 and L2 (L window: L1, L2); L3 finds nothing (R window: R3, R4, no key 2).
    assert list(zip(out.S1_A1, out.S2_A1, out.inputTS)) == [
        (1.0, 10.0, 10), (1.0, 30.0, 30), (2.0, 30.0, 40), (1.0, 40.0, 50), (2.0, 40.0, 50)]


def test_table_join_and_filter_by_hand():
    stream = pd.DataFrame({"ID": [3, 9, 1], "A1": [5.0, 6.0, 70.0], "TS": [1, 2, 3]})
    table = pd.DataFrame({"ID": [1, 2, 3], "T1": [0.5, 0.25, 0.125]})
    streams = merge_order({"S1": stream})
    q = TableJoin("t", "S1", "T", "memory", "ID", "ID", ("S1.ID", "T.T1"), (Comparison("S1.A1", "lt", 50),))
    out = expected_for_query(q, streams, table)
    assert list(zip(out.S1_ID, out.T_T1, out.inputTS)) == [(3, 0.125, 1)]
    f = Filter("f", "S1", ("ID", "A1"), (Comparison("ID", "le", 3),))
    assert expected_for_query(f, streams, None).values.tolist() == [[3, 5.0, 1], [1, 70.0, 3]]
    with pytest.raises(CepkitError, match="no join table"):
        expected_for_query(q, streams, None)


SUITES = sorted(p.stem for p in (specs_dir() / "suites").glob("*-quick.xml"))


@pytest.mark.parametrize("suite", SUITES)
def test_every_quick_suite_query_has_a_reference(suite, tmp_path):
    spec = read_suite(specs_dir() / "suites" / f"{suite}.xml")
    checked = produced = 0
    for i, w in enumerate(spec.workloads[:3]):
        cfg = load_config(settings=w.micro_settings()).micro
        data = tmp_path / f"w{i}"
        generate_micro(cfg, data)
        answers = expected_for_dataset(w.query_set, data)
        assert set(answers) == {q.id for q in w.query_set.queries}
        for q in w.query_set.queries:
            assert list(answers[q.id].columns) == list(output_schema(q).names), q.id
            checked += 1
            produced += len(answers[q.id])
    assert checked > 0 and produced > 0
