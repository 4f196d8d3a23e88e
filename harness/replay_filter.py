"""The sink's filter for answers a restored engine sends again (specs/ENGINE_RUN.md, "Supervision").

A Flink job restored from a checkpoint (after its program was restarted, or by Flink itself after
losing a TaskManager) processes again every event after that checkpoint and so sends again the
answers it had already sent for them. Flink's emitters cannot tie their sends to checkpoints (a
Python function hears of none), so the sink does: every emit carries the sender's *epoch* (the
program attempt and Flink's task attempt), and when a stream's rows start coming from a new epoch,
each new row that equals a row an earlier epoch sent since the restored checkpoint was triggered
is dropped, once per earlier row (a multiset difference: two equal answers sent twice are both
dropped once).

Rows are compared on their *identity columns*: every column but floating-point ones (a restored
job may sum partial aggregates in another grouping, which changes the last bits of a double, never
an integer, string or timestamp) and the sink's own stamps. The rows kept for comparison are those
sent since the newest completed checkpoint's trigger the harness knows of (`checkpoint_completed`):
that is never later than the checkpoint a restore uses (a harness restart uses the newest it knows;
Flink's own restore the newest completed, which is at least as new), so every replayed row finds
its original. Older rows are forgotten, so memory is bounded by one checkpoint interval's output.

A new epoch stops being compared once its rows have matched every kept row, or once a batch's
smallest `inputTS` is past the largest `inputTS` of the kept rows (the replay has passed the point
where the earlier epoch ended).

Spark needs none of this: a re-run micro-batch has the same batch id and the same rows, and the
sink writes a (stream, batch id) once.
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np
import pandas as pd
import pyarrow as pa

from kit.workload import INPUT_TS


def identity_hashes(table: pa.Table, skip: tuple[str, ...]) -> np.ndarray:
    """One uint64 per row over its identity columns (every non-floating column not in `skip`)."""
    cols = [f.name for f in table.schema if f.name not in skip and not pa.types.is_floating(f.type)]
    if not cols or table.num_rows == 0:
        return np.zeros(table.num_rows, dtype=np.uint64)
    frame = table.select(cols).to_pandas()
    return pd.util.hash_pandas_object(frame, index=False).to_numpy(np.uint64)


def _input_ts(table: pa.Table) -> np.ndarray | None:
    if INPUT_TS not in table.column_names or not pa.types.is_integer(table.schema.field(INPUT_TS).type):
        return None
    col = table.column(INPUT_TS)
    return (col.drop_null() if col.null_count else col).to_numpy().astype(np.int64)


class _Matching:
    """A new epoch being compared with what earlier epochs sent since the cut."""

    def __init__(self, counts: Counter, max_input_ts: int | None):
        self.counts, self.max_input_ts = counts, max_input_ts


class ReplayFilter:
    """Per stream: the identities of recent rows by epoch, and the drop of replayed ones."""

    def __init__(self, skip: tuple[str, ...]):
        self.skip = skip
        self.cut_ms = 0                                  # newest known checkpoint trigger
        self.recent: dict[str, deque] = {}               # stream -> (arrival_ms, epoch, hashes, max inputTS)
        self.epoch: dict[str, str] = {}                  # stream -> the epoch of its last batch
        self.matching: dict[str, _Matching] = {}
        self.dropped = 0

    def checkpoint_completed(self, trigger_ts_ms: int) -> None:
        """A checkpoint triggered at `trigger_ts_ms` completed: rows sent before it are never sent
        again by a restore, and are forgotten."""
        if trigger_ts_ms <= self.cut_ms:
            return
        self.cut_ms = int(trigger_ts_ms)
        for rows in self.recent.values():
            while rows and rows[0][0] < self.cut_ms:
                rows.popleft()

    def admit(self, stream: str, epoch: str, table: pa.Table, arrival_ms: int) -> pa.Table:
        """The rows of `table` (one emit of `epoch`) that are not replays; remembers them."""
        rows = self.recent.setdefault(stream, deque())
        hashes = identity_hashes(table, self.skip)
        if self.epoch.get(stream) != epoch:
            self._new_epoch(stream, epoch, rows)
        m = self.matching.get(stream)
        if m is not None and table.num_rows:
            ts = _input_ts(table)
            if m.max_input_ts is not None and ts is not None and len(ts) and int(ts.min()) > m.max_input_ts:
                del self.matching[stream]
            else:
                keep = np.ones(len(hashes), dtype=bool)
                for i, h in enumerate(hashes.tolist()):
                    if m.counts.get(h):
                        m.counts[h] -= 1
                        keep[i] = False
                if not keep.all():
                    self.dropped += int((~keep).sum())
                    table, hashes = table.filter(pa.array(keep)), hashes[keep]
                if not +m.counts:
                    del self.matching[stream]
        if table.num_rows:
            ts = _input_ts(table)
            rows.append((arrival_ms, epoch, hashes, int(ts.max()) if ts is not None and len(ts) else None))
        return table

    def _new_epoch(self, stream: str, epoch: str, rows: deque) -> None:
        first = stream not in self.epoch
        self.epoch[stream] = epoch
        if first:
            return
        earlier = [r for r in rows if r[1] != epoch and r[0] >= self.cut_ms]
        counts = Counter(np.concatenate([r[2] for r in earlier]).tolist()) if earlier else Counter()
        stamps = [r[3] for r in earlier if r[3] is not None]
        if counts:
            self.matching[stream] = _Matching(counts, max(stamps) if stamps else None)
        else:
            self.matching.pop(stream, None)
