"""Cores run on the driver, once per micro-batch (run.cores = "by-kind": the whole-stream queries; "driver": all).

A count window, a time window without a key and a window join are each one sequence over their
whole input (specs/TRANSLATION.md): in the stateful operator they are one group, so one task, and
every event pays for a shuffle, two Arrow crossings into a Python worker and a state-store commit
(about 6 µs per event and 170 ms per batch, measured) for a core that costs 0.25 µs per event. On
the driver the same core runs over the events the batch already brings there: the plan passes the
events these queries read through to the collect (stream `INPUT_STREAM`, columns prefixed
`INPUT_PREFIX`), and `DriverCores` turns them into the queries' rows before the sink sees the batch.

State and replay. The cores' states after batch b are pickled (state_codec) to
`<checkpoint>/driver-cores/<b>.state`, written to a temporary file and renamed, before the batch's
rows go to the sink; Spark commits batch b only after that. Batch b starts from the newest file of
a batch before b, so a batch that Spark runs again after a crash (same id, same offsets) computes
the same rows from the same state. The last `KEEP` files are kept.
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
from runtime_common.micro_rows import output_rows, routed

INPUT_STREAM = "__driver_cores_input__"
INPUT_PREFIX = "_in_"
KEEP = 3
_STATE_FILE = re.compile(r"^(\d+)\.state$")


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
        self.directory: str | None = None
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
                               f"checkpoint {checkpoint} is not a local path (use run.cores = \"operator\")")
        self.directory = os.path.join(path, "driver-cores")
        os.makedirs(self.directory, exist_ok=True)

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
        with open(os.path.join(self.directory, f"{earlier[-1]}.state"), "rb") as f:
            return state_codec.loads(f.read())

    def _save(self, batch_id: int, states: dict) -> None:
        t0 = time.perf_counter()
        blob = state_codec.dumps(states)
        fd, tmp = tempfile.mkstemp(prefix=f".{batch_id}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, os.path.join(self.directory, f"{batch_id}.state"))
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        self._states, self._batch = states, batch_id
        self.state_figures = {"operatorName": "driverCores", "memoryUsedBytes": len(blob),
                              "commitTimeMs": round((time.perf_counter() - t0) * 1000)}
        for old in sorted(self._saved())[:-KEEP]:
            os.remove(os.path.join(self.directory, f"{old}.state"))

    def _saved(self) -> list[int]:
        return [int(m.group(1)) for m in map(_STATE_FILE.match, os.listdir(self.directory)) if m]
