"""A chunked pattern core's state through the stateful processor's handle (spark_runtime/chunk_state.py):
only new chunks are written and dropped ones removed; the worker's copy is used only while the
store holds exactly what it wrote (same token), and a batch that failed between reading and
writing leaves nothing behind that its retry could take for the stored state. The handle here is
an in-memory one with the calls the processor makes (Spark's own is exercised by the micro e2e
tests: keyed Q7 runs in the operator)."""

from __future__ import annotations

import pandas as pd
import pytest

from kit.workload import Pattern
from runtime_common.micro_cores import ChunkedPatternCore
from spark_runtime import chunk_state
from spark_runtime.chunk_state import ChunkedState
from tests.runtime_common.test_core_pattern import LAYOUTS, PAT_SELECT
from tests.spark_runtime.two_streams import inputs as _inputs
from translators.micro_literal import query_literal


class _Value:
    def __init__(self):
        self.value = None

    def exists(self):
        return self.value is not None

    def get(self):
        return self.value

    def update(self, v):
        self.value = tuple(v)


class _Map:
    def __init__(self):
        self.values, self.reads = {}, 0

    def getValue(self, key):
        self.reads += 1
        return self.values.get(tuple(key))

    def updateValue(self, key, value):
        self.values[tuple(key)] = tuple(value)

    def removeKey(self, key):
        del self.values[tuple(key)]


class _Handle:
    def __init__(self):
        self.states = {}

    def getValueState(self, name, schema):
        return self.states.setdefault(name, _Value())

    def getMapState(self, name, key_schema, value_schema):
        return self.states.setdefault(name, _Map())


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.setattr(chunk_state, "_CACHE", {})


def _batches():
    events = _inputs(4)[1]
    return [events.iloc[a:a + 20].reset_index(drop=True) for a in range(0, len(events), 20)]


def _core():
    first, second = LAYOUTS["same"]
    return ChunkedPatternCore(query_literal(Pattern("p", first, second, 300, "all-all", PAT_SELECT, "ID")))


def _step(store, core, group, events):
    state = store.load(group, core)
    before = {c["id"] for c in state["chunks"]}
    out = core.process(state, events)
    store.store(group, state, before)
    return out, state


def test_only_new_chunks_are_written_and_the_workers_copy_is_reused():
    handle, core, group = _Handle(), _core(), ("p", 0)
    store = ChunkedState(handle)
    chunks = handle.states["chunks"]
    rows = []
    for events in _batches():
        out, state = _step(store, core, group, events)
        rows.append(out)
        # The store holds exactly the live chunks, and nothing was read back: the copy was current.
        assert set(chunks.values) == {(c["id"],) for c in state["chunks"]}
        assert chunks.reads == 0
    # A core run in one piece gives the same rows.
    whole, _ = _step(ChunkedState(_Handle()), _core(), group, pd.concat(_batches(), ignore_index=True))
    assert len(whole) > 0
    pd.testing.assert_frame_equal(pd.concat(rows, ignore_index=True), whole)


def test_a_failed_batch_or_another_worker_reads_the_store():
    handle, core, group = _Handle(), _core(), ("p", 1)
    store = ChunkedState(handle)
    batches = _batches()
    reference = ChunkedState(_Handle())
    expected = [_step(reference, core, group + ("ref",), b)[0] for b in batches]
    _step(store, core, group, batches[0])
    # A batch that fails after the core changed the state but before it was stored.
    state = store.load(group, core)
    core.process(state, batches[1])
    reads = handle.states["chunks"].reads
    out, _ = _step(store, core, group, batches[1])          # its retry
    assert handle.states["chunks"].reads > reads             # read back from the store
    pd.testing.assert_frame_equal(out, expected[1])
    # Another worker (an empty cache) ran the next batch: this one's copy is stale by its token.
    other = dict(chunk_state._CACHE)
    chunk_state._CACHE.clear()
    _step(store, core, group, batches[2])
    chunk_state._CACHE.update(other)
    reads = handle.states["chunks"].reads
    out, _ = _step(store, core, group, batches[3])
    assert handle.states["chunks"].reads > reads
    pd.testing.assert_frame_equal(out, expected[3])


def test_a_missing_chunk_is_an_error_not_an_empty_window():
    handle, core, group = _Handle(), _core(), ("p", 2)
    store = ChunkedState(handle)
    _step(store, core, group, _batches()[0])
    chunk_state._CACHE.clear()
    handle.states["chunks"].values.clear()
    with pytest.raises(RuntimeError, match="missing from the state store"):
        store.load(group, core)
