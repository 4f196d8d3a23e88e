"""A chunked pattern core's state in Spark's state store, written a batch's worth at a time.

`ChunkedPatternCore` (runtime_common/micro_cores/pattern_chunks.py) keeps its candidates in chunks
that never change once made. Stored as one value (as every other core's state is), the whole
window would cross from the JVM to the Python worker and back in every batch: at Q7's thesis
parameters (60 s window) that is 60 batches' candidates per batch. Here a group's state is

- `meta` (value state): the core's counters, the ids of its live chunks in order, and a token
  drawn afresh at every write;
- `chunks` (map state): chunk id -> the chunk, written once when it is made and removed when the
  core drops it.

The Python worker keeps the state it last wrote per group in memory (`_CACHE`) with that token:
when the stored token is the same, the state store holds exactly what the worker has (the batch
that wrote it committed, and nothing wrote since), so the next batch reads only `meta`. Otherwise
(a first batch in this worker, another worker ran the group, a batch was retried after a failure)
the chunks are read back from the store. A retried batch never sees its failed attempt's state:
that attempt's token was not committed.
"""

from __future__ import annotations

import uuid

from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from runtime_common.micro_cores import state_codec

BLOB = StructType([StructField("blob", BinaryType())])
CHUNK_ID = StructType([StructField("id", LongType())])
_COUNTERS = ("next", "serial", "last_ts")
# (group key) -> (token, state): what this worker wrote last for the group.
_CACHE: dict[tuple, tuple[str, dict]] = {}


class ChunkedState:
    """Load and store a chunked core's state through a processor's handle (one per processor)."""

    def __init__(self, handle):
        self.meta = handle.getValueState("chunk_meta", BLOB)
        self.chunks = handle.getMapState("chunks", CHUNK_ID, BLOB)

    def load(self, group: tuple, core) -> dict:
        if not self.meta.exists():
            return core.initial_state()
        meta = state_codec.loads(self.meta.get()[0])
        # Taken out while the batch works on it (the core changes it in place): a batch that fails
        # before `store` leaves no entry, so its retry reads the store.
        cached = _CACHE.pop(group, None)
        if cached is not None and cached[0] == meta["token"]:
            return cached[1]
        chunks = []
        for cid in meta["ids"]:
            value = self.chunks.getValue((cid,))
            if value is None:
                raise RuntimeError(f"pattern state of {group}: chunk {cid} is missing from the state store")
            chunks.append(state_codec.loads(value[0]))
        state = {k: meta[k] for k in _COUNTERS}
        state["chunks"] = chunks
        return state

    def store(self, group: tuple, state: dict, before: set[int]) -> None:
        """Write the chunks made since `before` (the ids the state had when loaded), remove the
        dropped ones, then the meta with a fresh token."""
        ids = [c["id"] for c in state["chunks"]]
        for chunk in state["chunks"]:
            if chunk["id"] not in before:
                self.chunks.updateValue((chunk["id"],), (state_codec.dumps(chunk),))
        for cid in before.difference(ids):
            self.chunks.removeKey((cid,))
        token = uuid.uuid4().hex
        meta = {**{k: state[k] for k in _COUNTERS}, "ids": ids, "token": token}
        self.meta.update((state_codec.dumps(meta),))
        _CACHE[group] = (token, state)
