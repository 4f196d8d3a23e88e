"""The window-join and pattern cores (spark_runtime/micro_cores/) give the reference
answers (validator/micro_joins.py, validator/micro_patterns.py) under every batching of the input,
with their state JSON round-tripped between micro-batches."""

from __future__ import annotations

import functools
import json

import numpy as np
import pandas as pd
import pytest

from kit.workload import Comparison, Pattern, PatternEvent, WindowJoin, output_schema
from spark_runtime.micro_cores import PatternCore as PAT
from spark_runtime.micro_cores import WindowJoinCore as WJ
from translators.micro_literal import query_literal
from validator.compare import compare_stream
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

BATCHINGS = ("one", "seven", "random", "all")
DTYPES = {"int": "int64", "long": "int64", "double": "float64"}


def _stream(seed, n, ids, span_ms, share_ts=None):
    rng = np.random.default_rng(seed)
    ts = rng.integers(0, span_ms, n)
    if share_ts is not None:                  # half of the timestamps also occur in another stream
        ts[: n // 2] = rng.choice(share_ts, n // 2)
    return pd.DataFrame({"ID": rng.integers(1, ids + 1, n).astype(np.int32), "A1": rng.uniform(1, 100, n),
                         "A2": rng.uniform(1, 100, n), "TS": np.sort(ts).astype(np.int64)})


@functools.lru_cache(maxsize=None)
def _inputs(ids, seed=1):
    """Streams S1, S2 (with `_pos`) and the merged events; shared by the tests, never modified."""
    s1 = _stream(seed, 100, ids, 2000)
    streams = merge_order({"S1": s1, "S2": _stream(seed + 1, 90, ids, 2000, s1["TS"].to_numpy())})
    return streams, _events(streams)


def _events(streams):
    """What a generated program hands a core: merged by offset, with `stream` and `ingestTS`."""
    ev = pd.concat([df.assign(stream=name) for name, df in streams.items()], ignore_index=True)
    ev = ev.rename(columns={"_pos": "offset"}).sort_values("offset", kind="stable").reset_index(drop=True)
    ev["ingestTS"] = ev["TS"] + 3
    return ev


def _bounds(n, how, seed=0):
    if how == "all":
        return [(0, n)]
    if how in ("one", "seven"):
        step = 1 if how == "one" else 7
        return [(a, min(a + step, n)) for a in range(0, n, step)]
    rng, out, a = np.random.default_rng(seed), [], 0
    while a < n:                              # sizes 0..40: empty batches included
        b = min(n, a + int(rng.integers(0, 41)))
        out.append((a, b))
        a = b
    return out


def _run(core_cls, q, events, how):
    core = core_cls(q)
    state = json.loads(json.dumps(core.initial_state()))
    rows = []
    for a, b in _bounds(len(events), how):
        rows += core.process(state, events.iloc[a:b])
        state = json.loads(json.dumps(state))
    got = pd.DataFrame(rows, columns=q["fields"])
    return got.astype({f: DTYPES[t] for f, t in zip(q["fields"], q["types"])}), state


def _live(index):
    """Live entries of a core's key -> [gone, entries...] index, checking that it holds no dead
    weight: no key without live entries, and a departed prefix cut once it outgrows them."""
    live = [len(lst) - 1 - lst[0] for lst in index.values()]
    assert all(n > 0 and lst[0] <= max(32, n) for n, lst in zip(live, index.values()))
    return sum(live)


def _check(query, inputs, core_cls, how):
    exp = expected_for_query(query, inputs[0], None)
    got, state = _run(core_cls, query_literal(query), inputs[1], how)
    res = compare_stream(exp, got, output_schema(query))
    assert (res.missing, res.undue, res.wrong) == (0, 0, 0), res.incorrect.head(10).to_string()
    assert len(got) == len(exp)
    # Also the reference's row order and inputTS, which compare_stream does not look at.
    pd.testing.assert_frame_equal(got, exp, check_dtype=False)
    assert len(exp) > 0                       # every case below is chosen to produce rows
    return state


# ---- window join ----

WJ_WHERE = (Comparison("S1.A1", "gt", 30), Comparison("S2.A2", "le", 70))
WJ_SELECT = ("S2.A2", "S1.ID", "S1.A1", "S2.TS", "S1.TS", "S2.ID")


@pytest.mark.parametrize("how", BATCHINGS)
@pytest.mark.parametrize("ids", [3, 20])
@pytest.mark.parametrize("where", [(), WJ_WHERE], ids=["nowhere", "where"])
@pytest.mark.parametrize("rows", [4, 1000])
def test_window_join_matches_reference(rows, where, ids, how):
    streams = _inputs(ids)[0]
    state = _check(WindowJoin("j", "S1", "S2", rows, "ID", "ID", WJ_SELECT, where), _inputs(ids), WJ, how)
    for side, name in (("0", "S1"), ("1", "S2")):
        assert len(state[side]["ring"]) == min(rows, len(streams[name]))
        assert _live(state[side]["idx"]) <= min(rows, len(streams[name]))


@pytest.mark.parametrize("how", ["one", "random"])
@pytest.mark.parametrize("rows", [5, 50])
def test_window_join_single_key(rows, how):
    # One key: its entry lists never empty, so departed entries pile up until compacted.
    state = _check(WindowJoin("j", "S1", "S2", rows, "ID", "ID", WJ_SELECT), _inputs(1), WJ, how)
    assert [_live(state[side]["idx"]) for side in "01"] == [rows, rows]


@pytest.mark.parametrize("how", ["one", "random"])
def test_window_join_right_stream_first_in_order(how):
    # Left is S2: the trigger side and the select order differ from the stream order.
    q = WindowJoin("j", "S2", "S1", 9, "ID", "ID", ("S1.A2", "S2.A1", "S1.TS"), (Comparison("S1.ID", "ne", 2),))
    _check(q, _inputs(4, seed=7), WJ, how)


def test_window_join_rejects_self_join():
    q = query_literal(WindowJoin("j", "S1", "S2", 5, "ID", "ID", ("S1.ID",)))
    q["right"] = "S1"
    with pytest.raises(ValueError, match="two different streams"):
        WJ(q)


# ---- pattern ----

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
             for policy in ("all-all", "all-one", "one-all", "one-one") for key in ("ID", None)
             for layout in LAYOUTS for within in (60, 10**6)
             for how in ("random", "all", "one" if (key is None) == (within == 60) else "seven")]


@pytest.mark.parametrize("policy, key, layout, within, how", PAT_CASES)
def test_pattern_matches_reference(policy, key, layout, within, how):
    first, second = LAYOUTS[layout]
    q = Pattern("p", first, second, within, policy, PAT_SELECT, key)
    state = _check(q, _inputs(4), PAT, how)
    _live(state["cands"])
    if within == 60:                          # swept: only candidates of the last ~2 windows remain
        last = int(_inputs(4)[1]["TS"].max())
        assert all(c[0] > last - 2 * within for lst in state["cands"].values() for c in lst[1 + lst[0]:])


def test_pattern_select_from_one_alias_only():
    q = Pattern("p", PatternEvent("a1", "S1"), PatternEvent("a2", "S2"), 200, "one-one", ("a2.ID",), "ID")
    _check(q, _inputs(5, seed=11), PAT, "random")


THESIS = [("A1", 10.0), ("A2", 11.0), ("B1", 60.0), ("A3", 12.0), ("B2", 61.0)]


def _thesis_rows(core_cls, policy, how):
    df = pd.DataFrame({"ID": np.ones(5, np.int32), "A1": [v for _, v in THESIS], "TS": np.arange(5, dtype=np.int64)})
    query = Pattern("p", PatternEvent("a", "S1", (Comparison("A1", "lt", 50),)),
                    PatternEvent("b", "S1", (Comparison("A1", "ge", 50),)), 1000, policy, ("a.A1", "b.A1"), None)
    got, _ = _run(core_cls, query_literal(query), _events(merge_order({"S1": df})), how)
    name = {v: n for n, v in THESIS}
    return [(name[a], name[b], ts) for a, b, ts in zip(got.a_A1, got.b_A1, got.inputTS)]


@pytest.mark.parametrize("how", ["one", "all"])
@pytest.mark.parametrize("policy, expected", [
    ("all-all", [("A1", "B1"), ("A2", "B1"), ("A1", "B2"), ("A2", "B2"), ("A3", "B2")]),
    ("all-one", [("A1", "B1"), ("A1", "B2")]),
    ("one-all", [("A1", "B1"), ("A2", "B1"), ("A3", "B2")]),
    ("one-one", [("A1", "B1"), ("A2", "B2")]),
])
def test_pattern_thesis_example_section_8(policy, expected, how):
    # A1 A2 B1 A3 B2 at TS 0..4; B1 (TS 2) and B2 (TS 4) trigger.
    assert _thesis_rows(PAT, policy, how) == [(a, b, 2 if b == "B1" else 4) for a, b in expected]
