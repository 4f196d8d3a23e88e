"""The runtime every generated PySpark engine program calls: `run_app(build, app_name=...)`.

A program defines `build(spark, events)` and ends with
`raise SystemExit(run_app(build, app_name="..."))`. `run_app` parses the harness's arguments,
builds the SparkSession, reads the driver's events (harness/spark_source.py), asks `build` for
the output, runs ONE streaming query whose `foreachBatch` sends each micro-batch's rows to the
harness sink (harness/sink.py), and stops the query when the run is over. Its stdout is one JSON
object per line (`started`, `progress`, `finished` / `stopped` / `failed`); Spark's logs go to
stderr. specs/ENGINE_RUN.md is the contract.

The output contract: `build` returns `(df, streams)` where `df` has a string column `stream`
naming each row's output stream plus the union of all streams' columns, and `streams` maps each
stream name to its column names in order, e.g. `{"Indicator": [...], "MarketOrder": [...]}`.

End of run: the driver reports `finished` (every event released) and the query's last progress
has consumed all of them (its source end offset equals `total_events`), no batch has started
since for a quiet period, and no trigger is active: then the query is stopped between batches.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import sys
import threading
import time
import tempfile
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from kit.wire.feed_client import DriverClient
from kit.wire.sink_client import SinkClient
from harness.spark_source import driver_stream
from kit.errors import CepkitError

STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STREAM_COLUMN = "stream"
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

BuildResult = tuple  # (DataFrame, {stream: [columns]})


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="a cepkit engine program (PySpark Structured Streaming)")
    ap.add_argument("--driver", required=True, metavar="HOST:PORT", help="the cepkit driver to pull events from")
    ap.add_argument("--sink", required=True, metavar="HOST:PORT", help="the harness sink to send outputs to")
    ap.add_argument("--checkpoint", required=True, metavar="DIR", help="the streaming query's checkpoint directory")
    ap.add_argument("--master", default=None,
                    help="Spark master (default local[*]; under spark-submit, spark-submit's own)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    ap.add_argument("--trigger-ms", type=int, default=0, help="micro-batch trigger interval (0: as fast as possible)")
    ap.add_argument("--shuffle-partitions", type=int, default=2)
    ap.add_argument("--source-partitions", type=int, default=1, help="offset ranges read in parallel per batch")
    ap.add_argument("--max-rows-per-batch", type=int, default=None)
    return ap


def _host_port(flag: str, value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CepkitError(f"{flag}: expected HOST:PORT, got {value!r}")
    return host, int(port)


def _confs(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise CepkitError(f"--conf: expected KEY=VALUE, got {p!r}")
        out[key.strip()] = value
    return out


def _emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def one_line(text: str, limit: int = 500) -> str:
    """The most telling line of a (Spark) error text: a cepkit error if one is in it, else the
    last `SomeError: message` line of a Python traceback, else the first line."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return "unknown error"
    pattern = re.compile(r"((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)): (.+)")
    found = [m for m in (pattern.search(ln) for ln in lines) if m]
    ours = [m for m in found if m.group(1).startswith(("harness.", "kit.")) or "Cepkit" in m.group(1)]
    pick = ours[-1] if ours else None
    if pick is None:
        pyside = [m for m in found if not m.group(1).startswith(("org.", "java.", "scala.", "py4j."))]
        pick = pyside[-1] if pyside else None
    line = f"{pick.group(1).rsplit('.', 1)[-1]}: {pick.group(2)}" if pick else lines[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _under_spark_submit() -> bool:
    # spark-submit launches the Python program with its JVM's gateway already running.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(app_name: str, master: str | None, shuffle_partitions: int,
                  spark_conf: Mapping[str, str] | None, overrides: Mapping[str, str]):
    """The SparkSession for one engine program (see the module doc for the settings)."""
    # Python workers must run this interpreter (the venv with pandas/pyarrow), not the system one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None or not _under_spark_submit():
        builder = builder.master(master or "local[*]")
    conf = {"spark.sql.streaming.stateStore.providerClass": STATE_STORE,
            "spark.sql.shuffle.partitions": str(shuffle_partitions),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",     # progress bars would clutter engine.log
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            **{k: str(v) for k, v in (spark_conf or {}).items()}, **overrides}
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _check_build_result(result) -> tuple[object, dict[str, list[str]]]:
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping)):
        raise CepkitError("build(spark, events) must return (DataFrame, {stream: [columns]})")
    df, streams = result
    streams = {str(k): [str(c) for c in v] for k, v in streams.items()}
    if not streams:
        raise CepkitError("build(): the stream map is empty")
    cols = set(df.columns)
    if STREAM_COLUMN not in cols:
        raise CepkitError(f"build(): the DataFrame has no {STREAM_COLUMN!r} column (has {', '.join(df.columns)})")
    for name, wanted in streams.items():
        missing = [c for c in wanted if c not in cols]
        if missing:
            raise CepkitError(f"build(): stream {name}: column(s) {', '.join(missing)} not in the DataFrame")
    return df, streams


def split_streams(table: pa.Table, streams: Mapping[str, Sequence[str]]) -> dict[str, pa.Table]:
    """One micro-batch's output split by its `stream` column, each with its stream's columns.
    Streams without rows are left out; a row of an unknown stream is an error."""
    if table.num_rows == 0:
        return {}
    col = table.column(STREAM_COLUMN)
    if col.null_count:
        raise CepkitError(f"build(): {col.null_count} output row(s) have a null {STREAM_COLUMN!r}")
    unknown = set(pc.unique(col).to_pylist()) - set(streams)
    if unknown:
        raise CepkitError(f"build(): rows for unknown stream(s) {sorted(unknown)} (known: {', '.join(streams)})")
    if len(streams) == 1:
        (name, cols), = streams.items()
        return {name: table.select(list(cols))}
    out = {}
    for name, cols in streams.items():
        part = table.filter(pc.equal(col, name))
        if part.num_rows:
            out[name] = part.select(list(cols))
    return out


class _StopRequested(BaseException):
    """SIGTERM/SIGINT before the query runs (BaseException: no `except Exception` swallows it)."""


def _warm_worker(batches):
    importlib.import_module("harness.spark_source")     # the source's read runs in these workers next

    yield from batches


def warm_up(spark) -> None:
    """Start Spark's Python workers (one per core) and import the source in them, so the first
    micro-batch of the run does not pay for it (seconds on a small machine)."""
    n = max(1, spark.sparkContext.defaultParallelism)
    spark.range(0, n, 1, n).mapInArrow(_warm_worker, "id long").collect()


def _wait_ready(query, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until the query has asked the source for offsets once (its Python runner is up) and
    waits for data: then the driver may start releasing."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and query.isActive:
        if query.lastProgress is not None or query.status.get("message") == "Waiting for data to arrive":
            return
        time.sleep(0.05)


class _Batches:
    """The foreachBatch function: sends each stream's rows of a batch to the sink, and times the
    two halves of Spark's addBatch: `collect` (running the batch's plan, the queries' operators and
    Python cores included, and bringing its rows to the driver as Arrow) and `sink` (handing them
    to the harness)."""

    def __init__(self, sink: SinkClient, streams: Mapping[str, Sequence[str]]):
        self.sink, self.streams = sink, streams
        self.count = 0
        self.rows = 0
        self._lock = threading.Lock()
        self._timings: dict[int, dict] = {}

    def __call__(self, batch_df, batch_id: int) -> None:
        t0 = time.perf_counter()
        table = batch_df.toArrow()
        t1 = time.perf_counter()
        for name, part in split_streams(table, self.streams).items():
            self.sink.emit(name, batch_id, part)
            self.rows += part.num_rows
        t2 = time.perf_counter()
        with self._lock:
            self._timings[batch_id] = {"collect": round((t1 - t0) * 1000), "sink": round((t2 - t1) * 1000),
                                       "output_rows": table.num_rows}
        self.count += 1

    def timings(self, batch_id: int) -> dict:
        """The foreachBatch figures of a batch (once: they are forgotten after)."""
        with self._lock:
            return self._timings.pop(batch_id, {})


def _progress(query) -> dict | None:
    p = query.lastProgress
    if not p:
        return None
    end = None
    sources = p.get("sources") or []
    if sources:
        raw = sources[0].get("endOffset")
        try:
            end = int((json.loads(raw) if isinstance(raw, str) else raw)["offset"])
        except (TypeError, ValueError, KeyError):
            end = None
    return {"batch_id": p.get("batchId"), "end_offset": end,
            "duration_ms": (p.get("durationMs") or {}).get("triggerExecution"),
            "input_rows": p.get("numInputRows")}


def _batch_records(query, after: int) -> list[dict]:
    """Every finished batch after `after` that Spark still remembers, with where its time went
    (Spark's durationMs: latestOffset, getBatch, queryPlanning, addBatch, walCommit, commitOffsets,
    triggerExecution) and its stateful operators' figures."""
    out = []
    for p in query.recentProgress or []:
        if p.get("batchId") is None or p["batchId"] <= after:
            continue
        state = [{k: op.get(k) for k in ("operatorName", "numRowsTotal", "numRowsUpdated", "memoryUsedBytes",
                                         "commitTimeMs", "allUpdatesTimeMs", "allRemovalsTimeMs")}
                 for op in p.get("stateOperators") or []]
        out.append({"batch_id": p["batchId"], "input_rows": p.get("numInputRows"),
                    "durations_ms": dict(p.get("durationMs") or {}), "state": state})
    return out


def _trigger_active(query) -> bool:
    try:
        return bool(query.status.get("isTriggerActive"))
    except Exception:  # noqa: BLE001 - a stopped query has no status; nothing is running then
        return False


def _stop_between_batches(query, pause_file: str | None = None) -> None:
    """Stop the query when no batch runs. The pause file makes the source offer nothing new, so
    a query with a backlog (batches back to back) gets to a boundary too."""
    if pause_file:
        with open(pause_file, "w"):
            pass
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline and query.isActive and _trigger_active(query):
        time.sleep(0.01)
    query.stop()


def run_app(build: Callable, *, app_name: str, spark_conf: Mapping[str, str] | None = None,
            argv: Sequence[str] | None = None) -> int:
    """Run an engine program until the driver's events are all processed; 0 on success."""
    args = _parser().parse_args(argv)
    stop_requested = threading.Event()
    running = threading.Event()

    def on_signal(signum, _frame):
        stop_requested.set()
        if not running.is_set():
            # Still starting up (seconds of session, warm-up, query start): give up at once.
            raise _StopRequested()

    def install_handlers() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)

    install_handlers()
    try:
        driver_host, driver_port = _host_port("--driver", args.driver)
        sink_host, sink_port = _host_port("--sink", args.sink)
        overrides = _confs(args.conf)
        if args.trigger_ms < 0 or args.shuffle_partitions < 1:
            raise CepkitError("--trigger-ms must be >= 0 and --shuffle-partitions >= 1")
    except CepkitError as e:
        _emit("failed", message=str(e))
        print(f"cepkit engine program: error: {e}", file=sys.stderr, flush=True)
        return 2

    spark = restarter = None
    pause_file = os.path.join(tempfile.gettempdir(), f"cepkit-pause-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        spark = build_session(app_name, args.master, args.shuffle_partitions, spark_conf, overrides)
        # SparkContext installs its own SIGINT handler (cancel jobs, raise KeyboardInterrupt);
        # ours stops the query between batches instead.
        install_handlers()
        options = {"partitions": args.source_partitions, "pauseFile": pause_file}
        if args.max_rows_per_batch:
            options["maxRowsPerBatch"] = args.max_rows_per_batch
        events = driver_stream(spark, driver_host, driver_port, **options)
        df, streams = _check_build_result(build(spark, events))
        sink = SinkClient(sink_host, sink_port)
        batches = _Batches(sink, streams)
        warm_up(spark)

        def start():
            return (df.writeStream.foreachBatch(batches)
                    .option("checkpointLocation", args.checkpoint)
                    .trigger(processingTime=f"{args.trigger_ms} milliseconds")
                    .queryName(re.sub(r"\W+", "_", app_name)[:60] or "cepkit")
                    .start())

        restarter = _Restarter(spark, start)
        restarter.launch()
        running.set()
        if stop_requested.is_set():
            raise _StopRequested()
        query = restarter.query
        _emit("started", spark_version=spark.version, query_id=str(query.id), run_id=str(query.runId),
              pid=os.getpid(), streams=streams)
        return _watch(restarter, batches, DriverClient(driver_host, driver_port), stop_requested, pause_file)
    except _StopRequested:
        running.set()       # a second signal must not interrupt the cleanup below
        if restarter is not None:
            restarter.stop(pause_file)
        _emit("stopped", batches=0, output_rows=0)
        return 0
    except Exception as e:  # noqa: BLE001 - reported as one line on stdout, in full on stderr
        _emit("failed", message=one_line(str(e)) if not isinstance(e, CepkitError) else str(e))
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        if restarter is not None:
            try:
                restarter.stop(pause_file)
            except Exception:  # noqa: BLE001 - already failing; the first error is the one to report
                pass
        return 1
    finally:
        if spark is not None:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - the JVM may already be gone
                pass
        if os.path.exists(pause_file):
            os.remove(pause_file)


def is_stalled(released: int, end_offset: int | None, quiet_s: float, jobs_running: Callable[[], bool],
               stall_s: float = STALL_S) -> bool:
    """Released events wait beyond the query's last end offset, no batch has completed for
    `stall_s` and no Spark job runs: the query is stuck between batches. `jobs_running` (a call
    into the JVM) is asked only when the rest already says so."""
    return released > (end_offset or 0) and quiet_s >= stall_s and not jobs_running()


class _Restarter:
    """Starts the query, holds it, and restarts it from its checkpoint when it stalls."""

    def __init__(self, spark, start: Callable):
        self.spark, self.start = spark, start
        self.restarts = 0
        self.query = None

    def launch(self) -> None:
        self.query = self.start()       # held before the wait, so a signal meanwhile can stop it
        _wait_ready(self.query)

    def stop(self, pause_file: str) -> None:
        if self.query is not None and self.query.isActive:
            _stop_between_batches(self.query, pause_file)

    def jobs_running(self) -> bool:
        try:
            return bool(self.spark.sparkContext.statusTracker().getActiveJobsIds())
        except Exception:  # noqa: BLE001 - no answer: assume work is going on, never restart on a guess
            return True

    def restart(self, why: str) -> None:
        _dump_stream_threads(self.spark)
        self.restarts += 1
        _emit("stalled", message=why, restart=self.restarts)
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


def _watch(restarter: _Restarter, batches: _Batches, driver: DriverClient, stop_requested: threading.Event,
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
                _stop_between_batches(query, pause_file)
                _emit("stopped", batches=batches.count, output_rows=batches.rows)
                return 0
            if not query.isActive:
                exc = query.exception()
                if exc is not None:
                    detail = str(exc)
                    _emit("failed", message=one_line(detail))
                    print(detail, file=sys.stderr, flush=True)
                    return 1
                _emit("stopped", batches=batches.count, output_rows=batches.rows)
                return 0
            prog = _progress(query)
            now = time.monotonic()
            if prog and prog["batch_id"] != last_batch:
                last_batch, last_batch_change = prog["batch_id"], now
                for record in _batch_records(query, last_recorded):
                    _emit("batch", **record, foreach_batch=batches.timings(record["batch_id"]))
                    last_recorded = record["batch_id"]
                if now - last_printed >= PROGRESS_EVERY_S:
                    _emit("progress", **prog)
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
            if done and now - last_batch_change >= QUIET_S and not _trigger_active(query):
                _stop_between_batches(query)
                for record in _batch_records(query, last_recorded):
                    _emit("batch", **record, foreach_batch=batches.timings(record["batch_id"]))
                _emit("finished", batches=batches.count, output_rows=batches.rows,
                      end_offset=prog["end_offset"], last_batch_id=prog["batch_id"])
                return 0
            stop_requested.wait(POLL_S)
