"""Reading a tick dataset for the reference engine, independently of the generator's code.

The validator must not share code with what it checks, so it reads datasets from their
documented layout (specs/DATA.md): `manifest.json` (read and verified by `kit.manifest`, the one
manifest reader) lists the tick files in event order; each file holds `symbol`, `price`, `tickTS`
(plus `size`). Batches are yielded in event order with the symbol mapped to an index into a
caller-given list (-1 for symbols not in the list).

Nothing is skipped: a file without one of those columns, a column of the wrong type, a null, a
CSV value that is no integer, a price that is not a positive int32 number of cents is one error
naming the file and the column (and the data row, 1-based, or the CSV line).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from kit.errors import CepkitError, at
from kit.datafiles import csv_header, csv_value_error, first_decrease, first_line, streamed_parquet
from kit.manifest import FILE_NAME, DataFile, Manifest, load_manifest
from kit.manifest import read_manifest as read_dataset_manifest

BATCH_ROWS = 1 << 20
COLUMNS = ("symbol", "price", "tickTS")
CSV_TYPES = {"symbol": pa.string(), "price": pa.int64(), "tickTS": pa.int64()}
PRICE_MIN, PRICE_MAX = 1, (1 << 31) - 1          # cents; DATA.md: int32, never below 1 cent


@dataclass(frozen=True)
class TickBatch:
    """A run of consecutive ticks: symbol index (-1 if not wanted), price cents, tickTS ms."""

    offset: int            # event-order position of the first row
    sym: np.ndarray        # int32
    price: np.ndarray      # int64
    tick_ts_ms: np.ndarray  # int64


def read_manifest(directory: str | os.PathLike) -> dict:
    """A dataset's manifest document, checked by `kit.manifest` (no data file is read; use
    `kit.manifest.read_manifest` to verify the files too). Kept for callers that want the dict."""
    return dict(load_manifest(directory).doc)


def open_ticks(source: str | os.PathLike | Manifest, *, verify: bool = True) -> Manifest:
    """The verified manifest of a tick dataset (a directory, or a manifest already read)."""
    m = source if isinstance(source, Manifest) else read_dataset_manifest(source, verify=verify)
    if m.kind != "ticks":
        raise m.error("streams", "a microbenchmark dataset, not a tick dataset (no stock ticks to read)")
    return m


def dataset_files(source: str | os.PathLike | Manifest, *, verify: bool = True) -> tuple[list[Path], Manifest]:
    """The tick files of a dataset in event order, and its manifest."""
    m = open_ticks(source, verify=verify)
    return [f.path for f in m.files], m


def iter_ticks(source: str | os.PathLike | Manifest, symbols: Sequence[str], *,
               verify: bool = True) -> Iterator[TickBatch]:
    """Ticks of a dataset in event order, with symbols mapped to indices into `symbols`."""
    m = open_ticks(source, verify=verify)
    wanted = pa.array(list(symbols), type=pa.string())
    offset, last_ts = 0, None
    for f in m.files:
        row = 0
        for batch in _batches_of(f, m.format):
            if batch.num_rows == 0:
                continue
            _check_values(f, m.format, batch, row)
            sym = _symbol_index(batch.column("symbol"), wanted)
            price = batch.column("price").to_numpy(zero_copy_only=False).astype(np.int64)
            ts = batch.column("tickTS").to_numpy(zero_copy_only=False).astype(np.int64)
            if last_ts is None and ts[0] < m.start_epoch_ms:
                raise _row_error(f, m.format, "tickTS", row, f"{int(ts[0])} is before the run start, {FILE_NAME}'s "
                                                             f"start_epoch_ms {m.start_epoch_ms}")
            _check_order(f, m.format, ts, row, last_ts)
            last_ts = int(ts[-1])
            yield TickBatch(offset, sym, price, ts)
            offset += batch.num_rows
            row += batch.num_rows
        if row != f.rows:
            raise at(f.path, None, f"has {row} rows but {FILE_NAME} says {f.rows} ({f.key}.rows)")


# -- one file ----------------------------------------------------------------------------------

def _batches_of(f: DataFile, fmt: str) -> Iterator[pa.RecordBatch]:
    if fmt == "parquet":
        yield from _parquet_batches(f.path)
    else:
        yield from _csv_batches(f.path)


def _parquet_batches(path: Path) -> Iterator[pa.RecordBatch]:
    try:
        pf = streamed_parquet(path)
        schema = pf.schema_arrow
    except (OSError, pa.ArrowException) as e:
        raise at(path, None, f"not a readable Parquet file: {first_line(e)}") from None
    for col in COLUMNS:
        if col not in schema.names:
            raise at(path, col, f"missing column (the file has {', '.join(schema.names) or 'none'})")
        t = schema.field(col).type
        if not _type_ok(col, t):
            want = "a string" if col == "symbol" else "an integer"
            raise at(path, col, f"expected {want} column, got {t}")
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=list(COLUMNS)):
            yield batch
    except (OSError, pa.ArrowException) as e:
        raise at(path, None, f"cannot read: {first_line(e)}") from None


def _type_ok(col: str, t: pa.DataType) -> bool:
    if col == "symbol":
        v = t.value_type if pa.types.is_dictionary(t) else t
        return pa.types.is_string(v) or pa.types.is_large_string(v)
    return pa.types.is_integer(t)


def _csv_batches(path: Path) -> Iterator[pa.RecordBatch]:
    header = csv_header(path)
    for col in COLUMNS:
        if col not in header:
            raise at(path, col, f"missing column (the header has {', '.join(header) or 'nothing'})")
    opts = pacsv.ConvertOptions(include_columns=list(COLUMNS), column_types=CSV_TYPES)
    try:
        reader = pacsv.open_csv(path, convert_options=opts, read_options=pacsv.ReadOptions(block_size=1 << 24))
        for batch in reader:
            yield batch
    except (OSError, pa.ArrowException) as e:
        raise csv_value_error(path, CSV_TYPES, e) from None




def _check_values(f: DataFile, fmt: str, batch: pa.RecordBatch, first_row: int) -> None:
    """No nulls; prices are positive int32 cents."""
    for col in COLUMNS:
        arr = batch.column(col)
        if arr.null_count:
            i = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
            raise _row_error(f, fmt, col, first_row + i, "is empty (null); every tick needs a value")
    price = batch.column("price")
    mm = pc.min_max(price)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo < PRICE_MIN or hi > PRICE_MAX:
        values = price.to_numpy(zero_copy_only=False)
        i = int(np.flatnonzero((values < PRICE_MIN) | (values > PRICE_MAX))[0])
        raise _row_error(f, fmt, "price", first_row + i,
                         f"{int(values[i])} is not a price in cents ({PRICE_MIN} to {PRICE_MAX})")


def _check_order(f: DataFile, fmt: str, ts: np.ndarray, first_row: int, last_ts: int | None) -> None:
    """Row order is event order, so tickTS never decreases, within a file and across files (DATA.md)."""
    bad = first_decrease(ts, last_ts)
    if bad is None:
        return
    raise _row_error(f, fmt, "tickTS", first_row + bad,
                     f"{int(ts[bad])} is earlier than the tick before: tickTS goes backwards; ticks must be in "
                     "time order")


def _row_error(f: DataFile, fmt: str, col: str, row: int, message: str) -> CepkitError:
    # CSV: the file line (the header is line 1); Parquet: the 1-based data row of the file.
    if fmt == "csv":
        return at(f.path, row + 2, f"column {col}: {message}")
    return at(f.path, col, f"data row {row + 1}: {message}")


def _symbol_index(col: pa.Array, wanted: pa.Array) -> np.ndarray:
    if pa.types.is_dictionary(col.type):
        values = col.dictionary if pa.types.is_string(col.dictionary.type) else col.dictionary.cast(pa.string())
        lookup = pc.index_in(values, value_set=wanted).fill_null(-1).to_numpy(zero_copy_only=False)
        return lookup[col.indices.to_numpy(zero_copy_only=False)].astype(np.int32)
    if not pa.types.is_string(col.type):
        col = col.cast(pa.string())
    return pc.index_in(col, value_set=wanted).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)


