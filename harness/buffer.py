"""The offset-addressed buffer of released events.

Event i of the run (in global event order) has offset i. The release loop appends chunks as it
reaches them and advances `released`; readers ask for any range [start, end) and get the rows
below `released`. Released rows are never changed again, so a range served twice is served
identically: that is what makes the engine's source replayable after a restart. That includes
the time each event was first served (`served_ms`, the engine's `ingestTS`): a read of a range
already served gets the first read's times, so a Spark task retried after a lost executor produces
the very rows the first attempt did (Spark compares the two attempts' shuffle output, and a
difference forces it to fail the batch's job).

Memory is bounded by `retain_bytes`: when a chunk is added and the retained chunks exceed it, the
oldest fully released chunks are dropped (whole chunks; the chunk being released always stays),
except chunks holding unread events among the last `keep_unread_events` released, and, once the
engine has acknowledged a checkpoint (`commit`), every event from its committed offset on: after a
crash the engine restarts from that offset and reads them again. Reading below the first retained
offset raises `OffsetEvictedError`.

`pulled` is the high-water mark of the offsets served; `released - pulled` is the backlog.

Splits (specs/DRIVER.md, "Splits"): an engine whose parallel readers share the feed in K splits
(split i reads the blocks of B offsets b with b % K == i) names the split in its reads and
commits. The buffer then follows each split's position (the first offset the split owns and has
not read) apart, and what is safe to forget is below the least of them: one split's position says
nothing of the others'.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque

import numpy as np
import pyarrow as pa

from kit.wire.protocol import BadRequestError, OffsetEvictedError

# Reads remembered for commit_reads: a Flink puller reads ~100 times a second, so hours of reads
# between two checkpoints would be needed to reach this.
READ_LOG_MAX = 1_000_000


class Chunk:
    """Consecutive events [first, first + rows): payload columns, due times and TS values."""

    __slots__ = ("first", "payload", "due_ms", "ts_ms", "served_ms", "rows", "nbytes")

    def __init__(self, first: int, payload: pa.RecordBatch, due_ms: np.ndarray, ts_ms: np.ndarray):
        self.first = first
        self.payload = payload
        self.due_ms = due_ms          # absolute epoch ms at which each event is due
        self.ts_ms = ts_ms            # the TS each event carries; in send mode filled on release
        self.rows = payload.num_rows
        self.served_ms = np.zeros(self.rows, dtype=np.int64)    # 0: not served yet
        self.nbytes = (payload.nbytes + due_ms.nbytes + (0 if ts_ms is due_ms else ts_ms.nbytes)
                       + self.served_ms.nbytes)

    @property
    def end(self) -> int:
        return self.first + self.rows

    def batch(self, lo: int, hi: int, schema: pa.Schema, ts_index: int) -> pa.RecordBatch:
        """Rows [lo, hi) of this chunk (chunk-relative) with TS inserted at `ts_index`."""
        cols = list(self.payload.slice(lo, hi - lo).columns)
        cols.insert(ts_index, pa.array(self.ts_ms[lo:hi]))
        return pa.RecordBatch.from_arrays(cols, schema=schema)


class ReleaseBuffer:
    """Released events by offset, shared by the release thread and the server's threads."""

    def __init__(self, retain_bytes: int, total_events: int, keep_unread_events: int = 0):
        self.retain_bytes = retain_bytes
        self.keep_unread_events = keep_unread_events
        self.total_events = total_events
        self.cond = threading.Condition()
        self._chunks: list[Chunk] = []
        self._firsts: list[int] = []
        self.retained_bytes = 0
        self.released = 0
        self.pulled = 0
        self.committed: int | None = None  # the engine's last checkpointed end offset, once it says
        # (wall ms, stop) of recent reads: an engine that learns of its checkpoints by time (Flink)
        # commits "every read answered before the checkpoint's trigger" (commit_reads).
        self._read_log: deque[tuple[int, int]] = deque(maxlen=READ_LOG_MAX)
        self._committed_after_ms: int | None = None     # the after_ms of the last commit by time
        # Split readers (see the module doc): (wall ms, split, position) of their reads, and each
        # split's committed position once its engine commits.
        self._split_log: deque[tuple[int, int, int]] = deque(maxlen=READ_LOG_MAX)
        self.splits: int | None = None                   # K, from the first split read or commit
        self.split_committed: dict[int, int] = {}
        self.served_rows = 0             # counts re-reads too
        self.reads = 0
        self.retained_from = 0
        self.finished = False            # every event released
        self.failed: str | None = None   # why the run stopped early (a dataset error)
        self.closed = False

    def add(self, chunk: Chunk) -> None:
        with self.cond:
            self._chunks.append(chunk)
            self._firsts.append(chunk.first)
            self.retained_bytes += chunk.nbytes
            # Unread events among the last `keep_unread_events` released stay, whatever the budget.
            evictable_to = max(self.pulled, self.released - self.keep_unread_events)
            if self.committed is not None:      # what a restarted engine will read again stays too
                evictable_to = min(evictable_to, self.committed)
            while (len(self._chunks) > 1 and self.retained_bytes > self.retain_bytes
                   and self._chunks[0].end <= evictable_to):
                old = self._chunks.pop(0)
                self._firsts.pop(0)
                self.retained_bytes -= old.nbytes
                self.retained_from = old.end

    def commit(self, end: int, split: tuple[int, int] | None = None) -> None:
        """The engine has checkpointed every event below `end`: it never reads below it again. With
        `split` (i, K): split i of K has, so the committed offset is the least of the K splits'
        (nothing until each has committed once)."""
        with self.cond:
            if split is None:
                self.committed = max(self.committed or 0, min(int(end), self.released))
                return
            i, k = self._check_split(*split)
            self.split_committed[i] = max(self.split_committed.get(i, 0), int(end))
            self._commit_splits()

    def _check_split(self, i: int, k: int) -> tuple[int, int]:
        if not 0 <= i < k:
            raise BadRequestError(f"split must be in [0, splits), got {i} of {k}")
        if self.splits is not None and k != self.splits:
            raise BadRequestError(f"splits: this run's reads share the feed in {self.splits} splits, not {k}")
        self.splits = k
        return i, k

    def _commit_splits(self) -> None:
        """committed = the least split position, once every split has one (under the lock)."""
        if self.splits is not None and len(self.split_committed) == self.splits:
            least = min(self.split_committed.values())
            self.committed = max(self.committed or 0, min(least, self.released))

    def commit_reads(self, after_ms: int, before_ms: int) -> int | None:
        """Commit the end of the furthest read answered in [after_ms, before_ms): an engine whose
        checkpoint was triggered at `before_ms` had processed those reads by then, and `after_ms`
        (its job's start or last restore) leaves out reads of a job it was restored from. Returns
        the committed offset."""
        with self.cond:
            ends = [stop for ms, stop in self._read_log if after_ms <= ms < before_ms]
            if ends:
                self.committed = max(self.committed or 0, min(max(ends), self.released))
                self._committed_after_ms = after_ms
            while self._read_log and self._read_log[0][0] < before_ms:
                self._read_log.popleft()
            # Split reads: each split's furthest position, then the least over the splits.
            reached = {}
            for ms, i, pos in self._split_log:
                if after_ms <= ms < before_ms:
                    reached[i] = max(reached.get(i, 0), pos)
            if reached:
                for i, pos in reached.items():
                    self.split_committed[i] = max(self.split_committed.get(i, 0), pos)
                self._commit_splits()
                self._committed_after_ms = after_ms
            while self._split_log and self._split_log[0][0] < before_ms:
                self._split_log.popleft()
            return self.committed

    def read_end_since(self, after_ms: int) -> int:
        """How far the reads answered at or after `after_ms` reached (a job restored then: has it
        read everything again?); a commit made for reads since then counts too."""
        with self.cond:
            ends = [stop for ms, stop in self._read_log if ms >= after_ms]
            since = self._committed_after_ms is not None and self._committed_after_ms >= after_ms
            # A commit of every released event: a job restored after it was restored from a
            # checkpoint that covers them all (a restore takes the newest completed one), so it
            # has nothing to read again and asks for nothing (seen on CI: a program restarted
            # from such a checkpoint waited for reads that never came).
            covered = self.committed is not None and self.committed >= self.released
            end = max([*ends, self.committed if (since or covered) and self.committed is not None else 0])
            if self.splits is None:
                return end
            # Split reads: how far the least of the splits reached (each split's own reads since
            # then, or its commit as above).
            reached = {}
            for ms, i, pos in self._split_log:
                if ms >= after_ms:
                    reached[i] = max(reached.get(i, 0), pos)
            if since or covered:
                for i, pos in self.split_committed.items():
                    reached[i] = max(reached.get(i, 0), pos)
            least = min(reached.get(i, 0) for i in range(self.splits))
            return max(end, min(least, self.released))

    def last_ts(self) -> tuple[int, int | None]:
        """(released, the TS of the last released event), read together (None before the first
        release): every event released later has a TS at least this (events are released in TS
        order)."""
        with self.cond:
            if self.released == 0:
                return 0, None
            k = bisect.bisect_right(self._firsts, self.released - 1) - 1
            c = self._chunks[k]
            return self.released, int(c.ts_ms[self.released - 1 - c.first])

    def publish(self, released: int) -> None:
        with self.cond:
            self.released = released
            self.cond.notify_all()

    def finish(self, failed: str | None = None) -> None:
        with self.cond:
            self.finished = failed is None
            self.failed = failed
            self.cond.notify_all()

    def close(self) -> None:
        """Wake every waiting reader (the driver is stopping)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wait_beyond(self, offset: int, timeout_s: float) -> int:
        """Wait until more than `offset` events are released (or the run ended); return `released`."""
        with self.cond:
            if timeout_s > 0:
                self.cond.wait_for(lambda: self.released > offset or self.finished or self.failed
                                   or self.closed, timeout_s)
            return self.released

    def wait_pulled_beyond(self, offset: int, timeout_s: float) -> int:
        """Wait until an engine has read beyond `offset` (or the run ended); return `pulled`."""
        with self.cond:
            self.cond.wait_for(lambda: self.pulled > offset or self.closed, timeout_s)
            return self.pulled

    def take(self, start: int, end: int, max_rows: int, split: tuple[int, int, int] | None = None
             ) -> tuple[int, list[tuple[Chunk, int, int]]]:
        """The pieces of chunks holding [start, stop), stop = min(end, released, start + max_rows);
        rows served for the first time get the current wall-clock ms as `served_ms`. `split`: (i,
        K, B) of a split reader, whose position this read moves."""
        if start < 0 or end < start:
            raise BadRequestError(f"read: bad range [{start}, {end})")
        with self.cond:
            if split is not None:
                self._check_split(split[0], split[1])
            self.reads += 1
            if start < self.retained_from:
                raise OffsetEvictedError(
                    f"offset {start} was evicted: the driver retains offsets [{self.retained_from}, "
                    f"{self.released}) of the released events (retain_bytes={self.retain_bytes}); "
                    "give the driver a larger retain_bytes")
            stop = min(end, self.released, start + max_rows)
            pieces = []
            pos = start
            k = bisect.bisect_right(self._firsts, pos) - 1
            now_ms = time.time_ns() // 1_000_000
            while pos < stop:
                c = self._chunks[k]
                hi = min(stop, c.end)
                served = c.served_ms[pos - c.first:hi - c.first]
                served[served == 0] = now_ms
                pieces.append((c, pos - c.first, hi - c.first))
                pos, k = hi, k + 1
            if stop <= start:
                return start, []
            if split is None:
                self._read_log.append((now_ms, stop))
            else:
                self._split_log.append((now_ms, split[0], split_position(stop, *split)))
            if stop > self.pulled:
                self.pulled = stop
                self.cond.notify_all()      # pull pacing waits for reads
            self.served_rows += stop - start
            return stop, pieces


def split_position(offset: int, i: int, k: int, block: int) -> int:
    """The first offset at or after `offset` that split i of k owns (blocks of `block` offsets, block
    b to split b % k): where split i stands once it has read everything it owns below `offset`."""
    if k == 1:
        return offset
    b = offset // block
    shift = (i - b) % k
    return offset if shift == 0 else (b + shift) * block


def served_runs(pieces: list[tuple[Chunk, int, int]]) -> list[list[int]]:
    """The pieces' `served_ms` run-length encoded, `[[rows, ms], ...]` in offset order (a read
    is stamped once, so a response holds a run or a few)."""
    if not pieces:
        return []
    ms = np.concatenate([c.served_ms[lo:hi] for c, lo, hi in pieces])
    starts = np.flatnonzero(np.r_[True, ms[1:] != ms[:-1]])
    lengths = np.diff(np.r_[starts, len(ms)])
    return [[int(n), int(t)] for n, t in zip(lengths, ms[starts])]
