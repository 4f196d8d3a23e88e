"""Convert a user's own CSV of timestamped events into a cepkit dataset.

Two kinds of input:
- `micro`: microbenchmark events; written as stream S1 (`S1-NNNNN-of-MMMMM.*`) with columns ID
  (int32), A1..AN (float64) and TS (int64 epoch ms), like `datagen.micro`;
- `ticks`: stock ticks; written as `ticks-NNNNN-of-MMMMM.*` with symbol, price (int32 cents),
  size (int32) and tickTS (int64 epoch ms), in the Arrow schemas of `datagen.pairs`. An optional
  correlations CSV (symbol1, symbol2) yields the `pairs-aux.json` the query generator reads.

The CSV is streamed with the stdlib csv module in batches of records, never held in memory
whole; each batch is parsed column by column (vectorized where the text is plain). Every row is
checked; the first bad one stops the conversion with a one-line `CepkitError` naming the file,
the physical line the record starts on (the header is line 1) and the field. Timestamps must be
non-decreasing: the row order is the event order. Empty lines are skipped and whitespace around
values and column names is ignored.

With `file_count > 1` the CSV is read twice: the first pass checks every row and samples the
timestamps so the files can be split on TS into about equal parts; the second writes them.
Output goes through `StagedDir`, so a failed conversion leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gc
import io
import itertools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datagen.csv_values import (BadValue, FAST_TIMESTAMP, Fallback, fast_double, fast_int32,
                                 fast_positive_int32, parse_double, parse_int32, parse_symbol, positive_int_parser, timestamp_parser)
from datagen.output import (MANIFEST_FILE, MANIFEST_KIND, MANIFEST_SCHEMA_VERSION, GeneratedDataset,
                            SplitWriter, StagedDir, arrow_schema, library_versions, sha256_of, write_json)
from datagen.pairs import AUX_FILE, AUX_KIND, AUX_SCHEMA_VERSION, TICK_CSV_SCHEMA, TICK_FILE_SCHEMA
from kit.config import FORMATS
from kit.errors import CepkitError, at
from kit.records import micro_event
from kit.scale import MAX_STRATEGIES_PER_PAIR, STRATEGIES_PER_SF

KINDS = ("micro", "ticks")
TS_UNITS = ("ms", "s", "us", "iso")
DEFAULT_TS_COLUMN = {"micro": "TS", "ticks": "tickTS"}
MICRO_STREAM = "S1"
CHUNK_ROWS = 1 << 16
# Timestamps kept by the first pass to place the file splits; more rows are subsampled.
SPLIT_SAMPLES = 1 << 16
ATTRIBUTE_NAME = re.compile(r"A([0-9]+)")

Progress = Callable[[int, float], None]


@dataclass(frozen=True)
class ConvertSpec:
    """What to read from the CSV and how to write it. Unset `ts_column` means TS (micro) or
    tickTS (ticks); unset `attribute_columns` means every column named A<number>, in numeric order.
    Attribute columns are renamed A1..AN in the order given."""

    input: Path
    kind: str = "micro"
    ts_column: str | None = None
    ts_unit: str = "ms"
    id_column: str = "ID"
    attribute_columns: tuple[str, ...] | None = None
    symbol_column: str = "symbol"
    price_column: str = "price"
    size_column: str = "size"
    correlations: Path | None = None
    scale_factor: int = 1
    format: str = "parquet"
    file_count: int = 1

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
        _one_of("ts unit", self.ts_unit, TS_UNITS)
        _one_of("format", self.format, FORMATS)
        for name, value in (("file count", self.file_count), ("scale factor", self.scale_factor)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CepkitError(f"convert: {name} must be a positive integer, got {value!r}")
        if self.attribute_columns is not None and not self.attribute_columns:
            raise CepkitError("convert: attribute columns must not be an empty list")
        if self.correlations is not None and self.kind != "ticks":
            raise CepkitError("convert: a correlations file only goes with --kind ticks")
        used = self.source_columns()
        if any(not c.strip() for c in used if c is not None):
            raise CepkitError("convert: column names must not be empty")
        named = [c for c in used if c is not None]
        dupes = sorted({c for c in named if named.count(c) > 1})
        if dupes:
            raise CepkitError(f"convert: column {dupes[0]!r} is used for two fields")

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


# --- reading the CSV ------------------------------------------------------------------------

class CsvRecords:
    """The non-empty records of a CSV file (the header first), read in batches at C speed.

    Line numbers are not tracked while reading: `error(k, ...)` rescans the file to find the
    physical line on which record k (0-based, header = 0) starts, which only an error needs.
    """

    def __init__(self, path: Path, display: str):
        self.path = path
        self.display = display
        self.bytes_read = 0

    @contextlib.contextmanager
    def _reader(self) -> Iterator[tuple]:
        with open(self.path, "rb") as raw:
            reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8-sig", newline=""), strict=True)
            try:
                yield raw, reader
            except csv.Error as e:
                raise at(self.display, reader.line_num, f"malformed CSV: {e}") from None
            except UnicodeDecodeError:
                raise at(self.display, self._undecodable_line(), "not UTF-8 text") from None

    def _undecodable_line(self) -> int:
        # The text layer decodes ahead of the csv reader, so find the line from the bytes; a
        # UTF-8 sequence never spans a newline, so lines decode independently.
        with open(self.path, "rb") as raw:
            for n, line in enumerate(raw, 1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return n
        return 1

    def batches(self, size: int) -> Iterator[list[list[str]]]:
        """Lists of up to `size` records; empty lines are skipped."""
        with self._reader() as (raw, reader):
            records = filter(None, reader)   # an empty line is an empty record
            while rows := list(itertools.islice(records, size)):
                self.bytes_read = raw.tell()
                yield rows

    def line_of(self, record: int) -> int:
        """The physical line (1-based) on which record `record` starts; one past the end if absent."""
        with self._reader() as (_, reader):
            seen, last = -1, 0
            for row in reader:
                start, last = last + 1, reader.line_num
                if row:
                    seen += 1
                    if seen == record:
                        return start
            return last + 1

    def error(self, record: int, message: str) -> CepkitError:
        return at(self.display, self.line_of(record), message)

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        """(line, record) pairs, for small files such as the correlations."""
        with self._reader() as (_, reader):
            last = 0
            for row in reader:
                start, last = last + 1, reader.line_num
                if row:
                    yield start, row


@dataclass(frozen=True)
class Column:
    """One output field: where it comes from in the CSV and how its text is parsed.

    `parse` is the definition (one value at a time, raising BadValue); `fast` is an optional
    vectorized equivalent over a whole chunk that raises Fallback on anything it is not sure
    of, leaving the verdict (and the error message) to `parse`.
    """

    name: str          # output name
    source: str        # CSV column name
    index: int         # position in the CSV row
    type: pa.DataType
    parse: Callable[[str], object]
    fast: Callable[[pa.Array], pa.Array] | None = None


@dataclass(frozen=True)
class Layout:
    header_line: int
    width: int
    columns: tuple[Column, ...]   # output order; the timestamp is last

    @property
    def ts(self) -> Column:
        return self.columns[-1]


def _header_layout(spec: ConvertSpec, display: str, line: int, raw: list[str]) -> Layout:
    header = [h.strip() for h in raw]
    listing = ", ".join(header)
    seen: set[str] = set()
    for h in header:
        if h in seen:
            raise at(display, line, f"duplicate column {h!r} in the header")
        seen.add(h)

    def index(name: str) -> int:
        if name not in seen:
            raise at(display, line, f"missing column {name!r} (columns: {listing})")
        return header.index(name)

    if spec.kind == "ticks":
        cols = [Column("symbol", spec.symbol_column, index(spec.symbol_column), pa.string(), parse_symbol),
                Column("price", spec.price_column, index(spec.price_column), pa.int32(),
                       positive_int_parser(" (cents)"), fast_positive_int32),
                Column("size", spec.size_column, index(spec.size_column), pa.int32(),
                       positive_int_parser(""), fast_positive_int32)]
    else:
        id_col = Column("ID", spec.id_column, index(spec.id_column), pa.int32(), parse_int32, fast_int32)
        attrs = spec.attribute_columns
        if attrs is None:
            taken = {spec.id_column, spec.ts_column}
            found = [(int(m.group(1)), h) for h in header
                     if (m := ATTRIBUTE_NAME.fullmatch(h)) and h not in taken]
            if not found:
                raise at(display, line, f"no attribute columns named A<number> (columns: {listing}); "
                                        f"name them with --attributes")
            attrs = tuple(h for _, h in sorted(found))
        cols = [id_col, *(Column(f"A{i}", a, index(a), pa.float64(), parse_double, fast_double)
                          for i, a in enumerate(attrs, 1))]
    # Looked up last so that a missing column is reported in output order.
    ts = Column("TS" if spec.kind == "micro" else "tickTS", spec.ts_column, index(spec.ts_column),
                pa.int64(), timestamp_parser(spec.ts_unit), FAST_TIMESTAMP[spec.ts_unit])
    return Layout(line, len(header), (*cols, ts))


# --- the row loop ---------------------------------------------------------------------------

@dataclass
class Chunk:
    arrays: list[pa.Array]  # output order, timestamp last
    ts: np.ndarray          # int64 epoch ms
    rows: int
    bytes_read: int         # of the CSV so far, for a progress estimate


@dataclass
class _Previous:
    """The last row of the previous chunk, for the time-order check across chunks."""

    ts: int
    text: str


def _parse_column(col: Column, texts: tuple[str, ...]) -> tuple[pa.Array, tuple[int, str] | None]:
    """The column's values up to its first bad one, and (row, message) of that one if any."""
    if col.fast is not None:
        try:
            return col.fast(pa.array(texts, pa.string())), None
        except Fallback:
            pass
    values = []
    for i, text in enumerate(texts):
        try:
            values.append(col.parse(text))
        except BadValue as e:
            return pa.array(values, col.type), (i, f"field {col.source!r}: {e}")
    return pa.array(values, col.type), None


def _order_violation(ts: np.ndarray, prev: _Previous | None) -> int | None:
    """Index of the first row whose TS is below its predecessor's, if any."""
    seq = ts if prev is None else np.concatenate([[prev.ts], ts])
    bad = np.flatnonzero(np.diff(seq) < 0)
    if not bad.size:
        return None
    return int(bad[0]) + (0 if prev is not None else 1)


def _parse_chunk(layout: Layout, records: CsvRecords, first: int, rows: list[list[str]],
                 prev: _Previous | None) -> Chunk:
    """Parse a chunk column by column; raise on its first bad row (in row order).

    Rows all have the header's width. `first` is the record number of rows[0], for the line.
    """
    transposed = list(zip(*rows))
    columns = [transposed[c.index] for c in layout.columns]
    parsed = [_parse_column(col, texts) for col, texts in zip(layout.columns, columns)]
    bad = min((b for _, b in parsed if b is not None), default=None)
    ts = parsed[-1][0].to_numpy()
    limit = len(rows) if bad is None else bad[0]
    j = _order_violation(ts[:limit], prev)
    if j is not None:
        before = prev.text if j == 0 else columns[-1][j - 1].strip()
        bad = (j, f"{layout.ts.source} {columns[-1][j].strip()} is earlier than the previous row's "
                  f"{before} (rows must be in time order)")
    if bad is not None:
        raise records.error(first + bad[0], bad[1])
    return Chunk([a for a, _ in parsed], ts, len(rows), records.bytes_read)


def parsed_chunks(spec: ConvertSpec, records: CsvRecords) -> Iterator[tuple[Layout, Chunk]]:
    """Check every record and yield the parsed columns, a batch of records at a time."""
    layout: Layout | None = None
    prev: _Previous | None = None
    first = 0                  # record number of rows[0]; the header is record 0
    for rows in records.batches(CHUNK_ROWS):
        if layout is None:
            layout = _header_layout(spec, records.display, records.line_of(0), rows[0])
            rows, first = rows[1:], 1
            if not rows:
                continue
        width = layout.width
        wrong = next((i for i, r in enumerate(rows) if len(r) != width), None)
        if wrong is not None:
            if wrong > 0:  # an earlier bad row is reported first
                _parse_chunk(layout, records, first, rows[:wrong], prev)
            raise records.error(first + wrong, f"expected {width} fields as in the header (line "
                                               f"{layout.header_line}), got {len(rows[wrong])}")
        chunk = _parse_chunk(layout, records, first, rows, prev)
        prev = _Previous(int(chunk.ts[-1]), rows[-1][layout.ts.index].strip())
        first += len(rows)
        yield layout, chunk
    if layout is None:
        raise at(records.display, 1, "empty file (expected a header line with column names)")
    if prev is None:
        raise records.error(1, "no data rows after the header")


class SplitSampler:
    """Keeps the TS of every `stride`-th row (stride doubling as needed) to place file splits."""

    def __init__(self, capacity: int = SPLIT_SAMPLES):
        self.capacity = capacity
        self.stride = 1
        self.samples: list[int] = []
        self.rows = 0

    def add(self, ts: np.ndarray) -> None:
        first = -self.rows % self.stride
        self.samples.extend(ts[first::self.stride].tolist())
        self.rows += len(ts)
        while len(self.samples) >= 2 * self.capacity:
            # Sample j sits at row j*stride; keeping the even j doubles the stride.
            self.samples = self.samples[::2]
            self.stride *= 2

    def bounds(self, file_count: int) -> list[int]:
        """First TS of files 2..F: the TS near row i*rows/F."""
        out = []
        for i in range(1, file_count):
            j = min(round(i * self.rows / file_count / self.stride), len(self.samples) - 1)
            out.append(self.samples[j])
        return out


# --- correlations ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    line: int
    symbol1: str
    symbol2: str


def read_correlations(path: Path) -> list[Pair]:
    """The correlated pairs CSV: columns symbol1, symbol2; a symbol is in at most one pair."""
    display = os.fspath(path)
    if not path.is_file():
        raise CepkitError(f"{display}: correlations file not found")
    pairs: list[Pair] = []
    where: dict[str, int] = {}
    header: list[str] | None = None
    i1 = i2 = 0
    last_line = 0
    for line, row in CsvRecords(path, display):
        last_line = line
        if header is None:
            header = [h.strip() for h in row]
            for name in ("symbol1", "symbol2"):
                if name not in header:
                    raise at(display, line, f"missing column {name!r} (columns: {', '.join(header)})")
            i1, i2 = header.index("symbol1"), header.index("symbol2")
            continue
        if len(row) != len(header):
            raise at(display, line, f"expected {len(header)} fields as in the header, got {len(row)}")
        s1, s2 = row[i1].strip(), row[i2].strip()
        for name, s in (("symbol1", s1), ("symbol2", s2)):
            if not s:
                raise at(display, line, f"field {name!r}: expected a symbol, got an empty value")
            if s in where:
                raise at(display, line, f"symbol {s!r} is already paired on line {where[s]} "
                                        f"(a symbol is in at most one pair)")
        if s1 == s2:
            raise at(display, line, f"symbol {s1!r} cannot be paired with itself")
        where[s1] = where[s2] = line
        pairs.append(Pair(line, s1, s2))
    if header is None:
        raise at(display, 1, "empty file (expected a header line symbol1,symbol2)")
    if not pairs:
        raise at(display, last_line + 1, "no pairs after the header")
    return pairs


def aux_document(spec: ConvertSpec, symbols: list[str], pairs: list[Pair]) -> dict:
    """pairs-aux.json as datagen.pairs writes it; one market, no generator seed or correlation."""
    return {
        "kind": AUX_KIND, "schema_version": AUX_SCHEMA_VERSION,
        "scale_factor": spec.scale_factor, "markets": 1, "num_symbols": len(symbols),
        "num_correlations": len(pairs), "num_strategies": STRATEGIES_PER_SF * spec.scale_factor,
        "max_strategies_per_pair": MAX_STRATEGIES_PER_PAIR,
        "seed": None, "correlation": None,
        "symbols": [{"symbol": s, "market": 0} for s in symbols],
        "correlations": [{"symbol1": p.symbol1, "symbol2": p.symbol2, "market": 0} for p in pairs],
    }


# --- conversion -----------------------------------------------------------------------------

def _output_schema(spec: ConvertSpec, layout: Layout) -> pa.Schema:
    if spec.kind == "ticks":
        return TICK_FILE_SCHEMA if spec.format == "parquet" else TICK_CSV_SCHEMA
    return arrow_schema(micro_event(len(layout.columns) - 2, MICRO_STREAM))


def _to_table(schema: pa.Schema, chunk: Chunk) -> pa.Table:
    # Casting turns the symbol strings into the dictionary type of the Parquet tick schema.
    return pa.Table.from_arrays([a if a.type == f.type else a.cast(f.type) for a, f in zip(chunk.arrays, schema)],
                                schema=schema)


@dataclass
class _Tally:
    """Progress over one or two passes, with the row total estimated from the bytes read."""

    progress: Progress | None
    passes: int
    size: int

    def update(self, pass_index: int, rows_in_pass: int, bytes_read: int) -> None:
        if self.progress is None:
            return
        estimate = rows_in_pass * max(self.size, 1) / max(bytes_read, 1)
        self.progress(pass_index * int(estimate) + rows_in_pass, self.passes * estimate)


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


def convert_csv(spec: ConvertSpec, out_dir: Path, progress: Progress | None = None) -> GeneratedDataset:
    """Convert `spec.input` into a new dataset directory `out_dir` (it must not exist).

    `progress(rows_done, rows_expected)` is called after every batch (the total is estimated from
    the bytes read).
    """
    started = time.perf_counter()
    display = os.fspath(spec.input)
    if not spec.input.is_file():
        raise CepkitError(f"{display}: input file not found")
    staged = StagedDir(out_dir)   # refuses an existing directory before any work
    pairs = read_correlations(spec.correlations) if spec.correlations is not None else None
    source_sha = sha256_of(spec.input)
    passes = 2 if spec.file_count > 1 else 1
    tally = _Tally(progress, passes, spec.input.stat().st_size)
    with _gc_paused():
        bounds: list[int] = []
        expected_rows = None
        if passes == 2:
            sampler = SplitSampler()
            for _, chunk in parsed_chunks(spec, CsvRecords(spec.input, display)):
                sampler.add(chunk.ts)
                tally.update(0, sampler.rows, chunk.bytes_read)
            bounds, expected_rows = sampler.bounds(spec.file_count), sampler.rows
        with staged as tmp:
            written = _write_pass(spec, tmp, bounds, tally, passes - 1)
            if expected_rows is not None and written.rows != expected_rows:
                raise CepkitError(f"{display}: changed while converting ({expected_rows} rows, then {written.rows})")
            aux_file = None
            if pairs is not None:
                _check_pairs_present(spec, pairs, set(written.symbols))
                write_json(tmp / AUX_FILE, aux_document(spec, sorted(written.symbols), pairs))
                aux_file = AUX_FILE
            manifest = _manifest(spec, written, source_sha, aux_file)
            write_json(tmp / MANIFEST_FILE, manifest)
    return GeneratedDataset(Path(out_dir), manifest, time.perf_counter() - started)


def _check_pairs_present(spec: ConvertSpec, pairs: list[Pair], present: set[str]) -> None:
    for p in pairs:
        for s in (p.symbol1, p.symbol2):
            if s not in present:
                raise at(os.fspath(spec.correlations), p.line, f"symbol {s!r} does not occur in {spec.input}")


@dataclass(frozen=True)
class _Written:
    layout: Layout
    schema: pa.Schema
    files: list[dict]
    rows: int
    first_ts: int
    last_ts: int
    symbols: tuple[str, ...]      # distinct symbols in order of first appearance (ticks)


def _write_pass(spec: ConvertSpec, directory: Path, bounds: list[int], tally: _Tally, pass_index: int) -> _Written:
    records = CsvRecords(spec.input, os.fspath(spec.input))
    writer: SplitWriter | None = None
    layout = schema = None
    rows = 0
    first_ts = last_ts = 0
    symbols: dict[str, None] = {}
    for layout, chunk in parsed_chunks(spec, records):
        if writer is None:
            schema = _output_schema(spec, layout)
            stem = MICRO_STREAM if spec.kind == "micro" else "ticks"
            writer = SplitWriter(directory, stem, schema, spec.format, schema.names[-1], bounds)
            first_ts = int(chunk.ts[0])
        writer.write(_to_table(schema, chunk))
        if spec.kind == "ticks":
            symbols.update(dict.fromkeys(pc.unique(chunk.arrays[0]).to_pylist()))
        rows += chunk.rows
        last_ts = int(chunk.ts[-1])
        tally.update(pass_index, rows, chunk.bytes_read)
    assert writer is not None and layout is not None  # parsed_chunks raises on an empty input
    return _Written(layout, schema, writer.close(), rows, first_ts, last_ts, tuple(symbols))


def _manifest(spec: ConvertSpec, w: _Written, source_sha: str, aux_file: str | None) -> dict:
    columns = [{"name": c.name, "source": c.source} for c in w.layout.columns]
    base = {
        "kind": MANIFEST_KIND, "schema_version": MANIFEST_SCHEMA_VERSION,
        "generator": "convert", "versions": library_versions(),
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
