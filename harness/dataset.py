"""Reading a datagen dataset in event order, one bounded chunk at a time.

The driver never holds a whole run in memory (the standard Pairs run has 45 M ticks): it reads the
files that `manifest.json` lists, in their listed order, through pyarrow's streaming readers
(Parquet row batches, CSV blocks). The manifest is read and its files verified by `kit.manifest`
(paths confined to the dataset directory, sizes, row counts, sha256 unless `verify=False`). Only
the documented layout is used (specs/DATA.md, specs/datagen-micro.md), never the generators' code:

- a manifest with a `streams` list is a microbenchmark dataset: stream `Si` has files of `ID`,
  `A1..AN`, `TS` (TS = scheduled time on the simulated clock);
- otherwise it is a tick dataset: its `files` hold `symbol`, `price`, `size`, `tickTS`, no `TS`.

Each chunk comes out as the payload columns the driver serves (everything but `TS`, which the
driver stamps) plus the simulated timestamps as an int64 numpy array. Several micro streams are
merged into one event order as SEMANTICS.md section 1 says: by `TS`, then stream number, then
row; a `stream` column then names each event's stream.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kit.errors import at
from kit.manifest import FILE_NAME as MANIFEST
from kit.datafiles import Progress, csv_header, csv_value_error, first_decrease, first_line, streamed_parquet
from kit.manifest import Manifest, read_manifest
from kit.records import STOCK_TICK, STOCK_TICK_FILE, micro_event

TICKS_STREAM = STOCK_TICK.name        # the one stream of a tick dataset
STREAM_COLUMN = "stream"              # added when several micro streams are merged
TS_COLUMN = "TS"


@dataclass(frozen=True)
class SourceFile:
    path: Path
    rows: int


@dataclass(frozen=True)
class StreamFiles:
    name: str
    number: int                    # position among the dataset's streams: ties on TS go lowest first
    files: tuple[SourceFile, ...]

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)


@dataclass(frozen=True)
class Dataset:
    """What the driver plays: the selected streams' files and the schemas in and out."""

    directory: Path
    kind: str                      # "ticks" or "micro"
    format: str                    # "parquet" or "csv"
    sim_start_ms: int              # the manifest's start_epoch_ms: simulated time 0 of the profile
    streams: tuple[StreamFiles, ...]
    file_schema: pa.Schema         # the columns as stored in every file
    sim_ts_column: str             # tickTS or TS
    out_schema: pa.Schema          # the columns the driver serves, TS included

    @property
    def total_rows(self) -> int:
        return sum(s.rows for s in self.streams)

    @property
    def payload_schema(self) -> pa.Schema:
        """`out_schema` without TS: what a chunk holds (TS is stamped per event on release)."""
        return self.out_schema.remove(self.ts_index)

    @property
    def ts_index(self) -> int:
        return self.out_schema.get_field_index(TS_COLUMN)


def open_dataset(directory: str | os.PathLike, streams: tuple[str, ...] = (), *, verify: bool = True,
                 progress: Progress | None = None) -> Dataset:
    """Check a dataset directory, its manifest and files (`kit.manifest.read_manifest`: `verify=False`
    skips checksums and CSV row counts); select `streams` (empty: all)."""
    m = read_manifest(directory, verify=verify, progress=progress)
    directory, mpath, fmt, sim_start = m.directory, m.path, m.format, m.start_epoch_ms

    if m.kind == "micro":
        kind, ts_col = "micro", TS_COLUMN
        available = tuple(StreamFiles(s.name, i + 1, tuple(SourceFile(f.path, f.rows) for f in s.files))
                          for i, s in enumerate(m.streams))
        file_schema = _micro_file_schema(m)
    else:
        kind, ts_col = "ticks", "tickTS"
        available = (StreamFiles(TICKS_STREAM, 1, tuple(SourceFile(f.path, f.rows) for f in m.files)),)
        file_schema = STOCK_TICK_FILE.arrow_schema(nullable=False)

    by_name = {s.name: s for s in available}
    for name in streams:
        if name not in by_name:
            raise at(mpath, "streams", f"no stream {name!r} to play (the dataset has {', '.join(by_name)})")
    chosen = tuple(s for s in available if not streams or s.name in streams)  # keep stream-number order

    if kind == "ticks":
        out = STOCK_TICK.arrow_schema(nullable=False)
    else:
        out = file_schema
        if len(chosen) > 1:
            out = out.append(pa.field(STREAM_COLUMN, pa.string(), nullable=False))
    ds = Dataset(directory, kind, fmt, sim_start, chosen, file_schema, ts_col, out)
    for s in chosen:
        for f in s.files:
            _check_file(ds, f)
    return ds


def _micro_file_schema(m: Manifest) -> pa.Schema:
    """ID, A1..AN, TS with the same N for every stream (they share one generator config)."""
    widths = set()
    for s in m.streams:
        cols = s.columns
        n = len(cols) - 2 if cols is not None else -1
        if n < 1 or list(cols) != list(micro_event(n).names):
            raise m.error(f"{s.key}.columns", f"expected ID, A1..AN, TS, got {list(cols) if cols else cols!r}")
        widths.add(n)
    if len(widths) != 1:
        raise m.error("streams", f"streams differ in their number of attributes: {sorted(widths)}")
    return micro_event(widths.pop()).arrow_schema(nullable=False)


def _check_file(ds: Dataset, f: SourceFile) -> None:
    """A Parquet file's columns and their types (cheap: metadata only; presence and row counts
    were checked by kit.manifest); a CSV file's header."""
    if ds.format != "parquet":
        header = csv_header(f.path)
        for name in ds.file_schema.names:
            if name not in header:
                raise at(f.path, name, f"missing column (the header has {', '.join(header) or 'nothing'})")
        return
    try:
        schema = pq.ParquetFile(f.path).schema_arrow
    except (OSError, pa.ArrowException) as e:
        raise at(f.path, None, f"not a readable Parquet file: {first_line(e)}") from None
    for fld in ds.file_schema:
        if fld.name not in schema.names:
            raise at(f.path, fld.name, "missing column")
        got = schema.field(fld.name).type
        value = got.value_type if pa.types.is_dictionary(got) else got
        ok = (pa.types.is_string(value) or pa.types.is_large_string(value)) if pa.types.is_string(fld.type) \
            else pa.types.is_integer(got) if pa.types.is_integer(fld.type) \
            else pa.types.is_integer(got) or pa.types.is_floating(got)
        if not ok:
            raise at(f.path, fld.name, f"expected a column of {fld.type}, got {got}")






def _read_file(ds: Dataset, f: SourceFile, chunk_rows: int) -> Iterator[pa.RecordBatch]:
    """Batches of one file with exactly `file_schema`'s columns and types, without nulls; a value
    that does not convert or a null is an error naming the file and the column."""
    schema = ds.file_schema
    types = {fld.name: fld.type for fld in schema}
    try:
        if ds.format == "parquet":
            batches = streamed_parquet(f.path).iter_batches(batch_size=chunk_rows, columns=schema.names)
        else:
            # CSV blocks are sized in bytes; ~48 bytes per row keeps them near chunk_rows rows.
            batches = pacsv.open_csv(
                f.path, read_options=pacsv.ReadOptions(block_size=max(1 << 16, chunk_rows * 48)),
                convert_options=pacsv.ConvertOptions(column_types=types, include_columns=schema.names))
        row = 0
        for batch in batches:
            for n in schema.names:
                col = batch.column(n)
                if col.null_count:
                    i = row + int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                    raise at(f.path, n, f"data row {i + 1}: is empty (null); every event needs a value")
            if batch.schema != schema:
                batch = pa.RecordBatch.from_arrays([_cast(f, batch.column(n), fld, row) for n, fld in
                                                    zip(schema.names, schema)], schema=schema)
            row += batch.num_rows
            yield batch
    except (OSError, pa.ArrowException) as e:
        if ds.format == "csv" and isinstance(e, pa.ArrowInvalid):
            raise csv_value_error(f.path, types, e) from None
        raise at(f.path, None, f"cannot read: {first_line(e)}") from None


def _cast(f: SourceFile, col: pa.Array, fld: pa.Field, first_row: int) -> pa.Array:
    try:
        return col.cast(fld.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise at(f.path, fld.name, f"cannot read as {fld.type} (rows from {first_row + 1}): {first_line(e)}") \
            from None


def iter_stream(ds: Dataset, stream: StreamFiles, chunk_rows: int) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """One stream's rows in order as (file-schema batch, simulated ts); checks order and counts."""
    last_ts = None
    for f in stream.files:
        rows = 0
        for batch in _read_file(ds, f, chunk_rows):
            if batch.num_rows == 0:
                continue
            ts = batch.column(ds.sim_ts_column).to_numpy()
            _check_order(f, ds.sim_ts_column, rows, ts, last_ts)
            last_ts = int(ts[-1])
            rows += batch.num_rows
            yield batch, ts
        if rows != f.rows:
            raise at(f.path, None, f"has {rows} rows but {MANIFEST} says {f.rows}")


def _check_order(f: SourceFile, column: str, first_row: int, ts: np.ndarray, last_ts: int | None) -> None:
    """Row order is event order, so the simulated time never decreases (DATA.md)."""
    bad = first_decrease(ts, last_ts)
    if bad is None:
        return
    raise at(f.path, column, f"data row {first_row + bad + 1}: {int(ts[bad])} is earlier than the row "
                             "before; rows must be in event order")


def iter_events(ds: Dataset, chunk_rows: int) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """All selected events in event order as (payload batch, simulated ts ms) chunks."""
    if len(ds.streams) == 1:
        drop_ts = ds.kind == "micro"      # micro TS is re-stamped; tickTS stays in the payload
        for batch, ts in iter_stream(ds, ds.streams[0], chunk_rows):
            yield (batch.drop_columns([TS_COLUMN]) if drop_ts else batch), ts
        return
    yield from _merge(ds, chunk_rows)


class _Pending:
    """Rows read from one stream but not yet merged."""

    def __init__(self, ds: Dataset, stream: StreamFiles, index: int, names: pa.Array, chunk_rows: int):
        self.it = iter_stream(ds, stream, chunk_rows)
        self.index, self.names = index, names
        self.batch: pa.RecordBatch | None = None
        self.ts = np.empty(0, dtype=np.int64)
        self.done = False

    def refill(self) -> None:
        try:
            batch, ts = next(self.it)
        except StopIteration:
            self.done = True
            return
        # Tag rows with the stream as a dictionary index: cheap to take, cast to strings at the end.
        tag = pa.DictionaryArray.from_arrays(pa.array(np.full(batch.num_rows, self.index, dtype=np.int32)),
                                             self.names)
        batch = batch.drop_columns([TS_COLUMN]).append_column(STREAM_COLUMN, tag)
        self.batch = batch if self.batch is None else pa.concat_batches([self.batch, batch])
        self.ts = np.concatenate([self.ts, ts])

    def take_before(self, bound: float) -> tuple[pa.RecordBatch | None, np.ndarray]:
        n = int(np.searchsorted(self.ts, bound, side="left")) if np.isfinite(bound) else len(self.ts)
        if n == 0:
            return None, self.ts[:0]
        head, ts = self.batch.slice(0, n), self.ts[:n]
        self.batch, self.ts = self.batch.slice(n), self.ts[n:]
        return head, ts


def _merge(ds: Dataset, chunk_rows: int) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """k-way merge by (TS, stream number, row), a bounded chunk per stream at a time.

    Rows with TS below every unfinished stream's last buffered TS can be ordered safely: no later
    row of any stream can come before them. Rows *at* that bound wait, because the stream that
    holds the bound may have more rows with the same TS in its next chunk.
    """
    names = pa.array([s.name for s in ds.streams])
    pend = [_Pending(ds, s, i, names, chunk_rows) for i, s in enumerate(ds.streams)]
    while True:
        for p in pend:
            while not p.done and len(p.ts) == 0:
                p.refill()
        live = [p for p in pend if not p.done]
        if not live and all(len(p.ts) == 0 for p in pend):
            return
        bound = min((float(p.ts[-1]) for p in live), default=float("inf"))
        parts = [p.take_before(bound) for p in pend]
        parts = [(b, t) for b, t in parts if b is not None]
        if not parts:
            for p in live:
                if p.ts[-1] == bound:
                    p.refill()
            continue
        batch = pa.concat_batches([b for b, _ in parts]) if len(parts) > 1 else parts[0][0]
        ts = np.concatenate([t for _, t in parts])
        order = np.argsort(ts, kind="stable")     # parts are in stream order, rows in row order
        batch = batch.take(pa.array(order))
        cols = batch.columns[:-1] + [batch.column(STREAM_COLUMN).cast(pa.string())]
        yield pa.RecordBatch.from_arrays(cols, schema=ds.payload_schema), ts[order]
