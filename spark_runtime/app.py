"""The runtime every generated PySpark engine program calls: `run_app(build, app_name=...)`.

A program defines `build(spark, events)` and ends with
`raise SystemExit(run_app(build, app_name="..."))`. `run_app` parses the harness's arguments,
builds the SparkSession, reads the driver's events (spark_runtime/source.py), asks `build` for
the output, runs ONE streaming query whose `foreachBatch` sends each micro-batch's rows to the
harness sink (kit/wire/sink_client.py), and stops the query when the run is over. Its stdout is one JSON
object per line (`started`, `progress`, `finished` / `stopped` / `failed`); Spark's logs go to
stderr. specs/ENGINE_RUN.md is the contract.

The output contract: `build` returns `(df, streams)` where `df` has a string column `stream`
naming each row's output stream plus the union of all streams' columns, and `streams` maps each
stream name to its column names in order, e.g. `{"Indicator": [...], "MarketOrder": [...]}`.

End of run: the driver reports `finished` (every event released) and the query's last progress
has consumed all of them (its source end offset equals `total_events`), no batch has started
since for a quiet period, and no trigger is active: then the query is stopped between batches
(spark_runtime/watch.py).

This package (`spark_runtime`) is what a generated program imports, and all it imports: pyspark,
pandas, pyarrow, numpy and kit's records, output-log names, errors and wire. So a program runs, and ships to
Spark's executors, without the harness or the rest of cepkit.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence


from kit.errors import CepkitError
from kit.wire.feed_client import DriverClient
from kit.wire.sink_client import SinkClient
from runtime_common.events import emit, one_line
from runtime_common.program_args import conf_pairs, host_port, program_secret
from runtime_common.outputs import STREAM_COLUMN, split_streams
from spark_runtime.realtime import (CONNECTORS, TRIGGERS, jvm_classes_present, jvm_feed_stream, jvm_sink_query,
                                    jvm_writer_refuses, realtime_query)
from spark_runtime.source import driver_stream
from spark_runtime.watch import Restarter, watch

STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
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
    ap.add_argument("--trigger", choices=TRIGGERS, default="micro-batch",
                    help="micro-batch (default), or Spark's real-time mode (spark_runtime/realtime.py)")
    ap.add_argument("--realtime-batch-ms", type=int, default=5000,
                    help="real-time mode: how long each batch runs (how often the query checkpoints)")
    ap.add_argument("--attempt", type=int, default=1,
                    help="the harness's attempt of this program (a restart's is 2, 3, ...): real-time mode's "
                         "writers tag their sends with it, so the sink tells a re-run batch's answers")
    ap.add_argument("--shuffle-partitions", type=int, default=2)
    ap.add_argument("--source-partitions", type=int, default=None,
                    help="offset ranges read in parallel per batch (default: the program's choice, else 1)")
    ap.add_argument("--max-rows-per-batch", type=int, default=None)
    ap.add_argument("--connectors", choices=CONNECTORS, default="jvm",
                    help="jvm (default): cepkit's JVM source and sink (spark_runtime/java) where the plan admits "
                         "them; python: the Python data source and every answer collected to the driver")
    ap.add_argument("--py-files", default=None, metavar="ZIP",
                    help="the engine's runtime as a zip, shipped to the executors (they need no cepkit installed)")
    return ap


# Checkpoint writing (specs/ENGINE_RUN.md, "Spark settings"). Spark's default file manager goes
# through Hadoop's FileContext, whose rename asks the local file system for a link status, which
# Hadoop answers by running `readlink` in a child process when its native library is absent: two
# processes per file, several files per micro-batch (offsets, commits, one state changelog per
# partition), ~30 ms of every batch on these machines. The FileSystem-based manager renames
# without it. The RocksDB store writes a changelog per batch and uploads snapshots in the
# background instead of creating and uploading a checkpoint in every commit.
CHECKPOINT_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # Stream-stream joins (keyed all-all patterns) keep each side's rows by (key, event time) with a
    # time index, so evicting what the watermark passed reads only the evicted rows, and a match
    # scans only its key's rows within the interval; the older formats scan the whole state every
    # batch (Spark 4.3's format 4, RocksDB only; a new checkpoint per run, so no format mix).
    "spark.sql.streaming.join.stateFormatVersion": "4",
}
# Settings whose values are lists of JVM flags: layers add to them instead of replacing them.
JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def merge_conf(*layers: Mapping[str, str]) -> dict[str, str]:
    """Spark settings, later layers winning (defaults, the program's, the harness's --conf), except
    JVM flags, which are joined in layer order (the JVM takes the last of a repeated flag)."""
    out: dict[str, str] = {}
    for layer in layers:
        for key, value in layer.items():
            value = str(value)
            out[key] = f"{out[key]} {value}" if key in JAVA_OPTIONS and out.get(key) else value
    return out


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
    conf = merge_conf({"spark.sql.streaming.stateStore.providerClass": STATE_STORE,
                       "spark.sql.shuffle.partitions": str(shuffle_partitions),
                       "spark.ui.enabled": "false",
                       "spark.ui.showConsoleProgress": "false",     # progress bars would clutter engine.log
                       "spark.sql.execution.arrow.pyspark.enabled": "true",
                       **CHECKPOINT_CONF}, spark_conf or {}, overrides)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _check_build_result(result) -> tuple[object, dict[str, list[str]], object]:
    if not (isinstance(result, tuple) and len(result) in (2, 3) and isinstance(result[1], Mapping)):
        raise CepkitError("build(spark, events) must return (DataFrame, {stream: [columns]}[, stage])")
    df, streams = result[:2]
    stage = result[2] if len(result) == 3 else None
    if stage is not None and not (callable(stage) and callable(getattr(stage, "open", None))):
        raise CepkitError("build(): the third element must be a batch stage (open(checkpoint), (batch_id, table) -> table)")
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
    return df, streams, stage


def _has_python(df) -> bool:
    """Whether the query's plan runs Python in the executors (a pandas UDF, mapInPandas,
    transformWithStateInPandas): their workers are started before the run, as for the Python source."""
    try:
        plan = df._jdf.queryExecution().analyzed().toString()
    except Exception:  # noqa: BLE001 - no plan to read: start the workers anyway
        return True
    return any(word in plan for word in ("Python", "Pandas", "ArrowEval", "MapInArrow"))


class _StopRequested(BaseException):
    """SIGTERM/SIGINT before the query runs (BaseException: no `except Exception` swallows it)."""


def _warm_worker(batches):
    importlib.import_module("spark_runtime.source")     # the source's read runs in these workers next

    yield from batches


def warm_up(spark) -> None:
    """Start Spark's Python workers (one per core) and import the source in them, so the first
    micro-batch of the run does not pay for it (seconds on a small machine)."""
    n = max(1, spark.sparkContext.defaultParallelism)
    spark.range(0, n, 1, n).mapInArrow(_warm_worker, "id long").collect()


class _Batches:
    """The foreachBatch function: sends each stream's rows of a batch to the sink, and times the
    two halves of Spark's addBatch: `collect` (running the batch's plan, the queries' operators and
    Python cores included, and bringing its rows to the driver as Arrow) and `sink` (handing them
    to the harness). A batch stage (build's optional third result) turns the collected table into
    the output rows first, on the driver; its time is part of `collect`."""

    def __init__(self, sink: SinkClient, streams: Mapping[str, Sequence[str]], stage=None):
        self.sink, self.streams, self.stage = sink, streams, stage
        self.count = 0
        self.rows = 0
        self._lock = threading.Lock()
        self._timings: dict[int, dict] = {}

    def __call__(self, batch_df, batch_id: int) -> None:
        t0 = time.perf_counter()
        table = batch_df.toArrow()
        if self.stage is not None:
            table = self.stage(batch_id, table)
        t1 = time.perf_counter()
        for name, part in split_streams(table, self.streams).items():
            self.sink.emit(name, batch_id, part)
            self.rows += part.num_rows
        t2 = time.perf_counter()
        with self._lock:
            self._timings[batch_id] = {"collect": round((t1 - t0) * 1000), "sink": round((t2 - t1) * 1000),
                                       "output_rows": table.num_rows}
            figures = getattr(self.stage, "state_figures", None)
            if figures:         # like a stateful operator's: operatorName, memoryUsedBytes, commitTimeMs
                self._timings[batch_id]["state"] = [dict(figures)]
        self.count += 1

    def timings(self, batch_id: int) -> dict:
        """The foreachBatch figures of a batch (once: they are forgotten after)."""
        with self._lock:
            return self._timings.pop(batch_id, {})


def run_app(build: Callable, *, app_name: str, spark_conf: Mapping[str, str] | None = None,
            argv: Sequence[str] | None = None, transform: Callable | None = None,
            source_partitions: Callable | None = None, realtime_build: Callable | None = None,
            work: Mapping | None = None) -> int:
    """Run an engine program until the driver's events are all processed; 0 on success.

    `spark_conf` are the program's own Spark settings (the harness's --conf wins, JVM flags are
    joined). `transform(spark)`, when given, returns a partition transform for the source (or
    None): the stream `build` gets is then its rows (spark_runtime/source.py).
    `source_partitions(spark)` is the program's default for --source-partitions (else 1).
    `realtime_build(spark, events)`: the plan in real-time mode (--trigger realtime) when it
    differs from `build`'s: it gets the feed's events themselves (no transform). `work`: where the
    program's per-event work runs, reported in `started` as it is ({"family": run.work, "queries":
    {query id: its plan in words}}; specs/TRANSLATION.md, "Plan families")."""
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
        driver_host, driver_port = host_port("--driver", args.driver)
        sink_host, sink_port = host_port("--sink", args.sink)
        overrides = conf_pairs(args.conf)
        secret = program_secret()         # from the environment, once; every client below presents it
        if args.trigger_ms < 0 or args.shuffle_partitions < 1 or (args.source_partitions or 1) < 1:
            raise CepkitError("--trigger-ms must be >= 0, --shuffle-partitions and --source-partitions >= 1")
        realtime = args.trigger == "realtime"
        if realtime and args.realtime_batch_ms < 1:
            raise CepkitError("--realtime-batch-ms must be >= 1")
        if realtime and transform is not None and realtime_build is None:
            raise CepkitError("--trigger realtime: this program reduces its source's partitions in Python, which "
                              "real-time mode does not allow")
        if realtime and realtime_build is not None:
            build, transform = realtime_build, None
    except CepkitError as e:
        emit("failed", message=str(e))
        print(f"cepkit engine program: error: {e}", file=sys.stderr, flush=True)
        return 2

    spark = restarter = None
    pause_file = os.path.join(tempfile.gettempdir(), f"cepkit-pause-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        marks = [("begin", time.perf_counter())]     # where startup goes: the `started` event's startup_ms
        spark = build_session(app_name, args.master, args.shuffle_partitions, spark_conf, overrides)
        marks.append(("session", time.perf_counter()))
        if args.py_files and not _under_spark_submit():     # spark-submit --py-files already shipped it
            spark.sparkContext.addPyFile(args.py_files)
        # SparkContext installs its own SIGINT handler (cancel jobs, raise KeyboardInterrupt);
        # ours stops the query between batches instead.
        install_handlers()
        # Where events enter and answers leave (specs/ENGINE_RUN.md, "Connectors"): the JVM source
        # unless the plan hands whole offset ranges to Python (a partition transform), the JVM
        # writer on the executors unless a batch stage runs on the driver; the kit's Python ones
        # when asked (--connectors python) or when the runtime jar is missing, and the plan says so.
        jvm = realtime or (args.connectors == "jvm" and jvm_classes_present(spark))
        connectors = {"source": "python", "sink": "driver-collect", "why": []}
        # Offset ranges read in parallel per batch: the run's, else the program's, else one per
        # core for the JVM source (a reader is a task, no Python worker) and one for the Python one.
        own = source_partitions(spark) if source_partitions else None
        default = spark.sparkContext.defaultParallelism if jvm and transform is None else 1
        partitions = args.source_partitions or own or default
        options = {"partitions": partitions, "pauseFile": pause_file}
        if args.max_rows_per_batch:
            options["maxRowsPerBatch"] = args.max_rows_per_batch
        if realtime:
            if not jvm_classes_present(spark):
                raise CepkitError("--trigger realtime needs cepkit's Spark runtime jar on the class path "
                                  "(scripts/setup.sh builds it: python -m harness.runtime_jar)")
            # One partition: a real-time batch's reader follows the driver's one order (realtime.py).
            events = jvm_feed_stream(spark, driver_host, driver_port, secret=secret, partitions=1)
            connectors["source"] = "jvm"
        elif jvm and transform is None:
            events = jvm_feed_stream(spark, driver_host, driver_port, secret=secret, **options)
            connectors["source"] = "jvm"
        else:
            events = driver_stream(spark, driver_host, driver_port,
                                   transform=transform(spark) if transform is not None else None, secret=secret,
                                   **options)
            connectors["why"].append("--connectors python" if args.connectors == "python" else
                                     "the runtime jar is not on the class path" if not jvm else
                                     "the plan reduces each offset range in the source's Python worker")
        df, streams, stage = _check_build_result(build(spark, events))
        if realtime and stage is not None:
            raise CepkitError("--trigger realtime: this program runs stateful cores on Spark's driver once per "
                              "micro-batch, which real-time mode does not allow")
        if stage is not None:
            stage.open(args.checkpoint)
        marks.append(("build", time.perf_counter()))
        refused = jvm_writer_refuses(spark, df, streams) if jvm and stage is None else None
        name = re.sub(r"\W+", "_", app_name)[:60] or "cepkit"
        if realtime:
            batches, restarter = realtime_query(spark, df, streams, driver=(driver_host, driver_port),
                                                sink=(sink_host, sink_port), secret=secret,
                                                checkpoint=args.checkpoint, batch_ms=args.realtime_batch_ms,
                                                name=app_name, attempt=args.attempt)
            connectors["sink"] = "jvm"
            marks.append(("warm_up", time.perf_counter()))      # no Python workers to start
        elif jvm and stage is None and refused is None:
            batches, restarter = jvm_sink_query(spark, df, streams, sink=(sink_host, sink_port), secret=secret,
                                                checkpoint=args.checkpoint, trigger_ms=args.trigger_ms, name=app_name,
                                                attempt=args.attempt)
            connectors["sink"] = "jvm"
            if connectors["source"] == "python" or _has_python(df):
                warm_up(spark)
            marks.append(("warm_up", time.perf_counter()))
        else:
            if jvm:
                connectors["why"].append("a batch stage runs on the driver" if stage is not None else refused)
            sink = SinkClient(sink_host, sink_port, secret=secret)
            batches = _Batches(sink, streams, stage)
            warm_up(spark)
            marks.append(("warm_up", time.perf_counter()))

            def start():
                return (df.writeStream.foreachBatch(batches)
                        .option("checkpointLocation", args.checkpoint)
                        .trigger(processingTime=f"{args.trigger_ms} milliseconds")
                        .queryName(name)
                        .start())

            restarter = Restarter(spark, start)
        restarter.launch()
        marks.append(("query_start", time.perf_counter()))
        running.set()
        if stop_requested.is_set():
            raise _StopRequested()
        query = restarter.query
        emit("started", spark_version=spark.version, query_id=str(query.id), run_id=str(query.runId),
              trigger=args.trigger, connectors={**connectors, "why": "; ".join(connectors["why"]) or None},
              pid=os.getpid(), app_id=spark.sparkContext.applicationId, master=spark.sparkContext.master,
              streams=streams, startup_ms={name: round((t - before) * 1000)
                                           for (_, before), (name, t) in zip(marks, marks[1:])},
              **({"work": dict(work)} if work else {}))
        return watch(restarter, batches, DriverClient(driver_host, driver_port, secret=secret), stop_requested,
                     pause_file)
    except _StopRequested:
        running.set()       # a second signal must not interrupt the cleanup below
        if restarter is not None:
            restarter.stop(pause_file)
        emit("stopped", batches=0, output_rows=0)
        return 0
    except Exception as e:  # noqa: BLE001 - reported as one line on stdout, in full on stderr
        emit("failed", message=one_line(str(e)) if not isinstance(e, CepkitError) else str(e))
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
