"""Client of the driver's protocol, for the engine's source and for tools.

`DriverClient` keeps one connection and reconnects transparently: every request is idempotent
(reads address offsets, not "the next events"), so a request cut by a lost connection is simply
sent again on a new one, until `reconnect_s` passes. One client serves one thread at a time (a
lock makes concurrent use safe but serial); open one client per reader thread or partition. A
client pickles without its socket, so it can be shipped to Spark's Python workers and connects on
first use there. `secret`: the run's secret (kit/wire/auth.py), presented on every connection; it
pickles with the client.

    with DriverClient(port=port) as c:
        n = c.latest_offset()
        table = c.read(0, n)          # pyarrow.Table with the driver's columns, TS included
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from kit.wire.connection import FrameClient, FrameConnection
from kit.wire.protocol import DriverError, UnauthorizedError, decode_table, raise_for


def served_ms(resp: dict) -> np.ndarray:
    """Per row of a `read` response, the wall-clock ms at which the driver first served it (the
    header's `served` runs)."""
    runs = resp.get("served")
    if runs is None:
        raise DriverError("read response: no `served` runs (a driver of another cepkit version?)")
    if not runs:
        return np.empty(0, dtype=np.int64)
    lengths, times = zip(*runs)
    out = np.repeat(np.asarray(times, dtype=np.int64), np.asarray(lengths, dtype=np.int64))
    if len(out) != resp["rows"]:
        raise DriverError(f"read response: served runs cover {len(out)} rows, not {resp['rows']}")
    return out


class DriverClient(FrameClient):
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, timeout_s: float = 30.0,
                 reconnect_s: float = 10.0, secret: str | None = None):
        if not port:
            raise DriverError("DriverClient: a port is required (the driver reports the one it chose)")
        self.host, self.port = host, int(port)
        self._conn = FrameConnection(host, port, peer="driver", unreachable=DriverError, timeout_s=timeout_s,
                                     reconnect_s=reconnect_s, secret=secret, refused=UnauthorizedError)
        self._info: dict | None = None
        self._schema: pa.Schema | None = None

    # ---- plumbing ------------------------------------------------------------------------------

    def _request(self, header: dict, wait_ms: int = 0) -> tuple[dict, memoryview]:
        resp, body = self._conn.request(header, wait_s=wait_ms / 1000.0)
        return raise_for(resp, self._conn.where), body

    # ---- requests --------------------------------------------------------------------------------

    def info(self) -> dict:
        """The driver's `hello`: kind, streams, total_events, columns and clocks (cached once the
        run has begun, since the clocks are fixed from then on)."""
        if self._info is None or self._info["clocks"]["run_start_wall_ms"] is None:
            resp, body = self._request({"op": "hello"})
            self._info = resp["info"]
            self._schema = decode_table(body).schema
        return self._info

    @property
    def schema(self) -> pa.Schema:
        """Arrow schema of the events (TS included)."""
        if self._schema is None:
            self.info()
        return self._schema

    def latest_offset(self, *, after: int | None = None, wait_ms: int = 0) -> int:
        """How many events have been released. With `after` and `wait_ms`, wait up to wait_ms for
        more than `after` (returns at once when the run has ended)."""
        req = {"op": "latest_offset", "wait_ms": int(wait_ms)}
        if after is not None:
            req["after"] = int(after)
        return self._request(req, wait_ms)[0]["offset"]

    def read_once(self, start: int, end: int, *, max_rows: int | None = None,
                  wait_ms: int = 0, split: tuple[int, int, int] | None = None) -> tuple[pa.Table, dict]:
        """One `read` request: rows [start, stop) with stop <= end and <= the released offset,
        and at most max_rows (and the driver's cap). Returns the table and the response header.
        `split`: (i, K, B), the read of split i of K in blocks of B (specs/DRIVER.md, "Splits")."""
        req = {"op": "read", "start": int(start), "end": int(end), "wait_ms": int(wait_ms)}
        if max_rows is not None:
            req["max_rows"] = int(max_rows)
        if split is not None:
            req.update(split=int(split[0]), splits=int(split[1]), block=int(split[2]))
        resp, body = self._request(req, wait_ms)
        return decode_table(body), resp

    def iter_batches(self, start: int, end: int, *, wait_ms: int = 0) -> Iterator[pa.RecordBatch]:
        """Record batches covering [start, min(end, released)); only the first request waits."""
        pos = start
        while pos < end:
            table, resp = self.read_once(pos, end, wait_ms=wait_ms if pos == start else 0)
            if resp["rows"] == 0:
                return
            yield from table.to_batches()
            pos = resp["end"]
            if pos >= resp["released"]:
                return

    def read(self, start: int, end: int, *, wait_ms: int = 0) -> pa.Table:
        """Rows [start, min(end, released)) as one table; empty (with the schema) when none are
        released yet. Raises OffsetEvictedError for offsets the driver no longer retains."""
        batches = list(self.iter_batches(start, end, wait_ms=wait_ms))
        if not batches:
            return self.schema.empty_table()
        return pa.Table.from_batches(batches)

    def stats(self) -> dict:
        return self._request({"op": "stats"})[0]["stats"]

    def commit(self, end: int, split: tuple[int, int] | None = None) -> None:
        """Tell the driver the engine has checkpointed every event below `end` (it keeps the rest
        for a restart); with `split` (i, K): split i of K has (specs/DRIVER.md, "Splits")."""
        req = {"op": "commit", "end": int(end)}
        if split is not None:
            req.update(split=int(split[0]), splits=int(split[1]))
        self._request(req)

    def commit_reads(self, before_ms: int, after_ms: int = 0) -> int | None:
        """Tell the driver the engine has checkpointed every read it answered between `after_ms`
        and `before_ms` (wall-clock epoch ms: a checkpoint's trigger, the job's start or last
        restore); returns the committed offset (None: nothing committed yet)."""
        return self._request({"op": "commit", "before_ms": int(before_ms), "after_ms": int(after_ms)})[0]["committed"]

    def read_end_since(self, after_ms: int) -> int:
        """How far the reads the driver answered at or after `after_ms` (wall-clock epoch ms) reached:
        whether a job restored then has read every event again."""
        return int(self._request({"op": "reads", "after_ms": int(after_ms)})[0]["end"])

    def begin(self, start_wall_ms: int | None = None) -> int:
        """Start a held run (no-op if it has begun); returns run_start_wall_ms."""
        req = {"op": "begin"}
        if start_wall_ms is not None:
            req["start_wall_ms"] = int(start_wall_ms)
        return self._request(req)[0]["run_start_wall_ms"]
