"""Cores run on the driver, once per micro-batch (run.work = "driver", opt-in: every stateful query).

The kit's Python cores in one process on Spark's driver, whatever the cluster (specs/TRANSLATION.md,
"Plan families"): never the plan behind a published engine figure. The core runs over the events
the batch already brings to the driver: the plan passes the
events these queries read through to the collect (stream `INPUT_STREAM`, columns prefixed
`INPUT_PREFIX`), and `DriverCores` turns them into the queries' rows before the sink sees the batch.

State and replay. The cores' states after batch b are pickled (state_codec) to
`<checkpoint>/driver-cores/<b>.state`, written to a temporary file and renamed, before the batch's
rows go to the sink; Spark commits batch b only after that. Batch b starts from the newest file of
a batch before b, so a batch that Spark runs again after a crash (same id, same offsets) computes
the same rows from the same state. The last `KEEP` files are kept.

A chunked pattern core's candidates (runtime_common/micro_cores/pattern_chunks.py) are not in the
state file: pickled whole, Q7's 60 s window at 100 K ev/s is ~300 MB written every batch. Each
chunk, which never changes once made, is written once to `driver-cores/chunks/<query>-<id>.chunk`
(temporary file, then rename) and the state file names the chunk ids; a chunk file is removed once
no kept state file names it. A retried batch remakes its chunks under the same ids from the same
events, so rewriting one gives the same bytes.
"""

from __future__ import annotations

import os
import re
import tempfile
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from runtime_common.micro_cores import core_for, state_codec
from runtime_common.micro_cores.pattern_chunks import ChunkedPatternCore
from runtime_common.micro_rows import output_rows, routed

INPUT_STREAM = "__driver_cores_input__"
INPUT_PREFIX = "_in_"
KEEP = 3
_STATE_FILE = re.compile(r"^(\d+)\.state$")
CHUNKS = "chunks"


class DriverCores:
    """The foreachBatch stage of the driver-run cores: `(batch_id, table) -> table` where the input
    table holds the batch's output rows plus the pass-through events, and the result the output
    rows plus the cores' rows (with the copies of identical queries), in `out_columns`."""

    def __init__(self, queries, copies: dict[str, list[str]], out_columns, input_columns):
        self.queries = {q["id"]: q for q in queries}
        self.copies = {rep: list(ids) for rep, ids in copies.items()}
        self.out_columns = list(out_columns)
        self.input_columns = list(input_columns)
        self.cores = {qid: core_for(q) for qid, q in self.queries.items()}
        # Chunked cores by query, with the number that names their chunk files (a query id is the
        # suite's text; a number is a safe file name).
        self.chunked = {qid: i for i, (qid, core) in enumerate(self.cores.items())
                        if isinstance(core, ChunkedPatternCore)}
        self.directory: str | None = None
        self._chunk_sizes: dict[str, int] = {}      # chunk file name -> bytes, for the files on disk
        self._refs: dict[int, set[str]] = {}       # kept batch -> the chunk files its state names
        self._states: dict | None = None      # after batch `_batch`, in memory
        self._batch: int | None = None
        # The last batch's state as Spark reports a stateful operator's (stdout `batch` lines):
        # its stored size and the time to write it.
        self.state_figures: dict = {}

    def open(self, checkpoint: str) -> None:
        """Keep the states under the query's checkpoint (a local directory or a file:// URL)."""
        path = checkpoint[len("file://"):] if checkpoint.startswith("file://") else checkpoint
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path):
            raise RuntimeError(f"cores run on the driver keep their state on the driver's file system; "
                               f"checkpoint {checkpoint} is not a local path (run.work = \"driver\" keeps the cores "
                               f"there; use another run.work, e.g. \"engine\")")
        self.directory = os.path.join(path, "driver-cores")
        os.makedirs(self.directory, exist_ok=True)
        if self.chunked:
            os.makedirs(self._chunk_dir(), exist_ok=True)
            self._chunk_sizes = {e.name: e.stat().st_size for e in os.scandir(self._chunk_dir())
                                 if e.name.endswith(".chunk")}
            for b in self._saved():
                with open(self._state_file(b), "rb") as f:
                    self._refs[b] = self._names(state_codec.loads(f.read()))

    def __call__(self, batch_id: int, table: pa.Table) -> pa.Table:
        if self.directory is None:
            raise RuntimeError("DriverCores.open(checkpoint) was not called")
        stream = table.column("stream")
        is_input = pc.equal(stream, INPUT_STREAM)
        rows = table.filter(pc.invert(is_input)).select(self.out_columns)
        events = table.filter(is_input).select([INPUT_PREFIX + c for c in self.input_columns])
        # A shuffle-free plan keeps the source's order, but the cores' contract is offset order.
        events = events.rename_columns(self.input_columns).to_pandas().sort_values("offset", kind="stable",
                                                                                   ignore_index=True)
        states = self._states_before(batch_id)
        self._batch = None      # the cores change the states in place: a retry must read the file
        frames = [self._rows(qid, states[qid], events) for qid in self.queries]
        self._save(batch_id, states)
        frames = [f for f in frames if len(f)]
        if not frames:
            return rows
        computed = pa.Table.from_pandas(pd.concat(frames, ignore_index=True)[self.out_columns],
                                        schema=rows.schema, preserve_index=False)
        return pa.concat_tables([rows, computed])

    def _rows(self, qid: str, state: dict, events: pd.DataFrame) -> pd.DataFrame:
        q, core = self.queries[qid], self.cores[qid]
        mine = events[routed(q, events)].reset_index(drop=True)
        out = core.process(state, mine)
        if not len(out):
            return pd.DataFrame(columns=self.out_columns)
        frame = output_rows(q, out, mine, self.out_columns)
        ids = self.copies.get(qid, [qid])
        frame = frame.loc[np.tile(np.arange(len(frame)), len(ids))].reset_index(drop=True)
        frame["stream"] = np.repeat(np.array(ids, dtype=object), len(out))
        return frame[self.out_columns]

    def _states_before(self, batch_id: int) -> dict:
        if self._batch is not None and self._batch == batch_id - 1:
            return self._states
        earlier = sorted(b for b in self._saved() if b < batch_id)
        if not earlier:
            return {qid: core.initial_state() for qid, core in self.cores.items()}
        with open(self._state_file(earlier[-1]), "rb") as f:
            stored = state_codec.loads(f.read())
        for qid, i in self.chunked.items():
            state = stored[qid]
            chunks = []
            for cid in state.pop("chunk_ids"):
                path = os.path.join(self._chunk_dir(), self._chunk_name(i, cid))
                if not os.path.exists(path):
                    raise RuntimeError(f"driver-run cores: {self._state_file(earlier[-1])} names chunk "
                                       f"{path}, which is missing")
                with open(path, "rb") as f:
                    chunks.append(state_codec.loads(f.read()))
            state["chunks"] = chunks
        return stored

    def _save(self, batch_id: int, states: dict) -> None:
        t0 = time.perf_counter()
        stored = dict(states)
        for qid, i in self.chunked.items():
            state = states[qid]
            for chunk in state["chunks"]:
                name = self._chunk_name(i, chunk["id"])
                if name not in self._chunk_sizes:
                    self._chunk_sizes[name] = _write_atomically(self._chunk_dir(), name, state_codec.dumps(chunk))
            stored[qid] = {**{k: v for k, v in state.items() if k != "chunks"},
                           "chunk_ids": [c["id"] for c in state["chunks"]]}
        blob = state_codec.dumps(stored)
        _write_atomically(self.directory, f"{batch_id}.state", blob)
        self._states, self._batch = states, batch_id
        if self.chunked:
            self._refs[batch_id] = self._names(stored)
        for old in sorted(self._saved())[:-KEEP]:
            os.remove(self._state_file(old))
            self._refs.pop(old, None)
        if self.chunked:
            named = set().union(*self._refs.values())
            for name in [n for n in self._chunk_sizes if n not in named]:
                os.remove(os.path.join(self._chunk_dir(), name))
                del self._chunk_sizes[name]
        live = sum(self._chunk_sizes[n] for n in self._refs.get(batch_id, ()))
        self.state_figures = {"operatorName": "driverCores", "memoryUsedBytes": len(blob) + live,
                              "commitTimeMs": round((time.perf_counter() - t0) * 1000)}

    def _names(self, stored: dict) -> set[str]:
        """The chunk files a stored state (chunks as ids) names."""
        return {self._chunk_name(i, cid) for qid, i in self.chunked.items() for cid in stored[qid]["chunk_ids"]}

    def _chunk_dir(self) -> str:
        return os.path.join(self.directory, CHUNKS)

    @staticmethod
    def _chunk_name(query_number: int, chunk_id: int) -> str:
        return f"{query_number}-{chunk_id}.chunk"

    def _state_file(self, batch_id: int) -> str:
        return os.path.join(self.directory, f"{batch_id}.state")

    def _saved(self) -> list[int]:
        return [int(m.group(1)) for m in map(_STATE_FILE.match, os.listdir(self.directory)) if m]


def _write_atomically(directory: str, name: str, blob: bytes) -> int:
    """Write `blob` to directory/name through a temporary file and a rename; its size."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return len(blob)
