"""A PySpark streaming data source that pulls events from the cepkit driver by offset.

Registered as format `cepkit_driver` (`driver_stream(spark, host, port)` does both steps). It is
a `DataSourceStreamReader` over `kit.wire.feed_client.DriverClient` (specs/DRIVER.md):

- an offset is `{"offset": n}`, the driver's global event order; a micro-batch is the range
  `[start, end)`, so any batch can be read again identically after a restart (the driver's reads
  are idempotent);
- `latestOffset` long-polls the driver for up to `waitMs` for events beyond `start`, so an idle
  query does not spin, and caps the range by the read limit (`maxRowsPerBatch`);
- `read` runs in a Spark Python worker with its own connection and yields the driver's Arrow
  record batches with two more columns, `offset` and `ingestTS` (wall-clock epoch ms when the
  driver first served the event: the engine's ingest time, the same when a retried task reads it
  again). No per-row Python work.

Driver errors (an evicted offset, a dataset error) propagate, so the query fails loudly.

A **partition transform** (`driver_stream(..., transform=T)`) turns each partition's events into
other rows right where they are read, in the source's own Python worker: `T(table)` gets the
partition's whole offset range as one Arrow table and returns a table of `T.schema`, which is then
the stream's schema. It must depend on nothing but its input (a batch read again after a restart
gives the same rows). Why: rows that leave a Python source enter the JVM and, for a Python
function downstream, leave it again as Arrow; on these machines that round trip cost ~2.5 µs per
event (specs/TRANSLATION.md, "Where a Pairs batch's time goes"), far more than a vectorized reduction of the
events in the worker that already holds them. The Pairs plan reduces ticks to a few partial
aggregates this way.

Options: `host` (127.0.0.1), `port` (required), `partitions` (1: contiguous offset ranges per
micro-batch), `maxRowsPerBatch` (no cap), `waitMs` (20), `pauseFile` (none: while this file
exists the source offers no new events, so a query that is asked to stop reaches a batch
boundary even when it is far behind; spark_runtime/watch.py uses it), `secret` (none: the run's
secret, kit/wire/auth.py, which every client of the source presents; an option because the
executors' workers, on other hosts, get the source's options but not the program's environment,
and named so that Spark redacts it where it prints options: `spark.redaction.regex` matches it).

This module runs inside Spark (the driver's Python process and its workers); it is importable by
the workers because cepkit is installed (or on PYTHONPATH).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from kit.wire.feed_client import DriverClient, served_ms
from kit.wire.protocol import DriverError
from kit.errors import CepkitError
from kit.outputlog import INGEST_TS

FORMAT = "cepkit_driver"
OFFSET = "offset"
DEFAULT_WAIT_MS = 20
_SPARK_TYPES = {pa.string(): "STRING", pa.int32(): "INT", pa.int64(): "BIGINT", pa.float64(): "DOUBLE"}


def source_schema(driver_schema: pa.Schema) -> pa.Schema:
    """The source's Arrow schema: the driver's columns, then offset and ingestTS (longs), every
    field nullable as Spark's schema is (Spark rejects batches whose nullability differs)."""
    fields = [pa.field(f.name, f.type) for f in driver_schema]
    return pa.schema(fields + [pa.field(OFFSET, pa.int64()), pa.field(INGEST_TS, pa.int64())])


def spark_ddl(schema: pa.Schema) -> str:
    """A Spark DDL schema string for an Arrow schema of the driver's column types."""
    parts = []
    for f in schema:
        if f.type not in _SPARK_TYPES:
            raise CepkitError(f"cepkit_driver: column {f.name}: unsupported type {f.type}")
        parts.append(f"`{f.name}` {_SPARK_TYPES[f.type]}")
    return ", ".join(parts)


def _int_option(options: dict, name: str, default: int | None, low: int) -> int | None:
    raw = options.get(name.lower())
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise CepkitError(f"cepkit_driver: option {name}: must be an integer, got {raw!r}") from None
    if value < low:
        raise CepkitError(f"cepkit_driver: option {name}: must be >= {low}, got {value}")
    return value


@dataclass(frozen=True)
class SourceOptions:
    host: str
    port: int
    partitions: int = 1
    max_rows_per_batch: int | None = None
    wait_ms: int = DEFAULT_WAIT_MS
    pause_file: str | None = None
    secret: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, options: dict) -> "SourceOptions":
        # Spark hands options over case-insensitively; look them up in lower case.
        opts = {str(k).lower(): v for k, v in dict(options).items()}
        port = _int_option(opts, "port", None, 1)
        if port is None:
            raise CepkitError("cepkit_driver: option port: required (the driver's port)")
        return cls(host=opts.get("host") or "127.0.0.1", port=port,
                   partitions=_int_option(opts, "partitions", 1, 1),
                   max_rows_per_batch=_int_option(opts, "maxRowsPerBatch", None, 1),
                   wait_ms=_int_option(opts, "waitMs", DEFAULT_WAIT_MS, 0),
                   pause_file=opts.get("pausefile") or None, secret=opts.get("secret") or None)

    def client(self) -> DriverClient:
        return DriverClient(self.host, self.port, secret=self.secret)


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Offsets [start, end) of one micro-batch split."""

    start: int
    end: int


def split_range(start: int, end: int, parts: int) -> list[OffsetRange]:
    """[start, end) as up to `parts` contiguous, non-empty ranges of near-equal size."""
    n = end - start
    if n <= 0:
        return []
    k = min(parts, n)
    bounds = [start + (n * i) // k for i in range(k + 1)]
    return [OffsetRange(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


class DriverStreamReader(DataSourceStreamReader):
    def __init__(self, opts: SourceOptions, schema: pa.Schema, transform=None):
        self.opts = opts
        self.arrow_schema = schema          # with offset and ingestTS
        self.transform = transform
        self._client: DriverClient | None = None
        self._latest = 0

    def _driver(self) -> DriverClient:
        if self._client is None:
            self._client = self.opts.client()
        return self._client

    def initialOffset(self) -> dict:
        return {"offset": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_rows_per_batch is not None:
            return ReadMaxRows(self.opts.max_rows_per_batch)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start["offset"])
        if self.opts.pause_file and os.path.exists(self.opts.pause_file):
            return {"offset": begin}
        released = self._driver().latest_offset(after=begin, wait_ms=self.opts.wait_ms)
        self._latest = released
        end = max(begin, released)
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + int(limit.max_rows))
        return {"offset": end}

    def reportLatestOffset(self) -> dict:
        return {"offset": self._latest}

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        return split_range(int(start["offset"]), int(end["offset"]), self.opts.partitions)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        with self.opts.client() as client:
            batches = read_range(client, partition.start, partition.end, self.arrow_schema)
            if self.transform is None:
                yield from batches
                return
            out = self.transform(pa.Table.from_batches(list(batches), schema=self.arrow_schema))
        schema = self.transform.schema
        for batch in out.to_batches():
            yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)

    def commit(self, end: dict) -> None:
        # Spark calls this once the batch ending at `end` is checkpointed: a restarted query reads
        # from there, so the driver may forget what lies before it, and must keep what follows.
        self._driver().commit(int(end["offset"]))

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def read_range(client: DriverClient, start: int, end: int, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Record batches of offsets [start, end) with offset and ingestTS appended.

    The range was planned from the driver's released offset, so every row must come; a shorter
    answer (the driver stopped) raises rather than dropping events.
    """
    pos = start
    while pos < end:
        table, resp = client.read_once(pos, end)
        got = resp["rows"]
        if got == 0:
            raise DriverError(f"driver at {client.host}:{client.port}: offsets [{pos}, {end}) were planned "
                              f"but the driver returned none (released {resp.get('released')})")
        offsets = pa.array(np.arange(pos, pos + got, dtype=np.int64))
        ingest = pa.array(served_ms(resp))
        table = table.append_column(OFFSET, offsets).append_column(INGEST_TS, ingest)
        if table.schema.types != schema.types:
            table = table.cast(schema)
        for batch in table.to_batches():
            # Same buffers, Spark's schema (names, types, nullable flags): no copy.
            yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        pos += got


class DriverSource(DataSource):
    """`spark.readStream.format("cepkit_driver").option("port", P).load()`."""

    transform = None        # a partition transform (module doc); set on a subclass

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def __init__(self, options: dict):
        super().__init__(options)
        self.opts = SourceOptions.parse(options)

    def _arrow_schema(self) -> pa.Schema:
        with self.opts.client() as client:
            return source_schema(client.schema)

    def schema(self) -> str:
        return spark_ddl(self.transform.schema if self.transform is not None else self._arrow_schema())

    def streamReader(self, schema) -> DriverStreamReader:
        return DriverStreamReader(self.opts, self._arrow_schema(), self.transform)


def driver_stream(spark, host: str, port: int, transform=None, secret: str | None = None, **options):
    """Register the source and return the streaming DataFrame of the driver's events (with a
    `transform`: of the rows it makes of each partition, module doc). `secret`: the run's."""
    source, fmt = DriverSource, FORMAT
    if transform is not None:
        # A subclass per transform, carrying it to the workers (cloudpickle ships the class by value).
        fmt = f"{FORMAT}_{transform.name}"
        source = type(f"DriverSource_{transform.name}", (DriverSource,),
                      {"transform": transform, "name": classmethod(lambda cls: fmt)})
    spark.dataSource.register(source)
    if transform is not None:
        schema = transform.schema
    else:
        with DriverClient(host, int(port), secret=secret) as client:
            schema = source_schema(client.schema)
    opts = {"host": host, "port": str(int(port)), **{k: str(v) for k, v in options.items()},
            **({"secret": secret} if secret else {})}
    SourceOptions.parse(opts)       # a bad option fails here, in one line, not inside Spark
    return spark.readStream.format(fmt).schema(spark_ddl(schema)).options(**opts).load()
