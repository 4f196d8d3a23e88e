"""Spark's real-time mode for a generated program: the feed read in the JVM, the output written from the JVM.

Real-time mode (Spark 4.1+, `trigger(realTime=...)`) runs each batch as long-running tasks that
process events as they arrive, instead of one short job per micro-batch. It admits neither a
Python data source nor Python in the query nor foreachBatch, so a program in this mode reads the
feed with the JVM source `cepkit.spark.FeedSource` (format `cepkit_feed`) and writes through the
JVM foreach writer `cepkit.spark.SinkWriter`, both in spark_runtime/java/, compiled into cepkit's
runtime jar by the setup script (harness/runtime_jar.py), which the harness puts on the engine's
class path. Every operator between them must be one real-time mode allows
(specs/TRANSLATION.md, "Real-time mode"); the translators refuse the rest.

A batch's length (`batch_ms`) is how often the query checkpoints, not a latency: events flow
through a batch's tasks as they are released. The query's end offset advances, and a finished run
is recognised, only when a batch ends (spark_runtime/watch.py).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Mapping, Sequence

from runtime_common.events import emit

FORMAT = "cepkit_feed"
SOURCE_CLASS = "cepkit.spark.FeedSource"
WRITER_CLASS = "cepkit.spark.SinkWriter"
TRIGGERS = ("micro-batch", "realtime")
# How events enter and answers leave (kit.config.CONNECTORS, which this package may not import).
CONNECTORS = ("jvm", "python")
MIN_BATCH_KEY = "spark.sql.streaming.realTimeMode.minBatchDuration"


def _jvm_class(jvm, name: str):
    """A JVM class through py4j's view, one package step at a time."""
    return functools.reduce(getattr, name.split("."), jvm)


def jvm_classes_present(spark) -> bool:
    """Whether the runtime jar is on the driver's class path."""
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(SOURCE_CLASS)
        return True
    except Exception:  # noqa: BLE001 - py4j raises its own error for a missing class
        return False


def cap_shuffle_partitions(spark) -> int:
    """Cap the shuffle partitions of a stateful real-time plan to the task slots the source leaves
    (each holds its slot for the whole batch: one for the source, one per shuffle partition) and
    return the number set."""
    slots = spark.sparkContext.defaultParallelism
    partitions = max(1, min(int(spark.conf.get("spark.sql.shuffle.partitions")), slots - 1))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return partitions


def jvm_feed_stream(spark, host: str, port: int, secret: str | None = None, **options):
    """The streaming DataFrame of the driver's events, read by the JVM source: the same columns
    and offsets as spark_runtime/source.py's (the driver's columns, then offset and ingestTS)."""
    opts = {"host": host, "port": str(int(port)), **{k: str(v) for k, v in options.items()},
            **({"secret": secret} if secret else {})}
    return spark.readStream.format(SOURCE_CLASS).options(**opts).load()


def start_jvm_writer(df, streams: Mapping[str, Sequence[str]], *, sink_host: str, sink_port: int,
                     secret: str | None, checkpoint: str, name: str, tag: str, trigger: dict, output_mode: str):
    """Start `df` as a query whose rows go to the harness sink from the executors, through the JVM
    foreach writer (never through the driver); returns the (PySpark) StreamingQuery. `trigger`:
    DataStreamWriter.trigger's keyword (realTime=... or processingTime=...)."""
    spark = df.sparkSession
    jvm = spark.sparkContext._jvm
    writer = _jvm_class(jvm, WRITER_CLASS)(sink_host, int(sink_port), secret, df.schema.json(),
                                        json.dumps({k: list(v) for k, v in streams.items()}), tag)
    dsw = (df.writeStream.outputMode(output_mode).option("checkpointLocation", checkpoint)
           .trigger(**trigger)
           .queryName(re.sub(r"\W+", "_", name)[:60] or "cepkit"))
    # PySpark's foreach() takes Python writers only; the JVM writer goes onto the JVM's builder.
    dsw._jwrite = dsw._jwrite.foreach(writer)
    return dsw.start()


def jvm_writer_refuses(spark, df, streams: Mapping[str, Sequence[str]]) -> str | None:
    """None when the JVM writer can send `df`'s output streams; else why not (a column type it
    does not take). Building the writer checks the columns and connects nowhere."""
    try:
        _jvm_class(spark.sparkContext._jvm, WRITER_CLASS)("127.0.0.1", 1, None, df.schema.json(),
                                                        json.dumps({k: list(v) for k, v in streams.items()}), "0")
        return None
    except Exception as e:  # noqa: BLE001 - py4j wraps the writer's IllegalArgumentException
        text = str(e)
        at = text.find("cepkit sink:")
        return text[at:].splitlines()[0] if at >= 0 else text.splitlines()[0]


def start_realtime(df, streams: Mapping[str, Sequence[str]], *, sink_host: str, sink_port: int,
                   secret: str | None, checkpoint: str, batch_ms: int, name: str, tag: str):
    """Start `df` as a real-time query whose rows go to the harness sink through the JVM writer;
    returns the (PySpark) StreamingQuery."""
    spark = df.sparkSession
    # Spark refuses batches shorter than this setting (5 s by default); the batch length is the
    # run's choice (run.realtime_batch_ms), so the floor is set to it.
    spark.conf.set(MIN_BATCH_KEY, f"{int(batch_ms)}ms")
    # A stateful real-time query re-runs a failed batch; state checkpoint format 2 names each
    # batch's state files apart, so a re-run cannot reuse a failed attempt's (Spark refuses 1).
    spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
    return start_jvm_writer(df, streams, sink_host=sink_host, sink_port=sink_port, secret=secret,
                            checkpoint=checkpoint, name=name, tag=tag,
                            trigger={"realTime": f"{int(batch_ms)} milliseconds"}, output_mode="update")


def realtime_query(spark, df, streams: Mapping[str, Sequence[str]], *, driver: tuple[str, int],
                   sink: tuple[str, int], secret: str | None, checkpoint: str, batch_ms: int, name: str,
                   attempt: int = 1):
    """The output counter and the query's Restarter (spark_runtime/watch.py) of a real-time run:
    started when its first batch has ended and the next one's reader has asked the driver for
    events (spark_runtime/watch.py wait_driver_read).

    Each start of the query tags its writers' sends with a generation that orders every earlier
    one below it: `attempt` (the harness's attempt of this program) x 1000 + the query's starts in
    this program. A restarted query re-runs its last, uncommitted batch from that batch's start
    offset, and its writers send again the answers the dead batch had sent, cut into other emits;
    the sink's replay filter (harness/replay_filter.py) drops them by content, comparing a newer
    generation's rows with what older ones sent since the last committed batch ended (the
    `checkpoint` events RealTimeOutput prints)."""
    from kit.wire.feed_client import DriverClient
    from spark_runtime.watch import Restarter, wait_driver_read

    starts = 0

    def start():
        nonlocal starts
        starts += 1
        return start_realtime(df, streams, sink_host=sink[0], sink_port=sink[1], secret=secret, checkpoint=checkpoint,
                              batch_ms=batch_ms, name=name, tag=str(attempt * 1000 + starts))

    ready_client = DriverClient(driver[0], driver[1], secret=secret)
    return RealTimeOutput(spark), Restarter(spark, start, ready=lambda q: wait_driver_read(q, ready_client),
                                            realtime=True)


def jvm_sink_query(spark, df, streams: Mapping[str, Sequence[str]], *, sink: tuple[str, int], secret: str | None,
                   checkpoint: str, trigger_ms: int, name: str, attempt: int = 1):
    """The output counter and the query's Restarter of a micro-batch run whose answers leave from
    the executors through the JVM writer. Its sends carry generations as in real-time mode
    (`realtime_query`): a batch re-run after a restart, or a retried task, sends its answers again
    in other emits, which the sink's replay filter drops by content; each committed batch's end
    reaches the sink as a completed checkpoint."""
    from spark_runtime.watch import Restarter

    starts = 0

    def start():
        nonlocal starts
        starts += 1
        return start_jvm_writer(df, streams, sink_host=sink[0], sink_port=sink[1], secret=secret,
                                checkpoint=checkpoint, name=name, tag=str(attempt * 1000 + starts),
                                trigger={"processingTime": f"{int(trigger_ms)} milliseconds"}, output_mode="append")

    return RealTimeOutput(spark), Restarter(spark, start)


class RealTimeOutput:
    """What the watcher asks of a query's output when the JVM writer sends it (real-time mode, and
    micro-batches with the JVM sink; spark_runtime/app.py's `_Batches` when the driver collects
    it): the batches ended and the rows the JVM writer sent. Rows are the writers'
    count in the driver's JVM, which is every writer's on a local master."""

    def __init__(self, spark):
        self._writer = _jvm_class(spark.sparkContext._jvm, WRITER_CLASS)
        self._lock = threading.Lock()
        self.count = 0
        self.stage = None

    @property
    def rows(self) -> int:
        try:
            return int(self._writer.sentRows())
        except Exception:  # noqa: BLE001 - the JVM is gone: the count is unknown
            return -1

    def timings(self, batch_id: int) -> dict:
        with self._lock:
            self.count = max(self.count, batch_id + 1)
        return {}

    @staticmethod
    def batch_ended(record: dict) -> None:
        """A batch committed: what its writers sent is never sent again. Its end (the start of the
        next batch, whose answers a restart re-sends) reaches the harness's sink as a completed
        checkpoint, so the replay filter keeps only what was sent since."""
        if isinstance(record.get("ended_ms"), int):
            emit("checkpoint", trigger_ts_ms=record["ended_ms"], batch_id=record["batch_id"])
