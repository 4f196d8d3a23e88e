"""The harness's feed as a Flink stream: a keyed Python function that pulls events by offset.

PyFlink has no Python sources (a source must be a Java class), and a Java source that speaks the
feed's protocol (JSON headers, Arrow bodies) would be a second client to keep in step with
kit/wire. So the feed enters the job the way a Flink user brings in a service without a
connector: a slow unbounded trigger stream (Flink's own `datagen` table source, `TRIGGERS_PER_S`
row a second) arms one keyed `KeyedProcessFunction` (parallelism 1, one key), which then polls on
processing-time timers: every `interval_ms` it asks the driver how many events are released and
reads the new offset range with kit's `DriverClient`. (Driving each read by a trigger row instead
left events waiting ~300 ms at the median: the datagen source emits its rows in bursts, so the
reads came in bursts too.) Its position (`next`) and its timer are Flink keyed state, so a job
restored from a checkpoint re-reads from where the checkpoint was taken, and every read of a range
returns the same rows, `ingestTS` included (the driver's `served` times, specs/DRIVER.md).

Backpressure works as Flink users expect: when the job falls behind, the puller's output waits for
network buffers, its timers fire later and it reads less often; the backlog stays in the driver,
where the harness measures it.

Two shapes of output:
- events: one Row per event, the driver's columns then `offset` and `ingestTS` (micro queries,
  which turn it into a table with an event-time attribute, flink_runtime/tables.py);
- chunks: with a `transform` (an object with `keys` and `__call__(table) -> {key: payload}`), each
  read range becomes one Row `(key, seq, payload)` per key the transform returns, `seq` counting
  ranges: the Pairs program reduces ticks to partial aggregates per bucket this way, so no tick
  crosses a Python-to-Java boundary (flink_runtime/pairs.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

from kit.outputlog import INGEST_TS
from kit.wire.feed_client import DriverClient, served_ms

TRIGGERS_PER_S = 1
POLL_MS = 10
STALE_TIMER_MS = 5000
OFFSET = "offset"
_TYPES = {pa.int32(): Types.INT(), pa.int64(): Types.LONG(), pa.float64(): Types.DOUBLE(),
          pa.string(): Types.STRING(), pa.large_string(): Types.STRING(), pa.bool_(): Types.BOOLEAN()}


def event_fields(schema: pa.Schema) -> list[tuple[str, object]]:
    """(name, Flink type) of the feed's event rows: the driver's columns, `offset`, `ingestTS`."""
    out = []
    for field in schema:
        if field.type not in _TYPES:
            raise ValueError(f"feed column {field.name}: no Flink type for {field.type}")
        out.append((field.name, _TYPES[field.type]))
    return out + [(OFFSET, Types.LONG()), (INGEST_TS, Types.LONG())]


def with_offsets(table: pa.Table, start: int, resp_served: np.ndarray) -> pa.Table:
    """The driver's rows of [start, start + n) with their offsets and first-served times."""
    n = table.num_rows
    return (table.append_column(OFFSET, pa.array(np.arange(start, start + n, dtype=np.int64)))
            .append_column(INGEST_TS, pa.array(resp_served, type=pa.int64())))


class FeedPuller(KeyedProcessFunction):
    """Pulls released events from the driver every `interval_ms` (see the module doc)."""

    def __init__(self, host: str, port: int, transform=None, max_rows: int = 65536, interval_ms: int = POLL_MS,
                 secret: str | None = None):
        self.host, self.port, self.transform, self.max_rows = host, int(port), transform, max_rows
        self.interval_ms = max(1, int(interval_ms))
        self.secret = secret        # pickled with the function: its worker may be on another host

    def open(self, runtime_context) -> None:
        self.client = DriverClient(self.host, self.port, secret=self.secret)
        self.next = runtime_context.get_state(ValueStateDescriptor("next", Types.LONG()))
        self.seq = runtime_context.get_state(ValueStateDescriptor("seq", Types.LONG()))
        self.timer = runtime_context.get_state(ValueStateDescriptor("timer", Types.LONG()))

    def close(self) -> None:
        self.client.close()

    def _read(self, start: int) -> pa.Table | None:
        released = self.client.latest_offset(after=start, wait_ms=0)
        if released <= start:
            return None
        end = released if self.transform is not None else min(released, start + self.max_rows)
        parts, pos = [], start
        while pos < end:
            table, resp = self.client.read_once(pos, end)
            if resp["rows"] == 0:
                break
            parts.append(with_offsets(table, pos, served_ms(resp)))
            pos = resp["end"]
        return pa.concat_tables(parts) if parts else None

    def process_element(self, value, ctx):
        # A trigger only (re)arms the polling timer: once at the start, and again should a restored
        # job have lost its chain of timers.
        now = ctx.timer_service().current_processing_time()
        armed = self.timer.value()
        if armed is None or armed < now - STALE_TIMER_MS:
            self._arm(ctx, now)
        return
        yield  # noqa: unreachable - a generator with no output

    def _arm(self, ctx, now: int) -> None:
        at = now + self.interval_ms
        ctx.timer_service().register_processing_time_timer(at)
        self.timer.update(at)

    def on_timer(self, timestamp: int, ctx):
        try:
            yield from self._pull()
        finally:
            self._arm(ctx, ctx.timer_service().current_processing_time())

    def _pull(self):
        start = self.next.value() or 0
        table = self._read(start)
        if table is None:
            return
        self.next.update(start + table.num_rows)
        if self.transform is None:
            names = table.column_names
            for values in zip(*(table.column(n).to_pylist() for n in names)):
                yield Row(*values)
            return
        seq = (self.seq.value() or 0) + 1
        self.seq.update(seq)
        for key, payload in self.transform(table).items():
            yield Row(int(key), seq, payload)


def trigger_stream(tables):
    """Flink's datagen source as an unbounded trigger, `TRIGGERS_PER_S` rows a second."""
    tables.execute_sql("CREATE TEMPORARY TABLE cepkit_feed_trigger (n INT) WITH ('connector' = 'datagen', "
                       f"'rows-per-second' = '{TRIGGERS_PER_S}', 'fields.n.min' = '0', 'fields.n.max' = '0')")
    return tables.to_data_stream(tables.from_path("cepkit_feed_trigger"))


def feed_stream(tables, host: str, port: int, schema: pa.Schema, transform=None, max_rows: int = 65536,
                interval_ms: int = POLL_MS, secret: str | None = None):
    """The feed as a DataStream: event Rows (named as `event_fields`), or with `transform` the
    chunk Rows `(key, seq, payload)` (see the module doc). The feed is read every `interval_ms`: a
    transform's work per range is mostly fixed cost, so ranges of a few events would be wasted."""
    if transform is None:
        fields = event_fields(schema)
        out_type = Types.ROW_NAMED([n for n, _ in fields], [t for _, t in fields])
    else:
        out_type = Types.ROW_NAMED(["key", "seq", "payload"], [Types.INT(), Types.LONG(), Types.PICKLED_BYTE_ARRAY()])
    # One key: the feed is one sequence of offsets, read by one puller in order.
    return (trigger_stream(tables)
            .key_by(lambda _row: 0, key_type=Types.INT())
            .process(FeedPuller(host, port, transform, max_rows, interval_ms, secret), output_type=out_type)
            .name("cepkit feed").set_parallelism(1))
