"""Output rows of a Flink job to the harness sink, from the last Python operator of the job.

PyFlink has no Python sinks, so the job's last operator is a Python function that sends its rows
to the harness sink itself (kit/wire/sink_client.py), the way the Spark runtime's foreachBatch
does. `RowEmitter` (a FlatMapFunction at the end of a Table's stream) buffers rows per output
stream and hands them over every `FLUSH_MS` from a thread of its own, so a row waits at most that
long after Flink produced it and no flush depends on a next row arriving. (The Pairs buckets and
the Python queries compute a whole range's rows at once and send them with `SinkClient.emit`.)

Batch ids: the sink writes each (stream, batch id) once. An emitter instance numbers its flushes
and interleaves them with its parallel siblings' (`flush * parallelism + subtask`), so ids never
collide across instances. Every send carries the sender's *epoch* (`sink_client`): the program's
attempt and Flink's attempt of the task. A job restored from a checkpoint numbers its sends afresh
in a new epoch, and sends again the answers of the events after that checkpoint: the sink drops
those (harness/replay_filter.py).

Every sender carries the run's secret (kit/wire/auth.py) in its pickled state, given where the job
is built: a cluster's Python workers do not have the program's environment.
"""

from __future__ import annotations

import calendar
import threading
from datetime import timezone

import pyarrow as pa
from pyflink.datastream.functions import FlatMapFunction

from kit.wire.sink_client import SinkClient
from runtime_common.outputs import STREAM_COLUMN

FLUSH_MS = 10
_ARROW = {"int": pa.int32(), "long": pa.int64(), "double": pa.float64(), "string": pa.string(),
          "boolean": pa.bool_(), "timestamp_ms": pa.int64()}


def epoch_ms(value) -> int | None:
    """A Flink TIMESTAMP (a naive datetime in UTC: the jobs run with table.local-time-zone UTC) or
    TIMESTAMP_LTZ as epoch milliseconds, in integers (no float rounding)."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return calendar.timegm(value.utctimetuple()) * 1000 + value.microsecond // 1000


def arrow_schema(columns) -> pa.Schema:
    """An Arrow schema from (name, logical type) pairs: int, long, double, string, boolean."""
    return pa.schema([pa.field(name, _ARROW[logical]) for name, logical in columns])


def sink_client(host: str, port: int, attempt: int, runtime_context, secret: str | None = None) -> SinkClient:
    """A sink client whose sends carry this task's epoch: `<program attempt>.<task attempt>.<subtask>`
    (the sink tells a restored job's replays by the first two, and follows each subtask's replay
    apart: harness/replay_filter.py), and which presents the run's secret."""
    epoch = (f"{int(attempt)}.{runtime_context.get_attempt_number()}."
             f"{runtime_context.get_index_of_this_subtask()}")
    return SinkClient(host, int(port), epoch=epoch, secret=secret)


def send_rows(sink: SinkClient, batch_id: int, rows_by_stream: dict, schemas: dict) -> int:
    """Send each stream's rows (lists of tuples in the stream's column order); rows sent."""
    sent = 0
    for stream, rows in rows_by_stream.items():
        if rows:
            schema = schemas[stream]
            columns = list(zip(*rows))
            table = pa.table([pa.array(col, type=f.type) for col, f in zip(columns, schema)], schema=schema)
            sent += sink.emit(stream, batch_id, table)
    return sent


class RowEmitter(FlatMapFunction):
    """The end of an output stream: rows with a `stream` field and the union of the streams'
    columns in; nothing out (each row goes to the harness sink)."""

    def __init__(self, sink_host: str, sink_port: int, streams: dict, schemas: dict, attempt: int = 1,
                 secret: str | None = None):
        self.sink_host, self.sink_port, self.attempt = sink_host, int(sink_port), int(attempt)
        self.secret = secret
        self.streams = {name: list(cols) for name, cols in streams.items()}
        self.schema_columns = {name: list(cols) for name, cols in schemas.items()}   # (name, logical type)

    def open(self, runtime_context) -> None:
        self.sink = sink_client(self.sink_host, self.sink_port, self.attempt, runtime_context, self.secret)
        self.schemas = {name: arrow_schema(cols) for name, cols in self.schema_columns.items()}
        self.index = runtime_context.get_index_of_this_subtask()
        self.parallelism = runtime_context.get_number_of_parallel_subtasks()
        self.flushes = 0
        self.pending: dict[str, list] = {name: [] for name in self.streams}
        self.positions = None
        self.lock = threading.Lock()
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="cepkit-sink", daemon=True)
        self.thread.start()

    def _positions(self, row) -> dict:
        names = list(row._fields) if getattr(row, "_fields", None) else None
        if names is None:
            raise ValueError("RowEmitter: output rows must have named fields")
        at = {n: i for i, n in enumerate(names)}
        self.timestamps = {s: [j for j, (_, t) in enumerate(self.schema_columns[s]) if t == "timestamp_ms"]
                           for s in self.streams}
        return {"stream": at[STREAM_COLUMN], **{s: [at[c] for c in cols] for s, cols in self.streams.items()}}

    def flat_map(self, row):
        if self.error is not None:
            raise RuntimeError(f"the harness sink failed: {self.error}")
        if self.positions is None:
            self.positions = self._positions(row)
        stream = row[self.positions["stream"]]
        values = tuple(row[i] for i in self.positions[stream])
        if self.timestamps[stream]:
            values = tuple(epoch_ms(v) if j in self.timestamps[stream] else v for j, v in enumerate(values))
        with self.lock:
            self.pending[stream].append(values)
        return []

    def flush(self) -> None:
        with self.lock:
            batch = {s: rows for s, rows in self.pending.items() if rows}
            if not batch:
                return
            self.pending = {name: [] for name in self.streams}
            batch_id = self.flushes * self.parallelism + self.index
            self.flushes += 1
        send_rows(self.sink, batch_id, batch, self.schemas)

    def _loop(self) -> None:
        while not self.stop.wait(FLUSH_MS / 1000.0):
            try:
                self.flush()
            except BaseException as e:  # noqa: BLE001 - raised in the operator's thread at its next row
                self.error = e
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        if self.error is None:
            self.flush()
        self.sink.close()
