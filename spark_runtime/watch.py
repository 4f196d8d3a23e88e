"""Watching a running streaming query: progress and per-batch records, the end of the run, stall
restarts, and stopping between batches.

The program's main loop (`watch`) polls the query and the driver until every released event has
been consumed and the query is quiet, the query fails, or a signal asks to stop. What it sees
goes to stdout as events (runtime_common/events.py).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime

from kit.wire.feed_client import DriverClient
from runtime_common.events import emit, one_line

POLL_S = 0.2
PROGRESS_EVERY_S = 1.0
# After the last event was consumed, a batch Spark still owes (a no-data batch that advances the
# watermark) starts right away; this long without a new batch means none is coming.
QUIET_S = 0.5
# query.stop() in the middle of a batch crashed the JVM (StackOverflowError) on our machines:
# wait this long for the batch to end first.
STOP_WAIT_S = 10.0
# How long "started" waits for the query's first offset request before announcing it anyway.
READY_TIMEOUT_S = 60.0
# A query that leaves released events unread this long with no Spark job running is stalled (seen
# once in CI: the stream thread stopped after a batch and never asked for the next one); it is
# restarted from its checkpoint, at most MAX_RESTARTS times. Real batches run jobs, so an
# overloaded query is never mistaken for a stalled one.
STALL_S = 30.0
MAX_RESTARTS = 2


def _wait_ready(query, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until the query has asked the source for offsets once (its Python runner is up) and
    waits for data: then the driver may start releasing."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and query.isActive:
        if query.lastProgress is not None or query.status.get("message") == "Waiting for data to arrive":
            return
        time.sleep(0.05)


def _offset(p: dict, which: str) -> int | None:
    """The driver offset a progress record's source reached (`startOffset` / `endOffset`)."""
    sources = p.get("sources") or []
    if not sources:
        return None
    raw = sources[0].get(which)
    try:
        return int((json.loads(raw) if isinstance(raw, str) else raw)["offset"])
    except (TypeError, ValueError, KeyError):
        return None


def _progress(query) -> tuple[dict, dict] | None:
    """The last progress record as the program reports it, and the record itself."""
    p = query.lastProgress
    if not p:
        return None
    end = _offset(p, "endOffset")
    return {"batch_id": p.get("batchId"), "end_offset": end,
            "duration_ms": (p.get("durationMs") or {}).get("triggerExecution"),
            "input_rows": p.get("numInputRows")}, p


def _record(p: dict) -> dict:
    """One batch's record: its events, where its time went (Spark's durationMs: latestOffset,
    getBatch, queryPlanning, addBatch, walCommit, commitOffsets, triggerExecution) and its stateful
    operators' figures (RocksDB's among `customMetrics`)."""
    state = [{k: op.get(k) for k in ("operatorName", "numRowsTotal", "numRowsUpdated", "memoryUsedBytes",
                                     "commitTimeMs", "allUpdatesTimeMs", "allRemovalsTimeMs", "customMetrics")}
             for op in p.get("stateOperators") or []]
    start, end = _offset(p, "startOffset"), _offset(p, "endOffset")
    # Events (driver offsets) and the source's rows: they differ when the source transforms its
    # partitions (the Pairs plan's partial aggregates).
    return {"batch_id": p["batchId"], "input_rows": p.get("numInputRows"),
            "events": end - (start or 0) if end is not None else None,
            "durations_ms": dict(p.get("durationMs") or {}), "state": state, "ended_ms": _ended_ms(p)}


def _ended_ms(p: dict) -> int | None:
    """When a batch's execution ended (epoch ms): its start (`timestamp`, ISO 8601 UTC) plus its
    `triggerExecution`; the next batch starts after it."""
    try:
        started = datetime.fromisoformat(str(p["timestamp"]).replace("Z", "+00:00"))
        return round(started.timestamp() * 1000) + int(p["durationMs"]["triggerExecution"])
    except (KeyError, TypeError, ValueError):
        return None


def _batch_records(query, after: int, last: dict | None = None) -> list[dict]:
    """Every finished batch after `after` that Spark still remembers. When `last` (the last
    progress record, already fetched) is the very next batch, it is the answer: asking for
    `recentProgress` builds the JSON of up to 100 records in the JVM, several times a second."""
    if last is not None and last.get("batchId") == after + 1:
        return [_record(last)]
    return [_record(p) for p in query.recentProgress or [] if p.get("batchId") is not None and p["batchId"] > after]


def _emit_batch(record: dict, batches) -> None:
    """One `batch` line: Spark's figures, the foreachBatch timings, and the state a batch stage
    keeps on the driver (reported beside Spark's stateful operators)."""
    timings = batches.timings(record["batch_id"])
    emit("batch", **{**record, "state": record["state"] + timings.pop("state", [])}, foreach_batch=timings)
    ended = getattr(batches, "batch_ended", None)      # real-time mode's (spark_runtime/realtime.py)
    if ended is not None:
        ended(record)


def _trigger_active(query) -> bool:
    try:
        return bool(query.status.get("isTriggerActive"))
    except Exception:  # noqa: BLE001 - a stopped query has no status; nothing is running then
        return False


def wait_driver_read(query, driver: DriverClient, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Real-time mode's readiness: its first batch has ended and the next batch's reader has
    asked the driver for events. A real-time batch never waits for data between batches, so the
    micro-batch sign (`_wait_ready`) does not come; and the first boundary between batches is the
    costly one (the first commit, the next batch planned and launched the first time: events
    released during it waited ~0.6 s, against 0.1-0.35 s at later boundaries), so like the
    micro-batch program's, the query is ready once it runs as it will for the rest of the run."""
    deadline = time.monotonic() + timeout_s
    reads_at_end = None
    while time.monotonic() < deadline and query.isActive:
        if reads_at_end is None:
            if query.lastProgress is not None:
                reads_at_end = driver.stats().get("reads", 0)
        elif driver.stats().get("reads", 0) > reads_at_end:
            return
        time.sleep(0.05)


def stop_between_batches(query, pause_file: str | None = None, realtime: bool = False) -> None:
    """Stop the query when no batch runs. The pause file makes the source offer nothing new, so
    a query with a backlog (batches back to back) gets to a boundary too. A real-time query is
    always in a batch (its tasks run until the batch's time is up): it is stopped at once."""
    if realtime:
        query.stop()
        return
    if pause_file:
        with open(pause_file, "w"):
            pass
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline and query.isActive and _trigger_active(query):
        time.sleep(0.01)
    query.stop()


def is_stalled(released: int, end_offset: int | None, quiet_s: float, jobs_running: Callable[[], bool],
               stall_s: float = STALL_S) -> bool:
    """Released events wait beyond the query's last end offset, no batch has completed for
    `stall_s` and no Spark job runs: the query is stuck between batches. `jobs_running` (a call
    into the JVM) is asked only when the rest already says so."""
    return released > (end_offset or 0) and quiet_s >= stall_s and not jobs_running()


class Restarter:
    """Starts the query, holds it, and restarts it from its checkpoint when it stalls."""

    def __init__(self, spark, start: Callable, ready: Callable | None = None, realtime: bool = False):
        self.spark, self.start = spark, start
        self.ready = ready or _wait_ready
        self.realtime = realtime
        self.restarts = 0
        self.query = None

    def launch(self) -> None:
        self.query = self.start()       # held before the wait, so a signal meanwhile can stop it
        self.ready(self.query)

    def stop(self, pause_file: str) -> None:
        if self.query is not None and self.query.isActive:
            stop_between_batches(self.query, pause_file, self.realtime)

    def jobs_running(self) -> bool:
        try:
            return bool(self.spark.sparkContext.statusTracker().getActiveJobsIds())
        except Exception:  # noqa: BLE001 - no answer: assume work is going on, never restart on a guess
            return True

    def restart(self, why: str) -> None:
        _dump_stream_threads(self.spark)
        self.restarts += 1
        emit("stalled", message=why, restart=self.restarts)
        self.query.stop()
        self.launch()


def _dump_stream_threads(spark) -> None:
    """The JVM stacks of the streaming threads, on stderr (the engine log), to tell where a
    stalled query stopped."""
    try:
        traces = spark.sparkContext._jvm.java.lang.Thread.getAllStackTraces()
        for thread in traces.keySet():
            name = thread.getName()
            if "stream" in name.lower() or "python" in name.lower():
                frames = "\n    at ".join(str(f) for f in traces.get(thread))
                print(f"cepkit stalled-query dump: thread {name!r} {thread.getState()}\n    at {frames}",
                      file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - a diagnostic; never the cause of a failure
        print(f"cepkit stalled-query dump failed: {e}", file=sys.stderr, flush=True)


def watch(restarter: Restarter, batches, driver: DriverClient, stop_requested: threading.Event,
           pause_file: str) -> int:
    """Poll until the run is over, the query fails, or a signal asks to stop."""
    last_printed = 0.0
    last_batch = None
    last_recorded = -1
    last_batch_change = time.monotonic()
    with driver:
        while True:
            query = restarter.query
            if stop_requested.is_set():
                stop_between_batches(query, pause_file, restarter.realtime)
                emit("stopped", batches=batches.count, output_rows=batches.rows)
                return 0
            if not query.isActive:
                exc = query.exception()
                if exc is not None:
                    detail = str(exc)
                    emit("failed", message=one_line(detail))
                    print(detail, file=sys.stderr, flush=True)
                    return 1
                emit("stopped", batches=batches.count, output_rows=batches.rows)
                return 0
            prog, last = _progress(query) or (None, None)
            now = time.monotonic()
            if prog and prog["batch_id"] != last_batch:
                last_batch, last_batch_change = prog["batch_id"], now
                for record in _batch_records(query, last_recorded, last):
                    _emit_batch(record, batches)
                    last_recorded = record["batch_id"]
                if now - last_printed >= PROGRESS_EVERY_S:
                    emit("progress", **prog)
                    last_printed = now
            stats = driver.stats()
            if stats.get("failed"):
                # The source fails on its next read; give Spark a moment to report it as the cause.
                time.sleep(POLL_S)
                continue
            end_offset = prog["end_offset"] if prog else None
            done = (stats["finished"] and end_offset is not None and end_offset >= stats["total_events"])
            if (not done and restarter.restarts < MAX_RESTARTS
                    and is_stalled(stats["released"], end_offset, now - last_batch_change, restarter.jobs_running)):
                restarter.restart(f"{stats['released'] - (end_offset or 0)} released events unread and no batch "
                                  f"for {now - last_batch_change:.0f} s after batch {last_batch}")
                last_batch_change = time.monotonic()
                continue
            # A real-time batch ends only when its time is up: once one has ended past the last
            # event, every output of the run was sent (its writers flush before the batch ends).
            if done and now - last_batch_change >= QUIET_S and (restarter.realtime or not _trigger_active(query)):
                stop_between_batches(query, realtime=restarter.realtime)
                for record in _batch_records(query, last_recorded):
                    _emit_batch(record, batches)
                emit("finished", batches=batches.count, output_rows=batches.rows,
                      end_offset=prog["end_offset"], last_batch_id=prog["batch_id"])
                return 0
            stop_requested.wait(POLL_S)
