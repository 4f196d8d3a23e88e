"""The JVM feed and sink of the Flink SQL queries: events in and answers out without Python.

`feed_stream(job, constants)` is the harness's feed as a DataStream of Rows read by the Java
source `cepkit.flink.FeedSource` (flink_runtime/java/cepkit/flink, compiled into cepkit's Flink
runtime jar by harness/flink_jar.py): the driver's columns, `offset` and `ingestTS` (as
flink_runtime/feed.py `event_fields`), then the `constants` columns, each Row stamped with its TS
and every split emitting its own watermark (flink_runtime/tables.py takes it with
SOURCE_WATERMARK()). `sink_to_harness(job, table, streams)` sends a Table's rows to the harness sink
through the Java Sink V2 `cepkit.flink.HarnessSink`, in Arrow batches, as flink_runtime/emitter.py
does from Python.

Both Java objects are built here, in the program's JVM, through py4j, with the run's secret as a
constructor argument: it travels inside the serialized job (Java serialization, never printed:
neither class names it in its toString), never in a Flink option or on a command line.

Splits: `--source-partitions K` (run.source_partitions) cuts the feed into K splits read by
min(K, parallelism) readers (specs/DRIVER.md, "Splits"); the default is one split, one reader, the
feed's order as the Python puller read it.

The jar: the harness hands its path to the program in `CEPKIT_FLINK_RUNTIME_JAR`; `add_runtime_jar`
adds it to the job (the program's class loader, and `pipeline.jars`, which ships it to a cluster's
TaskManagers through the blob server). A program that needs it without it fails at once, saying
how to build it.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa

from kit.errors import CepkitError

JAR_ENV = "CEPKIT_FLINK_RUNTIME_JAR"
# Offsets per block of a split (K > 1): split i reads the blocks b with b % K == i. Small enough
# that a split waiting for its next block holds the watermark back little (4,096 events are 4 ms
# at a million events per second), large enough that a read serves many events.
SPLIT_BLOCK = 4096
_LOGICAL = {pa.int32(): "int", pa.int64(): "long", pa.float64(): "double", pa.string(): "string",
            pa.large_string(): "string", pa.bool_(): "boolean"}


def runtime_jar(required: bool = False) -> str | None:
    """The Flink runtime jar's path from the environment; with `required`, a one-line CepkitError
    saying how to build it when there is none."""
    path = os.environ.get(JAR_ENV) or None
    if path is not None and os.path.isfile(path):
        return path
    if required:
        where = f" ({JAR_ENV}={path}: no such file)" if path else f" ({JAR_ENV} is not set)"
        raise CepkitError("the Flink SQL queries read the feed and answer the sink in the JVM, which needs "
                          f"cepkit's Flink runtime jar{where}: build it with `.venv/bin/python -m "
                          "harness.flink_jar` (scripts/setup.sh does) and run under the cepkit harness, or set "
                          f"{JAR_ENV} to the jar")
    return None


def add_runtime_jar(env) -> str | None:
    """Add the jar (when there is one) to the job: the program's class loader and `pipeline.jars`."""
    path = runtime_jar()
    if path is not None:
        env.add_jars("file://" + os.path.abspath(path))
    return path


def _jvm():
    from pyflink.java_gateway import get_gateway

    return get_gateway().jvm


def driver_columns(schema: pa.Schema) -> list[list[str]]:
    """[[name, int | long | double | string | boolean], ...] of the driver's columns."""
    out = []
    for field in schema:
        if field.type not in _LOGICAL:
            raise ValueError(f"feed column {field.name}: no Flink type for {field.type}")
        out.append([field.name, _LOGICAL[field.type]])
    return out


def feed_stream(job, constants: list[tuple[str, str]] = (), splits: int = 1):
    """The feed as a DataStream of event Rows, read in the JVM (see the module doc)."""
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream.connectors import Source

    runtime_jar(required=True)
    if splits < 1:
        raise CepkitError(f"--source-partitions: the feed's splits must be >= 1, got {splits}")
    j_source = _jvm().cepkit.flink.FeedSource(
        job.driver[0], int(job.driver[1]), job.secret or "", json.dumps(driver_columns(job.client.schema)),
        json.dumps([list(c) for c in constants]), int(splits), SPLIT_BLOCK, int(job.max_rows))
    # The source emits its splits' watermarks itself (FeedReader): no generator here.
    stream = job.env.from_source(Source(j_source), WatermarkStrategy.no_watermarks(), "cepkit feed (JVM)")
    return stream.set_parallelism(min(int(splits), job.parallelism))


def sink_to_harness(job, table, streams: dict[str, list[str]]) -> None:
    """Send a Table's rows (a `stream` column and the streams' columns) to the harness sink from the JVM."""
    from flink_runtime.tables import logical_columns
    from runtime_common.outputs import STREAM_COLUMN

    names = list(table.get_schema().get_field_names())
    types = logical_columns(table)
    layout = {name: [[c, types[c], names.index(c)] for c in cols] for name, cols in streams.items()}
    sink_stream(job, job.tables.to_data_stream(table), names.index(STREAM_COLUMN), layout)


def sink_stream(job, stream, stream_index: int, layout: dict[str, list]) -> None:
    """Send a DataStream of Rows to the harness sink from the JVM: `stream_index` is the position of
    the `stream` column, `layout` each stream's columns `{stream: [[name, type, position], ...]}`."""
    from pyflink.datastream.connectors import Sink

    runtime_jar(required=True)
    j_sink = _jvm().cepkit.flink.HarnessSink(job.sink[0], int(job.sink[1]), job.secret or "", int(job.attempt),
                                             int(stream_index), json.dumps(layout))
    stream.sink_to(Sink(j_sink)).name("cepkit sink (JVM): " + ", ".join(layout))
