"""The runtime every generated PyFlink engine program calls: `run_app(build, app_name=...)`.

A program defines `build(job)` and ends with `raise SystemExit(run_app(build, app_name="..."))`.
`run_app` parses the harness's arguments (the same as a Spark program's, specs/ENGINES.md), starts
Flink's local mini-cluster through PyFlink with event time, checkpoints into `--checkpoint`, and
hands `build` a `FlinkJob`: `job.feed()` is the harness's events as a DataStream pulled by Python
(flink_runtime/feed.py), `job.jvm_feed()` the same read in the JVM (flink_runtime/jvm.py),
`job.tables` the StreamTableEnvironment, `job.output(table)` sends a Table's rows to the harness
sink (flink_runtime/emitter.py; with `jvm=True` from the JVM). `build` returns the stream map
`{stream: [columns]}`. The job is submitted asynchronously; stdout gets the same JSON lines as
from a Spark program (`started`, `progress`, `finished` / `stopped` / `failed`).

The end of a run. A Flink streaming job over an unbounded feed never ends by itself, and ending
its input would make Flink fire every open window (end of input is a final watermark), which the
semantics forbid (specs/SEMANTICS.md: nothing is emitted at the end of the input). So: once the
driver has released every event and the feed has pulled them all, the program takes a savepoint:
its barrier follows the last event through every operator, so when it completes every operator
has processed every event. The watermark that the last event raises is emitted by the periodic
watermark generator up to `pipeline.auto-watermark-interval` later, possibly behind that barrier,
so a second savepoint, taken after that interval, completes only when the last watermark (and
every window or pattern it fired) has gone through too. Then the emitters' last rows are flushed,
and the program prints `finished` and cancels the job.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence

from kit.errors import CepkitError
from kit.wire.feed_client import DriverClient
from kit.wire.sink_client import SinkClient
from runtime_common.events import emit, one_line
from runtime_common.program_args import conf_pairs, host_port, program_secret

POLL_S = 0.2
PROGRESS_S = 1.0
# How often the program asks the JobManager for completed checkpoints, and for its metrics.
CHECKPOINT_POLL_S = 1.0
METRICS_S = 2.0
# The periodic watermark generator's interval (ms): the end of a run waits this long twice.
WATERMARK_INTERVAL_MS = 20
# Flink settings every program gets (the program's own and the harness's --conf come after).
FLINK_CONF = {
    # Network buffers leave a task when full or after this long (Flink's default, 100 ms, per
    # exchange: the feed's job has three or four exchanges, which made a 400 ms median latency).
    "execution.buffer-timeout.interval": "5 ms",
    # Python operators hand their results to the JVM per bundle: small bundles, low latency.
    "python.fn-execution.bundle.size": "1000",
    "python.fn-execution.bundle.time": "10",
    "pipeline.auto-watermark-interval": f"{WATERMARK_INTERVAL_MS} ms",
    "execution.checkpointing.interval": "10 s",
    "execution.checkpointing.mode": "EXACTLY_ONCE",
    # A restarted program restores the newest checkpoint the harness heard of, which may be one
    # behind the newest: keep a few, and keep them when the job is cancelled.
    "execution.checkpointing.num-retained": "3",
    "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
    "state.backend.type": "hashmap",
    "rest.bind-address": "127.0.0.1",
    "taskmanager.memory.process.size": "2g",
    # The REST API's metrics are refreshed this often (Flink's default, 10 s, left four samples in
    # five of flink_metrics repeating the previous figures).
    "metrics.fetcher.update-interval": "1 s",
}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="a cepkit engine program (Apache Flink through PyFlink)")
    ap.add_argument("--driver", required=True, metavar="HOST:PORT", help="the cepkit driver to pull events from")
    ap.add_argument("--sink", required=True, metavar="HOST:PORT", help="the harness sink to send outputs to")
    ap.add_argument("--checkpoint", required=True, metavar="DIR", help="the job's checkpoint directory")
    ap.add_argument("--master", default="local[*]",
                    help="local[N]: Flink's local mini-cluster with parallelism N (local[*]: one per core)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Flink setting (repeatable)")
    # Accepted so the harness starts every engine's program alike; Flink has no micro-batches.
    ap.add_argument("--trigger-ms", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--shuffle-partitions", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--source-partitions", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--max-rows-per-batch", type=int, default=65536, help="most events the feed reads at once")
    ap.add_argument("--py-files", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--connectors", choices=("jvm", "python"), default="jvm",
                    help="jvm: cepkit's JVM source and sink where the plan admits them; python: the Python "
                         "puller and emitter (kit.config.CONNECTORS)")
    ap.add_argument("--restore", default=None, metavar="DIR",
                    help="restore the job from this completed checkpoint (a chk-N directory) before it starts")
    ap.add_argument("--attempt", type=int, default=1,
                    help="which start of the program this is (1, 2 after a restart, ...): the sink epoch of its sends")
    return ap


def parallelism_of(master: str) -> int:
    """local[N] -> N, local[*] / local -> the machine's cores; flink://HOST:PORT (a Flink standalone
    cluster's JobManager, flink_runtime/remote.py) -> the cluster's task slots, asked of its REST API."""
    from flink_runtime.remote import cluster_slots, is_remote

    if is_remote(master):
        return cluster_slots(master)
    if master in ("local", "local[*]"):
        return os.cpu_count() or 1
    if master.startswith("local[") and master.endswith("]") and master[6:-1].isdigit() and int(master[6:-1]) > 0:
        return int(master[6:-1])
    raise CepkitError(f"--master: the Flink runtime runs Flink's local mini-cluster (local[N] or local[*]) or "
                      f"a Flink cluster (flink://HOST:PORT), got {master!r}")


class FlinkJob:
    """What `build` gets: the environments, the feed and the outputs of one job."""

    def __init__(self, env, tables, driver: tuple[str, int], sink: tuple[str, int], parallelism: int,
                 max_rows: int, attempt: int = 1, secret: str | None = None, source_partitions: int | None = None,
                 connectors: str = "jvm"):
        self.env, self.tables, self.driver, self.sink = env, tables, driver, sink
        self.parallelism, self.max_rows, self.attempt = parallelism, max_rows, attempt
        # The JVM feed's splits (flink_runtime/jvm.py): run.source_partitions, one by default.
        self.source_partitions = source_partitions or 1
        self.connectors = connectors        # "jvm", or "python" to measure the kit's Python feed and emitter
        # What the job was built with (the `started` event's `connectors`, run.json's plan): where
        # events enter (jvm | python) and answers leave, and why Python where it is.
        self.source_used: str | None = None
        self.sink_used: str | None = None
        self.why: list[str] = []
        # Where the per-event work runs (the `started` event's `work`, run.json's plan): {"family":
        # run.work, "queries": {query id or "pairs": its plan in words}}, set by `build`.
        self.work: dict | None = None
        # The run's secret: every Python function that talks to the feed or the sink carries it in
        # its pickled state (a cluster's TaskManagers do not have the program's environment).
        self.secret = secret
        self.client = DriverClient(*driver, secret=secret)

    def connectors_used(self) -> dict:
        """{source, sink, why} of the built job: Python unless the JVM feed or sink was used (the Pairs
        and Python queries' functions send their answers themselves)."""
        return {"source": self.source_used or "python", "sink": self.sink_used or "python",
                "why": "; ".join(dict.fromkeys(self.why)) or None}

    @property
    def max_parallelism(self) -> int:
        """The job's number of key groups: set, or Flink's default for its parallelism."""
        configured = self.env.get_max_parallelism()
        if configured and configured > 0:
            return int(configured)
        from pyflink.java_gateway import get_gateway

        kg = get_gateway().jvm.org.apache.flink.runtime.state.KeyGroupRangeAssignment
        return int(kg.computeDefaultMaxParallelism(self.parallelism))

    def feed(self, transform=None, interval_ms: int | None = None):
        """The harness's events as a DataStream, read every `interval_ms` (flink_runtime/feed.py)."""
        from flink_runtime.feed import POLL_MS, feed_stream

        self.source_used = "python"
        return feed_stream(self.tables, *self.driver, self.client.schema, transform, self.max_rows,
                           POLL_MS if interval_ms is None else interval_ms, secret=self.secret)

    def jvm_feed(self, constants: Sequence[tuple[str, str]] = ()):
        """The harness's events as a DataStream read in the JVM, with `constants` columns appended and
        the source's watermarks (flink_runtime/jvm.py)."""
        from flink_runtime.jvm import feed_stream

        self.source_used = "jvm"
        return feed_stream(self, list(constants), self.source_partitions)

    def output(self, table, streams: Mapping[str, Sequence[str]], jvm: bool = False) -> None:
        """Send a Table's rows (a `stream` column and the streams' columns) to the harness sink: from a
        Python emitter (flink_runtime/emitter.py), or with `jvm` from the JVM (flink_runtime/jvm.py)."""
        from pyflink.common import Types

        if jvm:
            from flink_runtime.jvm import sink_to_harness

            sink_to_harness(self, table, {k: list(v) for k, v in streams.items()})
            self.sink_used = self.sink_used or "jvm"
            return
        self.sink_used = "python"

        from flink_runtime.emitter import RowEmitter
        from flink_runtime.tables import logical_columns

        types = logical_columns(table)
        schemas = {name: [(c, types[c]) for c in cols] for name, cols in streams.items()}
        (self.tables.to_data_stream(table)
            .flat_map(RowEmitter(*self.sink, dict(streams), schemas, self.attempt, secret=self.secret),
                      output_type=Types.INT())
            .name("cepkit sink: " + ", ".join(streams)))


def make_job(args, flink_conf: Mapping[str, str] | None):
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import EnvironmentSettings, StreamTableEnvironment

    from flink_runtime.remote import (cluster_slots, is_remote, parallelism_setting, remote_environment,
                                      remote_settings)

    given = {**(flink_conf or {}), **conf_pairs(args.conf)}
    remote = is_remote(args.master)
    # On a cluster: `parallelism.default` if set, else every task slot it has; locally: local[N].
    parallelism = (parallelism_setting(given) or cluster_slots(args.master)) if remote else parallelism_of(args.master)
    checkpoint = args.checkpoint if "://" in args.checkpoint else "file://" + os.path.abspath(args.checkpoint)
    conf = Configuration()
    # The TaskManagers' Python workers run this interpreter too (a cluster on this machine).
    settings = {**FLINK_CONF, "execution.checkpointing.dir": checkpoint,
                "execution.checkpointing.savepoint-dir": checkpoint.rstrip("/") + "/savepoints",
                "python.executable": sys.executable, "python.client.executable": sys.executable,
                **(remote_settings(args.master, args.py_files) if remote else {}), **given}
    for key, value in settings.items():
        conf.set_string(key, str(value))
    env = remote_environment(conf) if remote else StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    from flink_runtime.jvm import add_runtime_jar

    add_runtime_jar(env)        # the JVM feed and sink, when the harness gave the jar
    tables = StreamTableEnvironment.create(env, EnvironmentSettings.in_streaming_mode())
    tables.get_config().set("table.local-time-zone", "UTC")
    return env, tables, parallelism, settings


class _StopRequested(BaseException):
    """SIGTERM/SIGINT (BaseException: no `except Exception` swallows it)."""


def _job_failed(client) -> str | None:
    status = str(client.get_job_status().result())
    if status.endswith("FAILED"):
        try:
            client.get_job_execution_result().result()
        except Exception as e:  # noqa: BLE001 - the failure is what we report
            return one_line(str(e))
        return "the Flink job failed"
    if status.endswith(("CANCELED", "FINISHED")):
        return f"the Flink job ended by itself ({status.rsplit('.', 1)[-1]})"
    return None


def _savepoint(client, directory: str) -> None:
    """A savepoint of the job, waited for (Flink's native format: the quickest to take)."""
    from pyflink.java_gateway import get_gateway

    native = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.NATIVE
    client._j_job_client.triggerSavepoint(directory, native).get()


def _sink_rows(sink: tuple[str, int], secret: str | None) -> int:
    with SinkClient(*sink, secret=secret) as client:
        return int(client.stats()["total_rows"])


class _Checkpoints:
    """The job's completed checkpoints, followed through the JobManager's REST API: each is printed
    as a `checkpoint` event (the harness restarts a dead program from the newest, and its sink
    forgets the answers sent before it) and commits the feed's reads it covers: those the driver
    answered before the checkpoint was triggered, since the job started or was last restored
    (specs/DRIVER.md, `commit` by time)."""

    def __init__(self, rest: str | None, job_id: str, driver: DriverClient, started_ms: int):
        self.rest, self.job_id, self.driver, self.started_ms = rest, job_id, driver, started_ms
        self.last_id: int | None = None
        self.restored_ms: int | None = None      # when Flink last restored the job (REST), if ever
        self.next_poll = 0.0
        self.metrics = None
        self.next_metrics = 0.0
        if rest is not None:
            from flink_runtime.metrics import MetricsPoller

            self.metrics = MetricsPoller(rest, job_id)

    def poll(self, now: float) -> None:
        if self.rest is None:
            return
        from flink_runtime.rest import RestError, latest_checkpoint

        if now >= self.next_poll:
            self.next_poll = now + CHECKPOINT_POLL_S
            try:
                done, restored_ms = latest_checkpoint(self.rest, self.job_id)
                self.restored_ms = restored_ms or self.restored_ms
            except RestError:
                done = None             # asked again next time; a dead job is seen by _job_failed
            if done is not None and done["id"] != self.last_id:
                self.last_id = done["id"]
                after = max(self.started_ms, restored_ms or 0)
                committed = self.driver.commit_reads(done["trigger_ts_ms"], after)
                emit("checkpoint", **done, committed=committed)
        if self.metrics is not None and now >= self.next_metrics:
            self.next_metrics = now + METRICS_S
            try:
                emit("flink_metrics", ts_ms=time.time_ns() // 1_000_000, **self.metrics.poll())
            except Exception:  # noqa: BLE001 - metrics are a report, never a reason to fail the run
                pass


def _watch(client, driver: DriverClient, sink, stop: threading.Event, savepoints: str,
           checkpoints: _Checkpoints, secret: str | None = None) -> int:
    """Follow the job until every event is through it (see the module doc); returns the exit code."""
    last_progress, polls = 0.0, 0
    while not stop.wait(POLL_S):
        failed = _job_failed(client)
        if failed:
            emit("failed", message=failed)
            return 1
        stats = driver.stats()
        now = time.monotonic()
        checkpoints.poll(now)
        if now - last_progress >= PROGRESS_S:
            emit("progress", batch_id=polls, end_offset=stats["pulled"], duration_ms=0, input_rows=stats["pulled"])
            last_progress, polls = now, polls + 1
        if stats["finished"] and stats["pulled"] >= stats["total_events"] and _read_all(driver, checkpoints,
                                                                                       stats["total_events"]):
            restored = checkpoints.restored_ms
            try:
                for _ in range(2):
                    time.sleep(2 * WATERMARK_INTERVAL_MS / 1000.0)
                    _savepoint(client, savepoints)
            except Exception as e:  # noqa: BLE001 - Flink is restoring the job (a lost TaskManager)
                if _job_failed(client) is None:
                    emit("note", message=f"the closing savepoint failed while Flink restores the job: "
                                         f"{one_line(str(e))[:200]}; waiting for the restored job")
                    continue
                raise
            checkpoints.poll(time.monotonic() + CHECKPOINT_POLL_S)
            if checkpoints.restored_ms != restored:
                continue        # restored meanwhile: the restored job reads the rest again first
            time.sleep(0.2)      # the emitters' flush threads hand over their last rows
            # No micro-batches in Flink: `batches` is left out (specs/ENGINES.md).
            emit("finished", batches=None, output_rows=_sink_rows(sink, secret), end_offset=stats["pulled"],
                 last_batch_id=None)
            return 0
    raise _StopRequested()


def _read_all(driver: DriverClient, checkpoints: _Checkpoints, total: int) -> bool:
    """Whether the job has read every event since Flink last restored it (always, if never)."""
    checkpoints.poll(time.monotonic() + CHECKPOINT_POLL_S)       # the restore time, fresh
    if checkpoints.restored_ms is None:
        return True
    return driver.read_end_since(checkpoints.restored_ms) >= total


def run_app(build: Callable, *, app_name: str, flink_conf: Mapping[str, str] | None = None,
            argv: Sequence[str] | None = None) -> int:
    """Run an engine program until the driver's events are all processed; 0 on success."""
    args = _parser().parse_args(argv)
    stop = threading.Event()
    running = threading.Event()

    def on_signal(signum, _frame):
        stop.set()
        if not running.is_set():
            raise _StopRequested()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        driver = host_port("--driver", args.driver)
        sink = host_port("--sink", args.sink)
        parallelism_of(args.master)
        conf_pairs(args.conf)
        secret = program_secret()         # from the environment, once (runtime_common/program_args.py)
    except CepkitError as e:
        emit("failed", message=str(e))
        print(f"cepkit engine program: error: {e}", file=sys.stderr, flush=True)
        return 2

    client = None
    if args.restore:
        # A restarted program: its job starts from the given checkpoint's state (the feed's offset
        # included, flink_runtime/feed.py).
        flink_conf = {**(flink_conf or {}), "execution.state-recovery.path": args.restore}
    try:
        env, tables, parallelism, settings = make_job(args, flink_conf)
        job = FlinkJob(env, tables, driver, sink, parallelism, args.max_rows_per_batch, args.attempt, secret,
                       args.source_partitions, args.connectors)
        streams = build(job)
        if not isinstance(streams, Mapping) or not streams:
            raise CepkitError("build(job) must return the stream map {stream: [columns]}")
        submitted_ms = time.time_ns() // 1_000_000
        asked = job.client.stats()["offset_requests"]     # a restarted program's driver was asked before
        client = env.execute_async(app_name)
        # Started once the feed's puller has asked the driver for offsets: the job runs.
        while job.client.stats()["offset_requests"] == asked:
            failed = _job_failed(client)
            if failed:
                raise CepkitError(failed)
            time.sleep(0.05)
        running.set()
        if stop.is_set():
            raise _StopRequested()
        from pyflink.version import __version__ as flink_version

        from flink_runtime.rest import rest_url

        job_id = str(client.get_job_id())
        rest = rest_url(client)
        emit("started", flink_version=flink_version, engine="flink", query_id=job_id, run_id=job_id,
             pid=os.getpid(), master=args.master, parallelism=parallelism, rest_url=rest,
             attempt=args.attempt, restored_from=args.restore, connectors=job.connectors_used(),
             work=job.work, streams={k: list(v) for k, v in streams.items()})
        return _watch(client, job.client, sink, stop, settings["execution.checkpointing.savepoint-dir"],
                      _Checkpoints(rest, job_id, job.client, submitted_ms), secret)
    except _StopRequested:
        running.set()
        emit("stopped", batches=0, output_rows=0)
        return 0
    except Exception as e:  # noqa: BLE001 - reported as one line on stdout, in full on stderr
        emit("failed", message=str(e) if isinstance(e, CepkitError) else one_line(str(e)))
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        return 1
    finally:
        if client is not None:
            try:
                client.cancel().result()
            except Exception:  # noqa: BLE001 - the job may be over already
                pass
