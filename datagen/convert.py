"""Convert a user's own CSV of timestamped events into a cepkit dataset.

Two kinds of input:
- `micro`: microbenchmark events; written as stream S1 (`S1-NNNNN-of-MMMMM.*`) with columns ID
  (int32), A1..AN (float64) and TS (int64 epoch ms), like `datagen.micro`;
- `ticks`: stock ticks; written as `ticks-NNNNN-of-MMMMM.*` with symbol, price (int32 cents),
  size (int32) and tickTS (int64 epoch ms), in the Arrow schemas of `datagen.pairs`. Prices may
  be given in dollars, sizes may be absent (one default size), and an optional correlations CSV
  (symbol1, symbol2) yields the `pairs-aux.json` the query generator reads (`convert_pairs`).

This module holds what to convert (`ConvertSpec`) and the conversion; reading and checking the
rows is `datagen.convert_csv`. Every row is checked; the first bad one stops the conversion with a
one-line `CepkitError` naming the file, the physical line the record starts on (the header is
line 1) and the field. Output goes through `StagedDir`, so a failed conversion leaves nothing.

Row order: by default the CSV is streamed, never held whole, and its timestamps must be
non-decreasing (the row order is the event order). With `file_count > 1` it is read twice: the
first pass checks every row and samples the timestamps so the files can be split on time into
about equal parts; the second writes them. With `sort` the checked columns are read once into
memory, sorted stably on time (ties keep file order) and written from there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datagen import convert_csv as rows_io
from datagen.convert_csv import Chunk, CsvRecords, Layout, check_readable, parsed_chunks
from datagen.convert_pairs import Pair, check_pairs_present, converted_aux, read_correlations
from datagen.csv_values import INT32_MAX, check_time_format, printable
from datagen.output import GeneratedDataset, SplitWriter
from datagen.pairs import TICK_CSV_SCHEMA, TICK_FILE_SCHEMA
from kit.atomic import StagedDir
from kit.config import FORMATS
from kit.datafiles import sha256_of
from kit.errors import CepkitError, at
from kit.manifest import write_manifest
from kit.records import micro_event
from kit.workload.aux import write_aux

__all__ = ["ConvertSpec", "Pair", "SplitSampler", "convert_csv", "read_correlations"]

KINDS = ("micro", "ticks")
TS_UNITS = ("ms", "s", "us", "iso")
PRICE_UNITS = ("cents", "dollars")
DEFAULT_TS_COLUMN = {"micro": "TS", "ticks": "tickTS"}
MICRO_STREAM = "S1"
# Timestamps kept by the first pass to place the file splits; more rows are subsampled.
SPLIT_SAMPLES = 1 << 16

Progress = Callable[[int, float], None]


@dataclass(frozen=True)
class ConvertSpec:
    """What to read from the CSV and how to write it. Unset `ts_column` means TS (micro) or
    tickTS (ticks); unset `attribute_columns` means every column named A<number>, in numeric order.
    Attribute columns are renamed A1..AN in the order given.

    Time is `ts_unit` (default ms) or, with `ts_format`, text in that strptime pattern; not both.
    `default_size` is every tick's size when the CSV has no size column. `sort` sorts the rows
    on time instead of requiring them in time order."""

    input: Path
    kind: str = "micro"
    ts_column: str | None = None
    ts_unit: str | None = None
    ts_format: str | None = None
    id_column: str = "ID"
    attribute_columns: tuple[str, ...] | None = None
    symbol_column: str = "symbol"
    price_column: str = "price"
    price_unit: str = "cents"
    size_column: str = "size"
    default_size: int | None = None
    correlations: Path | None = None
    scale_factor: int = 1
    format: str = "parquet"
    file_count: int = 1
    sort: bool = False

    def __post_init__(self) -> None:
        # Accept str paths and lists from callers; store Path and tuple so the spec stays hashable.
        object.__setattr__(self, "input", Path(self.input))
        if self.correlations is not None:
            object.__setattr__(self, "correlations", Path(self.correlations))
        if self.attribute_columns is not None:
            object.__setattr__(self, "attribute_columns", tuple(self.attribute_columns))
        if self.ts_column is None:
            object.__setattr__(self, "ts_column", DEFAULT_TS_COLUMN.get(self.kind, "TS"))
        _one_of("kind", self.kind, KINDS)
        self._check_time()
        _one_of("format", self.format, FORMATS)
        _one_of("price unit", self.price_unit, PRICE_UNITS)
        for name, value in (("file count", self.file_count), ("scale factor", self.scale_factor)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CepkitError(f"convert: {name} must be a positive integer, got {value!r}")
        if not isinstance(self.sort, bool):
            raise CepkitError(f"convert: sort must be true or false, got {self.sort!r}")
        if self.attribute_columns is not None and not self.attribute_columns:
            raise CepkitError("convert: attribute columns must not be an empty list")
        if self.kind != "ticks":
            for name, given in (("a correlations file", self.correlations is not None),
                                ("--price-unit", self.price_unit != "cents"),
                                ("--default-size", self.default_size is not None)):
                if given:
                    raise CepkitError(f"convert: {name} only goes with --kind ticks")
        size = self.default_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= INT32_MAX):
            raise CepkitError(f"convert: default size must be a positive 32-bit integer, got {size!r}")
        used = self.source_columns()
        if any(not c.strip() for c in used if c is not None):
            raise CepkitError("convert: column names must not be empty")
        named = [c for c in used if c is not None]
        dupes = sorted({c for c in named if named.count(c) > 1})
        if dupes:
            raise CepkitError(f"convert: column {dupes[0]!r} is used for two fields")

    def _check_time(self) -> None:
        if self.ts_format is None:
            if self.ts_unit is None:
                object.__setattr__(self, "ts_unit", "ms")
            _one_of("ts unit", self.ts_unit, TS_UNITS)
            return
        if self.ts_unit is not None:
            raise CepkitError("convert: --ts-unit and --ts-format cannot be combined "
                              "(a time in a --ts-format pattern has no unit)")
        if isinstance(self.ts_format, str):
            # Values are stripped, so whitespace around the pattern could only make it fail.
            object.__setattr__(self, "ts_format", self.ts_format.strip())
        if not isinstance(self.ts_format, str) or (why := check_time_format(self.ts_format)) is not None:
            why = why if isinstance(self.ts_format, str) else "not a string"
            raise CepkitError(f"convert: --ts-format {self.ts_format!r} is not a usable strptime pattern: {why}")

    def source_columns(self) -> list[str | None]:
        """The CSV columns read, in output order (None: attributes found from the header)."""
        if self.kind == "ticks":
            return [self.symbol_column, self.price_column, self.size_column, self.ts_column]
        attrs = list(self.attribute_columns) if self.attribute_columns is not None else [None]
        return [self.id_column, *attrs, self.ts_column]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["input"] = self.input.name
        d["correlations"] = None if self.correlations is None else self.correlations.name
        d["attribute_columns"] = None if self.attribute_columns is None else list(self.attribute_columns)
        return d


def _one_of(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise CepkitError(f"convert: {what} must be one of {', '.join(choices)}, got {value!r}")


# --- where the files split ------------------------------------------------------------------

def split_bounds(samples: np.ndarray, stride: int, rows: int, file_count: int) -> list[int]:
    """First TS of files 2..F from sorted `samples` (the TS of every `stride`-th row): the TS near
    row i*rows/F, or the next greater sampled TS where ties would leave a file empty (rows with
    equal times stay in one file)."""
    out: list[int] = []
    prev = samples[0]
    for i in range(1, file_count):
        bound = samples[min(round(i * rows / file_count / stride), len(samples) - 1)]
        if bound <= prev:
            # Out of distinct samples: keep prev; the empty file it makes is refused after writing.
            bound = samples[min(int(np.searchsorted(samples, prev, side="right")), len(samples) - 1)]
        out.append(int(bound))
        prev = bound
    return out


class SplitSampler:
    """Keeps the TS of every `stride`-th row (stride doubling as needed) to place file splits,
    and counts the distinct times of its non-decreasing input."""

    def __init__(self, capacity: int | None = None):
        self.capacity = SPLIT_SAMPLES if capacity is None else capacity
        self.stride = 1
        self.samples: list[int] = []
        self.rows = 0
        self.distinct = 0

    def add(self, ts: np.ndarray) -> None:
        if len(ts):
            new_first = not self.rows or int(ts[0]) != self._last
            self.distinct += int(new_first) + int(np.count_nonzero(np.diff(ts)))
            self._last = int(ts[-1])
        first = -self.rows % self.stride
        self.samples.extend(ts[first::self.stride].tolist())
        self.rows += len(ts)
        while len(self.samples) >= 2 * self.capacity:
            # Sample j sits at row j*stride; keeping the even j doubles the stride.
            self.samples = self.samples[::2]
            self.stride *= 2

    def bounds(self, file_count: int) -> list[int]:
        return split_bounds(np.asarray(self.samples, np.int64), self.stride, self.rows, file_count)


def _check_file_count(spec: ConvertSpec, rows: int, distinct: int, ts_name: str) -> None:
    f = spec.file_count
    if rows < f:
        raise at(spec.input, None, f"--files {f} but the input has {rows} row{'s' if rows != 1 else ''}")
    if distinct < f:
        raise at(spec.input, None, f"--files {f} but the input's {rows} rows have only {distinct} distinct "
                                   f"{printable(ts_name)} values (rows with the same time stay in one file)")


# --- the rows in time order -----------------------------------------------------------------

@dataclass
class _Tally:
    """Progress over one or two passes; a pass's row total is estimated from the fraction done."""

    progress: Progress | None
    passes: int

    def update(self, pass_index: int, rows_in_pass: int, fraction: float) -> None:
        if self.progress is None:
            return
        estimate = rows_in_pass / fraction if fraction > 0 else float(rows_in_pass)
        self.progress(pass_index * int(estimate) + rows_in_pass, self.passes * estimate)


@dataclass
class _Source:
    """The checked rows, ready to write: chunks in time order and the file split times."""

    chunks: Iterable[tuple[Layout, Chunk]]
    bounds: list[int]
    expected_rows: int | None      # from a first pass over the file, to detect a change


def _streamed(spec: ConvertSpec, tally: _Tally) -> _Source:
    """Rows straight from the file (which must be in time order); a first pass places the splits."""
    display = os.fspath(spec.input)
    bounds: list[int] = []
    expected = None
    if spec.file_count > 1:
        sampler = SplitSampler()
        for layout, chunk in parsed_chunks(spec, CsvRecords(spec.input, display)):
            sampler.add(chunk.ts)
            tally.update(0, sampler.rows, chunk.fraction_read)
        _check_file_count(spec, sampler.rows, sampler.distinct, layout.ts.source)
        bounds, expected = sampler.bounds(spec.file_count), sampler.rows

    def chunks() -> Iterator[tuple[Layout, Chunk]]:
        rows = 0
        for layout, chunk in parsed_chunks(spec, CsvRecords(spec.input, display)):
            rows += chunk.rows
            tally.update(tally.passes - 1, rows, chunk.fraction_read)
            yield layout, chunk
    return _Source(chunks(), bounds, expected)


def _sorted(spec: ConvertSpec, tally: _Tally) -> _Source:
    """Every checked row read into memory, sorted stably on time, then handed out in chunks.

    The parsed columns and the sort order cost about 55 bytes a tick at the peak (specs/DATA.md)."""
    pieces: list[list[pa.Array | None]] = []
    layout = None
    rows = 0
    for layout, chunk in parsed_chunks(spec, CsvRecords(spec.input, os.fspath(spec.input)), ordered=False):
        pieces.append(list(chunk.arrays))
        rows += chunk.rows
        tally.update(0, rows, chunk.fraction_read)
    assert layout is not None          # parsed_chunks raises on an empty input
    columns = []
    for c in range(len(layout.columns)):
        columns.append(pa.concat_arrays([p[c] for p in pieces]))
        for p in pieces:               # one column's pieces freed as soon as it is whole
            p[c] = None
    ts = columns.pop().to_numpy()      # the timestamp is last
    order = None if bool(np.all(ts[1:] >= ts[:-1])) else np.argsort(ts, kind="stable")
    if order is not None:
        ts = ts[order]
    distinct = 1 + int(np.count_nonzero(np.diff(ts)))
    _check_file_count(spec, rows, distinct, layout.ts.source)
    bounds = split_bounds(ts, 1, rows, spec.file_count) if spec.file_count > 1 else []

    def chunks() -> Iterator[tuple[Layout, Chunk]]:
        step = rows_io.CHUNK_ROWS
        for lo in range(0, rows, step):
            hi = min(lo + step, rows)
            if order is None:
                arrays = [a.slice(lo, hi - lo) for a in columns]
            else:
                take = pa.array(order[lo:hi])
                arrays = [a.take(take) for a in columns]
            tally.update(1, hi, hi / rows)
            yield layout, Chunk([*arrays, pa.array(ts[lo:hi])], ts[lo:hi], hi - lo, hi / rows)
    return _Source(chunks(), bounds, None)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: batches of row lists (no cycles among them) otherwise
    trigger full collections over and over, about a third of the conversion time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# --- conversion -----------------------------------------------------------------------------

def convert_csv(spec: ConvertSpec, out_dir: Path, progress: Progress | None = None) -> GeneratedDataset:
    """Convert `spec.input` into a new dataset directory `out_dir` (it must not exist).

    `progress(rows_done, rows_expected)` is called after every batch (the total is estimated from
    the bytes read).
    """
    started = time.perf_counter()
    display = os.fspath(spec.input)
    check_readable(spec.input, "input file")
    staged = StagedDir(out_dir)   # refuses an existing directory before any work
    pairs = read_correlations(spec.correlations) if spec.correlations is not None else None
    source_sha = sha256_of(spec.input)
    tally = _Tally(progress, 2 if spec.sort or spec.file_count > 1 else 1)
    with _gc_paused():
        source = _sorted(spec, tally) if spec.sort else _streamed(spec, tally)
        with staged as tmp:
            written = _write(spec, tmp, source)
            if source.expected_rows is not None and written.rows != source.expected_rows:
                raise CepkitError(f"{display}: changed while converting ({source.expected_rows} rows, "
                                  f"then {written.rows})")
            empty = next((f["path"] for f in written.files if not f["rows"]), None)
            if empty is not None:
                raise at(display, None, f"--files {spec.file_count} would leave {empty} empty (rows with the "
                                        f"same time stay in one file); give fewer files")
            aux_file = None
            if pairs is not None:
                check_pairs_present(spec.correlations, spec.input, pairs, set(written.symbols))
                aux_file = write_aux(tmp, converted_aux(spec.scale_factor, sorted(written.symbols), pairs)).name
            manifest = write_manifest(tmp, "convert", **_manifest_fields(spec, written, source_sha, aux_file))
    return GeneratedDataset(Path(out_dir), manifest, time.perf_counter() - started)


def _output_schema(spec: ConvertSpec, layout: Layout) -> pa.Schema:
    if spec.kind == "ticks":
        return TICK_FILE_SCHEMA if spec.format == "parquet" else TICK_CSV_SCHEMA
    return micro_event(len(layout.columns) - 2, MICRO_STREAM).arrow_schema(nullable=False)


def _to_table(schema: pa.Schema, chunk: Chunk) -> pa.Table:
    # Casting turns the symbol strings into the dictionary type of the Parquet tick schema.
    return pa.Table.from_arrays([a if a.type == f.type else a.cast(f.type) for a, f in zip(chunk.arrays, schema)],
                                schema=schema)


@dataclass(frozen=True)
class _Written:
    layout: Layout
    schema: pa.Schema
    files: list[dict]
    rows: int
    first_ts: int
    last_ts: int
    symbols: tuple[str, ...]      # distinct symbols in order of first appearance (ticks)


def _write(spec: ConvertSpec, directory: Path, source: _Source) -> _Written:
    writer: SplitWriter | None = None
    layout = schema = None
    rows = 0
    first_ts = last_ts = 0
    symbols: dict[str, None] = {}
    for layout, chunk in source.chunks:
        if writer is None:
            schema = _output_schema(spec, layout)
            stem = MICRO_STREAM if spec.kind == "micro" else "ticks"
            writer = SplitWriter(directory, stem, schema, spec.format, schema.names[-1], source.bounds)
            first_ts = int(chunk.ts[0])
        writer.write(_to_table(schema, chunk))
        if spec.kind == "ticks":
            symbols.update(dict.fromkeys(pc.unique(chunk.arrays[0]).to_pylist()))
        rows += chunk.rows
        last_ts = int(chunk.ts[-1])
    assert writer is not None and layout is not None  # parsed_chunks raises on an empty input
    return _Written(layout, schema, writer.close(), rows, first_ts, last_ts, tuple(symbols))


def _manifest_fields(spec: ConvertSpec, w: _Written, source_sha: str, aux_file: str | None) -> dict:
    """The manifest's fields after its header (kit.manifest.write_manifest), in their documented order."""
    columns = [{"name": c.name, "source": c.source} if c.index is not None else
               {"name": c.name, "source": None, "value": c.value} for c in w.layout.columns]
    base = {
        "data_kind": spec.kind, "spec": spec.to_dict(),
        "source": {"file": spec.input.name, "sha256": source_sha, "bytes": spec.input.stat().st_size,
                   "rows": w.rows},
        "format": spec.format, "start_epoch_ms": w.first_ts, "last_epoch_ms": w.last_ts,
        "columns": columns, "total_rows": w.rows,
    }
    if spec.kind == "micro":
        stream = {"name": MICRO_STREAM, "columns": w.schema.names, "rows": w.rows, "files": w.files}
        return {**base, "streams": [stream], "table": None,
                "files": [{"stream": MICRO_STREAM, **f} for f in w.files]}
    corr = None
    if spec.correlations is not None:
        corr = {"file": spec.correlations.name, "sha256": sha256_of(spec.correlations)}
    return {**base, "files": w.files, "aux_file": aux_file, "correlations_source": corr}
