"""The sink's filter for answers a restored engine sends again (specs/ENGINE_RUN.md, "Supervision").

A Flink job restored from a checkpoint (after its program was restarted, or by Flink itself after
losing a TaskManager) processes again every event after that checkpoint and so sends again the
answers it had already sent for them. Flink's emitters cannot tie their sends to checkpoints (a
Python function hears of none), so the sink does: every emit carries the sender's *epoch*,
`<program attempt>.<task attempt>[.<subtask>]`: its *generation* (the program attempt and Flink's
task attempt, which a restore raises for every task) and, after a second dot, the sender (the
subtask). When a stream's rows start coming from a newer generation, each new row that equals a row
an earlier generation sent since the restored checkpoint was triggered is dropped, once per earlier
row (a multiset difference: two equal answers sent twice are both dropped once). Rows of an older
generation that arrive late (a cancelled task's last sends) count as earlier rows.

Rows are compared on their *identity columns*: every column but floating-point ones (a restored
job may sum partial aggregates in another grouping, which changes the last bits of a double, never
an integer, string or timestamp) and the sink's own stamps. The rows kept for comparison are those
sent since the newest completed checkpoint's trigger the harness knows of (`checkpoint_completed`):
that is never later than the checkpoint a restore uses (a harness restart uses the newest it knows;
Flink's own restore the newest completed, which is at least as new), so every replayed row finds
its original. Older rows are forgotten, so memory is bounded by one checkpoint interval's output.

A new generation stops being compared once its rows have matched every kept row; a sender stops
being compared once one of its batches' smallest `inputTS` is past the largest `inputTS` of the
kept rows (its replay has passed the point where the earlier generation ended). That is per sender:
the subtasks of a restored job replay at their own pace, and one that has caught up says nothing of
another still replaying.

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


def generation_of(epoch: str) -> tuple[tuple, str]:
    """(generation, sender) of an epoch `ATTEMPT.TASKATTEMPT[.SENDER]`: the generation as a tuple
    that orders attempts (numbers as numbers), the sender as text ("" when not given)."""
    parts = epoch.split(".")
    gen = tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts[:2])
    return gen, ".".join(parts[2:])


class _Matching:
    """A new generation being compared with what earlier ones sent since the cut."""

    def __init__(self, counts: Counter, max_input_ts: int | None):
        self.counts, self.max_input_ts = counts, max_input_ts
        self.caught_up: set[str] = set()         # senders whose replay has passed max_input_ts


class ReplayFilter:
    """Per stream: the identities of recent rows by epoch, and the drop of replayed ones."""

    def __init__(self, skip: tuple[str, ...]):
        self.skip = skip
        self.cut_ms = 0                                  # newest known checkpoint trigger
        self.recent: dict[str, deque] = {}               # stream -> (arrival_ms, generation, hashes, max inputTS)
        self.generation: dict[str, tuple] = {}           # stream -> the newest generation it has sent from
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
        gen, sender = generation_of(epoch)
        newest = self.generation.get(stream)
        if newest is None or gen > newest:
            self._new_generation(stream, gen, rows, first=newest is None)
        m = self.matching.get(stream)
        if gen < self.generation[stream]:
            # A late send of an earlier generation: originals the replay may still repeat.
            ts = _input_ts(table)
            late_max = int(ts.max()) if ts is not None and len(ts) else None
            if m is None:
                m = self.matching[stream] = _Matching(Counter(), late_max)
            elif late_max is not None:
                m.max_input_ts = late_max if m.max_input_ts is None else max(m.max_input_ts, late_max)
            m.counts.update(hashes.tolist())
        elif m is not None and table.num_rows and sender not in m.caught_up:
            ts = _input_ts(table)
            if m.max_input_ts is not None and ts is not None and len(ts) and int(ts.min()) > m.max_input_ts:
                m.caught_up.add(sender)
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
            rows.append((arrival_ms, gen, hashes, int(ts.max()) if ts is not None and len(ts) else None))
        return table

    def _new_generation(self, stream: str, gen: tuple, rows: deque, first: bool) -> None:
        self.generation[stream] = gen
        if first:
            return
        earlier = [r for r in rows if r[1] != gen and r[0] >= self.cut_ms]
        counts = Counter(np.concatenate([r[2] for r in earlier]).tolist()) if earlier else Counter()
        stamps = [r[3] for r in earlier if r[3] is not None]
        if counts:
            self.matching[stream] = _Matching(counts, max(stamps) if stamps else None)
        else:
            self.matching.pop(stream, None)
