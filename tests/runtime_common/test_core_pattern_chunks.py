"""The chunked pattern core (runtime_common/micro_cores/pattern_chunks.py) gives the reference
answers (validator/micro_patterns.py), in the reference order, for keyed patterns with ALL on the
first element, under every batching, with its state stored and read back between batches and its
chunks merged when they outnumber their cap; and `core_for` picks it for exactly those patterns."""

from __future__ import annotations

import numpy as np
import pytest

from kit.workload import Pattern
from runtime_common.micro_cores import ChunkedPatternCore, PatternCore, core_for
from runtime_common.micro_cores import pattern_chunks
from tests.runtime_common.test_core_pattern import LAYOUTS, PAT_SELECT
from tests.runtime_common.test_core_pattern import _run as run_core
from tests.spark_runtime.two_streams import BATCHINGS, assert_reference_rows
from tests.spark_runtime.two_streams import inputs as _inputs
from translators.micro_literal import query_literal


def _run(q, events, how, seed=0):
    return run_core(ChunkedPatternCore, q, events, how, seed, check_state=_check_state)


def _check_state(state, seen, within):
    """The chunks are contiguous in position order, their ids distinct, none wholly expired at the
    latest event seen, at most MAX_CHUNKS of them, and they hold no more candidates than the
    events seen since the oldest one's first."""
    chunks = state["chunks"]
    assert len(chunks) <= pattern_chunks.MAX_CHUNKS
    assert len({c["id"] for c in chunks}) == len(chunks)
    for c, d in zip(chunks, chunks[1:]):
        assert d["pos0"] == c["pos0"] + c["n"]
    if chunks:
        assert chunks[-1]["pos0"] + chunks[-1]["n"] == state["next"]
        assert chunks[0]["ts_max"] > int(seen["TS"].max()) - within
        for c in chunks:
            assert c["n"] == len(c["ts"]) == len(c["sk"]) == len(c["comp"]) and np.all(np.diff(c["ts"]) >= 0)


POLICIES = ("all-all", "all-one")
CASES = [(policy, layout, within, how) for policy in POLICIES for layout in LAYOUTS for within in (60, 10**6)
         for how in ("random", "all", "one" if within == 60 else "seven")]


@pytest.mark.parametrize("policy, layout, within, how", CASES)
def test_chunked_pattern_matches_reference(policy, layout, within, how):
    first, second = LAYOUTS[layout]
    q = Pattern("p", first, second, within, policy, PAT_SELECT, "ID")
    got, _ = _run(query_literal(q), _inputs(4)[1], how)
    assert_reference_rows(q, _inputs(4)[0], got)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("ids", [1, 4, 50])
@pytest.mark.parametrize("policy", POLICIES)
def test_chunked_pattern_random_inputs(policy, ids, seed):
    inputs = _inputs(ids, seed=100 + seed, n=120, span_ms=300)
    first, second = LAYOUTS[("same", "cross", "back")[seed]]
    for within in (1, 25, 10**5):
        q = Pattern("p", first, second, within, policy, PAT_SELECT, "ID")
        for how in BATCHINGS if within == 25 else BATCHINGS[1:]:
            got, _ = _run(query_literal(q), inputs[1], how, seed=seed * 7 + within)
            assert_reference_rows(q, inputs[0], got, within > 1)


@pytest.mark.parametrize("policy", POLICIES)
def test_merged_chunks_give_the_same_rows(policy, monkeypatch):
    """One-event batches over a long window make a chunk per event; with the cap at 3 they are
    merged all the time (two adjacent ones of fewest candidates into a new chunk)."""
    monkeypatch.setattr(pattern_chunks, "MAX_CHUNKS", 3)
    first, second = LAYOUTS["same"]
    q = Pattern("p", first, second, 10**6, policy, PAT_SELECT, "ID")
    got, state = _run(query_literal(q), _inputs(4)[1], "one")
    assert_reference_rows(q, _inputs(4)[0], got)
    assert len(state["chunks"]) == 3 and state["serial"] > state["next"]       # merges made new chunks


def test_core_for_picks_the_chunked_core_for_keyed_patterns_that_never_consume():
    first, second = LAYOUTS["same"]
    for policy, key, cls in (("all-all", "ID", ChunkedPatternCore), ("all-one", "ID", ChunkedPatternCore),
                             ("one-all", "ID", PatternCore), ("one-one", "ID", PatternCore),
                             ("all-all", None, PatternCore)):
        core = core_for(query_literal(Pattern("p", first, second, 60, policy, PAT_SELECT, key)))
        assert type(core) is cls, (policy, key)
    with pytest.raises(ValueError, match="needs a key"):
        ChunkedPatternCore(query_literal(Pattern("p", first, second, 60, "all-all", PAT_SELECT, None)))
