"""The harness sink: receives an engine's output rows, stamps them and writes the output log.

The engine program (inside Spark's `foreachBatch`) sends each micro-batch's rows of one output
stream to `SinkServer` over loopback TCP with `SinkClient.emit`: one frame per (stream, batch),
the rows as an Arrow IPC stream body (the driver's frame format, kit/wire/protocol.py). The server
stamps `arrivalTS` (wall-clock epoch ms, read once when the frame is fully received) and
`batchId`, appends the rows to `out_dir/<stream>-00001.parquet` (a new numbered file every
`roll_rows` rows), and `finish(clocks)` writes `output-log.json` (specs/OUTPUT_LOG.md).

Rows are buffered per stream for at most `FLUSH_AFTER_S` (one Parquet row group per flush, so a
run of many small batches does not make thousands of tiny row groups), and never the whole run:
a flusher thread writes whatever has waited that long. Event-time latency (arrivalTS - inputTS)
is kept as a histogram for `stats`, never as all values.

The sink runs in the harness process; it imports no pyspark.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kit.jsonfile import dumps_json
from kit.wire.auth import AUTH_TIMEOUT_S
from kit.wire.protocol import BadRequestError, decode_table
from kit.wire.sink_client import SinkError
from harness.server import FrameServer
from kit.errors import CepkitError
from kit.outputlog import ARRIVAL_TS, BATCH_ID, FORMATS, KIND, LOG_NAME, SCHEMA_VERSION
from kit.workload import INPUT_TS
from harness.replay_filter import ReplayFilter

SINK_OPS = ("emit", "stats")
# A (stream, batch) pair sent again is dropped when it is among the stream's last this many
# batches. Every resend an engine makes is recent: a client resends right after a lost answer,
# Spark re-runs only its last uncommitted batch after a restart, a Flink emitter numbers its sends
# upwards within its epoch (and a restored job's new epoch is new). An older pair would be written
# again, and counted as undue by the validator: never silently dropped.
RECENT_BATCHES = 4096
# Buffered rows reach the disk after at most this long (or at FLUSH_ROWS rows, whichever first).
FLUSH_AFTER_S = 1.0
FLUSH_ROWS = 65_536
# Stream names become file names.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---- latency histogram -----------------------------------------------------------------------

class LatencyHistogram:
    """Integer-ms latencies: 1 ms bins below 10 s, 10 ms below 100 s, 100 ms below 1000 s, then
    one overflow bin; min, max and mean exact. Percentiles are a bin's lower edge, so they are
    exact below 10 s (latencies are whole ms)."""

    _EDGES = np.concatenate([np.arange(0, 10_000), np.arange(10_000, 100_000, 10),
                             np.arange(100_000, 1_000_001, 100)]).astype(np.int64)

    def __init__(self) -> None:
        self.counts = np.zeros(len(self._EDGES), dtype=np.int64)   # the last bin overflows
        self.n = 0
        self.total = 0
        self.min_ms: int | None = None
        self.max_ms: int | None = None

    def add(self, latencies_ms: np.ndarray) -> None:
        if not len(latencies_ms):
            return
        x = np.asarray(latencies_ms, dtype=np.int64)
        # Clock skew could make a latency negative; it counts in the first bin, min keeps the truth.
        idx = np.searchsorted(self._EDGES, np.maximum(x, 0), side="right") - 1
        self.counts += np.bincount(idx, minlength=len(self.counts))
        self.n += len(x)
        self.total += int(x.sum())
        lo, hi = int(x.min()), int(x.max())
        self.min_ms = lo if self.min_ms is None else min(self.min_ms, lo)
        self.max_ms = hi if self.max_ms is None else max(self.max_ms, hi)

    def summary(self) -> dict:
        out = {"rows": self.n, "min_ms": self.min_ms, "max_ms": self.max_ms,
               "mean_ms": round(self.total / self.n, 3) if self.n else None}
        cum = np.cumsum(self.counts)
        for name, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99), ("p999_ms", 0.999)):
            if self.n:
                k = int(np.searchsorted(cum, int(np.ceil(q * self.n)), side="left"))
                out[name] = int(min(max(self._EDGES[k], self.min_ms), self.max_ms))
            else:
                out[name] = None
        return out


# ---- one stream's files ----------------------------------------------------------------------

@dataclass
class _Stream:
    name: str
    schema: pa.Schema | None = None          # the data columns plus arrivalTS, batchId
    files: list[str] = field(default_factory=list)
    rows: int = 0
    # The (stream, batch) pairs written, for duplicates: batch ids, or (epoch, batch id) from
    # epoch-tagged emits. Only the last RECENT_BATCHES are kept: a set of every batch grew all run
    # long (Spark sends a batch per micro-batch, ~14,000 in two hours at 0.5 s; Flink's emitters
    # one per 10 ms per subtask while rows flow). The count and the last key stay.
    recent: set = field(default_factory=set)
    recent_order: deque = field(default_factory=deque)
    batches: int = 0
    last_batch: object = None
    pending: list[pa.Table] = field(default_factory=list)
    pending_rows: int = 0
    pending_since: float = 0.0
    writer: object = None
    file_rows: int = 0


class SinkServer:
    """Listens on `host:port` (0: any free port, see `.port`) from construction until `finish`.

    `streams` names the output streams the run must list and their data schemas (without the
    stamps): a stream that receives no row still gets one empty file with that schema. Refuses an
    `out_dir` that already holds an output log. With `secret` (the run's, kit/wire/auth.py) it
    serves only connections that present it; `on_refused` hears one line per connection refused
    (harness/server.py), `auth_timeout_s` is how long one may take to present it.
    """

    def __init__(self, out_dir: Path, fmt: str = "parquet", host: str = "127.0.0.1", port: int = 0,
                 roll_rows: int = 1_000_000, streams: Mapping[str, pa.Schema] | None = None,
                 replay_filter: bool = False, secret: str | None = None,
                 on_refused: Callable[[str], None] | None = None, auth_timeout_s: float = AUTH_TIMEOUT_S):
        if fmt not in FORMATS:
            raise CepkitError(f"sink: format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
        if isinstance(roll_rows, bool) or not isinstance(roll_rows, int) or roll_rows < 1:
            raise CepkitError(f"sink: roll_rows: must be an integer >= 1, got {roll_rows!r}")
        self.out_dir = Path(out_dir)
        if (self.out_dir / LOG_NAME).exists():
            raise CepkitError(f"{self.out_dir / LOG_NAME}: an output log is already there; refusing to overwrite it")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.fmt, self.roll_rows = fmt, roll_rows
        self._declared = {}
        for name, schema in (streams or {}).items():
            _check_name(name)
            self._declared[name] = schema
        self._streams: dict[str, _Stream] = {}
        self._lock = threading.Lock()
        self._latency = LatencyHistogram()
        self._last_arrival_ms: int | None = None
        self._emits = 0
        self._duplicates = 0
        # Engines whose restored jobs send answers again (Flink) get them dropped here
        # (harness/replay_filter.py); Spark's re-run batches are caught by their batch ids.
        self._replay = ReplayFilter((ARRIVAL_TS, BATCH_ID)) if replay_filter else None
        self._finished = False
        self._failed: str | None = None
        self._refused_output: str | None = None
        self._stop_flusher = threading.Event()
        self._server = FrameServer(host, port, self._handle, name="sink", pass_body=True, secret=secret,
                                   on_refused=on_refused, auth_timeout_s=auth_timeout_s)
        self.host, self.port = host, self._server.port
        self._server.start()
        self._flusher = threading.Thread(target=self._flush_loop, name="sink-flush", daemon=True)
        self._flusher.start()

    # ---- requests ------------------------------------------------------------------------------

    def _handle(self, req: dict, body) -> tuple[dict, object]:
        arrival_ms = now_ms()   # the frame is fully received: this is the rows' arrival time
        op = req.get("op")
        if op == "emit":
            try:
                return self._emit(req, body, arrival_ms), None
            except BadRequestError as e:
                # The program sent what it must not (a column missing, a schema that changed, a
                # stamp of the sink's): it would send it again after any restart. The first such
                # refusal is kept for the run (`refused_output`), which then ends at once.
                if not self._finished:
                    with self._lock:
                        self._refused_output = self._refused_output or str(e)
                raise
        if op == "stats":
            return {"ok": True, "stats": self.stats()}, None
        raise BadRequestError(f"unknown op {op!r} (known: {', '.join(SINK_OPS)})")

    def _emit(self, req: dict, body, arrival_ms: int) -> dict:
        name, batch_id = req.get("stream"), req.get("batch_id")
        if not isinstance(name, str) or not _NAME.match(name):
            raise BadRequestError(f"emit: stream must be a name of letters, digits, _ . - (got {name!r})")
        if isinstance(batch_id, bool) or not isinstance(batch_id, int) or not 0 <= batch_id < 2**63:
            # batchId is a 64-bit column (specs/OUTPUT_LOG.md): a larger one was an internal error
            raise BadRequestError(f"emit: batch_id must be an integer from 0 to 2^63 - 1, got {batch_id!r}")
        epoch = req.get("epoch")
        if epoch is not None and (not isinstance(epoch, str) or not 0 < len(epoch) <= 64):
            raise BadRequestError(f"emit: epoch must be a string of 1 to 64 characters, got {epoch!r}")
        try:
            table = decode_table(body)
        except (pa.ArrowException, ValueError, OSError) as e:     # a corrupt stream is a plain OSError at times
            raise BadRequestError(f"emit {name}: the body is not an Arrow IPC stream: {e}") from None
        for col in (ARRIVAL_TS, BATCH_ID):
            if col in table.column_names:
                raise BadRequestError(f"emit {name}: column {col!r} is the sink's stamp; the engine must not send it")
        declared = self._declared.get(name)
        if declared is not None:
            missing = [f.name for f in declared if f.name not in table.column_names]
            if missing:
                raise BadRequestError(f"emit {name}: missing column(s) {', '.join(missing)} "
                                      f"(has {', '.join(table.column_names)})")
        n = table.num_rows
        table = table.append_column(ARRIVAL_TS, pa.array(np.full(n, arrival_ms, dtype=np.int64)))
        table = table.append_column(BATCH_ID, pa.array(np.full(n, batch_id, dtype=np.int64)))
        with self._lock:
            if self._finished:
                raise BadRequestError(f"emit {name}: the sink has finished")
            if self._failed:
                raise SinkError(self._failed)
            st = self._streams.setdefault(name, _Stream(name))
            # Spark may run a batch again after a restart (foreachBatch is at least once), and a
            # client resends after a lost answer: a (stream, batch) pair is written once. Batch
            # ids of epoch-tagged emits count within their epoch (a restored Flink job numbers
            # its sends afresh).
            key = batch_id if epoch is None else (epoch, batch_id)
            if key in st.recent:
                self._duplicates += 1
                return {"ok": True, "rows": 0, "duplicate": True}
            if self._replay is not None and epoch is not None:
                table = self._replay.admit(name, epoch, table, arrival_ms)
                n = table.num_rows
            if st.schema is None:
                st.schema = table.schema
            elif table.schema != st.schema:
                try:
                    table = table.select(st.schema.names).cast(st.schema)
                except (pa.ArrowException, KeyError, ValueError) as e:
                    raise BadRequestError(f"emit {name}: batch {batch_id} has columns {table.schema.names} "
                                          f"{[str(t) for t in table.schema.types]}, unlike the stream's earlier "
                                          f"batches: {e}") from None
            if n:
                self._record_latency(table, arrival_ms)
                if not st.pending:
                    st.pending_since = time.monotonic()
                st.pending.append(table)
                st.pending_rows += n
                st.rows += n
                self._last_arrival_ms = arrival_ms
                if st.pending_rows >= FLUSH_ROWS:
                    self._flush(st)
            _remember(st, key)
            self._emits += 1
        return {"ok": True, "rows": n}

    def _record_latency(self, table: pa.Table, arrival_ms: int) -> None:
        if INPUT_TS not in table.column_names:
            return
        col = table.column(INPUT_TS)
        if not pa.types.is_integer(col.type):
            return
        values = col.drop_null().to_numpy() if col.null_count else col.to_numpy()
        self._latency.add(arrival_ms - values.astype(np.int64))

    # ---- files ---------------------------------------------------------------------------------

    def _flush_loop(self) -> None:
        while not self._stop_flusher.wait(FLUSH_AFTER_S / 4):
            with self._lock:
                now = time.monotonic()
                try:
                    for st in self._streams.values():
                        if st.pending and now - st.pending_since >= FLUSH_AFTER_S:
                            self._flush(st)
                except (OSError, pa.ArrowException, CepkitError) as e:
                    # Nobody waits on this thread: the next emit reports the failure to the engine.
                    self._failed = f"writing {self.out_dir} failed: {e}"
                    return

    def _flush(self, st: _Stream) -> None:
        """Write the stream's buffered rows, rolling to a new file every roll_rows rows."""
        table = pa.concat_tables(st.pending) if len(st.pending) > 1 else st.pending[0]
        st.pending, st.pending_rows = [], 0
        while table.num_rows:
            if st.writer is None:
                self._open(st)
            room = self.roll_rows - st.file_rows
            part, table = table.slice(0, room), table.slice(room)
            self._write(st, part)
            st.file_rows += part.num_rows
            if st.file_rows >= self.roll_rows:
                self._close(st)

    def _open(self, st: _Stream) -> None:
        fname = f"{st.name}-{len(st.files) + 1:05d}.{self.fmt}"
        path = self.out_dir / fname
        if path.exists():
            raise SinkError(f"{path}: already exists; the sink never overwrites a file")
        if self.fmt == "parquet":
            st.writer = pq.ParquetWriter(path, st.schema)
        else:
            fh = open(path, "wb")
            st.writer = (fh, pacsv.CSVWriter(fh, st.schema))
        st.files.append(fname)
        st.file_rows = 0

    def _write(self, st: _Stream, table: pa.Table) -> None:
        if self.fmt == "parquet":
            st.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        else:
            fh, writer = st.writer
            writer.write_table(table)
            fh.flush()

    def _close(self, st: _Stream) -> None:
        if st.writer is None:
            return
        if self.fmt == "parquet":
            st.writer.close()
        else:
            fh, writer = st.writer
            writer.close()
            fh.close()
        st.writer = None

    # ---- results -------------------------------------------------------------------------------

    @property
    def refused_output(self) -> str | None:
        """The first emit the sink refused as the program's own error (None: none was)."""
        with self._lock:
            return self._refused_output

    def stats(self) -> dict:
        """Rows per stream, total rows, emits, last arrival and event-time latency so far."""
        with self._lock:
            streams = {name: st.rows for name, st in self._streams.items()}
            return {"streams": streams, "total_rows": sum(streams.values()), "emits": self._emits,
                    "duplicates": self._duplicates,
                    "replayed_rows_dropped": self._replay.dropped if self._replay is not None else 0,
                    "last_arrival_ms": self._last_arrival_ms,
                    "refused_connections": self._server.refused,
                    "latency": self._latency.summary()}

    def checkpoint_completed(self, trigger_ts_ms: int) -> None:
        """The engine completed a checkpoint triggered at `trigger_ts_ms` (epoch ms): answers sent
        before it are never replayed (harness/replay_filter.py)."""
        if self._replay is not None:
            with self._lock:
                self._replay.checkpoint_completed(trigger_ts_ms)

    def finish(self, clocks: Mapping | None, faults: list[dict] = ()) -> Path | None:
        """Stop listening, write what is buffered, close the files and write output-log.json.

        `clocks` holds run_start_wall_ms, sim_start_ms and speed (the driver's clocks; speed None
        for rate pacing, where no wall/simulated relation exists: then the key is left out). With
        `clocks` None (the run never started) the files are closed and no log is written.
        `faults` are the faults injected into the engine (kind and wall-clock time of each kill).
        Returns the log's path or None.
        """
        self._server.stop()
        self._stop_flusher.set()
        self._flusher.join()
        with self._lock:
            if self._finished:
                return self.out_dir / LOG_NAME if (self.out_dir / LOG_NAME).exists() else None
            self._finished = True
            for st in self._streams.values():
                if st.pending:
                    self._flush(st)
                self._close(st)
            order = list(self._declared) + [n for n in self._streams if n not in self._declared]
            for name in order:
                st = self._streams.get(name)
                if st is None or not st.files:
                    self._write_empty(name, st)
        if clocks is None:
            return None
        log = {"kind": KIND, "schema_version": SCHEMA_VERSION, "format": self.fmt,
               "run_start_wall_ms": int(clocks["run_start_wall_ms"]), "sim_start_ms": int(clocks["sim_start_ms"])}
        if clocks.get("speed") is not None:
            log["speed"] = float(clocks["speed"])
        # Whether outputs can be placed on the dataset's rate profile (only when paced by its times).
        log["pacing"] = str(clocks.get("pacing") or "tickts")
        log["streams"] = {name: {"files": list(self._streams[name].files)} for name in order}
        if faults:
            log["faults"] = [dict(f) for f in faults]
        path = self.out_dir / LOG_NAME
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(dumps_json(log))
        tmp.replace(path)
        return path

    def _write_empty(self, name: str, st: _Stream | None) -> None:
        """One 0-row file with the stream's schema (declared, or seen in empty batches)."""
        if st is None:
            st = self._streams[name] = _Stream(name)
        if st.schema is None:
            data = self._declared.get(name, pa.schema([]))
            st.schema = data.append(pa.field(ARRIVAL_TS, pa.int64())).append(pa.field(BATCH_ID, pa.int64()))
        self._open(st)
        self._close(st)

    def close(self) -> None:
        """Stop without writing a log (files written so far stay)."""
        if not self._finished:
            self.finish(None)

    def __enter__(self) -> "SinkServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _remember(st: _Stream, key) -> None:
    """Note a written (stream, batch): memory bounded by RECENT_BATCHES, whatever the run's length."""
    st.recent.add(key)
    st.recent_order.append(key)
    if len(st.recent_order) > RECENT_BATCHES:
        st.recent.discard(st.recent_order.popleft())
    st.batches += 1
    st.last_batch = key


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise CepkitError(f"sink: streams: {name!r} is not a valid stream name (letters, digits, _ . -)")
