"""Reading a user's CSV for `datagen.convert`: records, their physical lines, and typed columns.

`CsvRecords` streams the non-empty records with the stdlib csv module in batches (C speed, no
line bookkeeping); only an error rescans the file to find the physical line a record starts on.
Lines are counted as the csv module counts them: `\\n`, `\\r\\n` and a lone `\\r` each end one,
the header is line 1. `parsed_chunks` turns the batches into typed Arrow columns, column by column
(vectorized where the text is plain, see `datagen.csv_values`), checking every row; the first bad
one stops the conversion with a one-line `CepkitError` naming file, line and field.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from datagen.csv_values import (BadValue, FAST_TIMESTAMP, Fallback, fast_dollars, fast_double, fast_format_timestamp,
                                fast_int32, fast_positive_int32, format_timestamp_parser, parse_dollars,
                                parse_double, parse_int32, parse_symbol, positive_int_parser, printable,
                                timestamp_parser)
from kit.errors import CepkitError, at

if TYPE_CHECKING:
    from datagen.convert import ConvertSpec

CHUNK_ROWS = 1 << 16
ATTRIBUTE_NAME = re.compile(r"A([0-9]+)")
QUOTE = '"'


def check_readable(path: Path, what: str) -> None:
    """Refuse, in one line naming the path, anything but a readable regular file.

    stat() first: opening a FIFO would block, and a directory or a path through a regular file
    would otherwise surface as an OSError deep in the reader.
    """
    display = os.fspath(path)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise at(display, None, f"{what} not found") from None
    except OSError as e:
        raise at(display, None, f"{what} cannot be read ({e.strerror})") from None
    if stat.S_ISDIR(mode):
        raise at(display, None, f"{what} is a directory, not a CSV file")
    if not stat.S_ISREG(mode):
        raise at(display, None, f"{what} is not a regular file")
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise at(display, None, f"{what} cannot be read ({e.strerror})") from None


class CsvRecords:
    """The non-empty records of a CSV file (the header first), read in batches at C speed.

    Line numbers are not tracked while reading: `error(k, ...)` rescans the file to find the
    physical line on which record k (0-based, header = 0) starts, which only an error needs.
    """

    def __init__(self, path: Path, display: str):
        self.path = path
        self.display = display
        self.bytes_read = 0

    def _open(self, raw, errors: str = "strict") -> tuple[io.TextIOWrapper, object]:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors=errors, newline="")
        return text, csv.reader(text, strict=True)

    @contextlib.contextmanager
    def _reader(self) -> Iterator[tuple]:
        with open(self.path, "rb") as raw:
            _, reader = self._open(raw)
            try:
                yield raw, reader
            except csv.Error as e:
                raise self._csv_error(e, reader.line_num) from None
            except UnicodeDecodeError:
                raise at(self.display, self._undecodable_line(), "not UTF-8 text") from None

    def _csv_error(self, error: csv.Error, line: int) -> CepkitError:
        """Where a csv.Error belongs. A quote left open swallows the rest of the file (or a
        field-size limit's worth of it), so the reader fails far below the cause: name the line
        the quoted field starts on instead."""
        message = str(error)
        unterminated = message.startswith("unexpected end of data")
        if not (unterminated or message.startswith("field larger than field limit")):
            return at(self.display, line, f"malformed CSV: {message}")
        start = self._failing_record_start()
        with open(self.path, "rb") as raw:
            # Undecodable bytes past the point where the reader stopped are not this error's concern.
            lines = itertools.islice(self._open(raw, errors="replace")[0], start - 1, None)
            opened = _open_quote_line(lines, start, limit=4 * csv.field_size_limit())
        if opened is not None:
            what = "the end of the file" if unterminated else f"the field-size limit ({csv.field_size_limit()} characters)"
            return at(self.display, opened, f"malformed CSV: unclosed quote (the quoted field that starts on "
                                            f"this line runs to {what})")
        return at(self.display, start, f"malformed CSV: {message}")

    def _failing_record_start(self) -> int:
        """The line on which the record the reader fails on starts (one past the last good one)."""
        with open(self.path, "rb") as raw:
            _, reader = self._open(raw)
            last = 0
            try:
                for _ in reader:
                    last = reader.line_num
            except csv.Error:
                pass
        return last + 1

    def _undecodable_line(self) -> int:
        # The text layer decodes ahead of the csv reader, so find the line from the bytes, split as
        # the reader splits them (latin-1 maps every byte to one character). UTF-8 never encodes
        # a character with a CR or LF byte, so lines decode independently.
        with open(self.path, encoding="latin-1", newline="") as text:
            for n, line in enumerate(text, 1):
                try:
                    line.encode("latin-1").decode("utf-8")
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


def _open_quote_line(lines: Iterable[str], first: int, limit: int) -> int | None:
    """The line on which a quoted field opens that is still open after `lines` (numbered from
    `first`, beginning at a record start) or after `limit` characters; None if none is.

    Follows the csv module's default dialect: a quote opens a field only at the field's start,
    and inside one a doubled quote is a literal quote.
    """
    open_line = None
    field_start = True
    for n, line in enumerate(lines, first):
        line = line[:limit]
        limit -= len(line)
        i = 0
        while i < len(line):
            if open_line is not None:
                j = line.find(QUOTE, i)
                if j < 0:
                    break
                if line.startswith(QUOTE * 2, j):
                    i = j + 2
                    continue
                open_line, field_start, i = None, False, j + 1
                continue
            ch = line[i]
            if ch == QUOTE and field_start:
                open_line = n
            field_start = ch in ",\r\n"
            i += 1
        if not limit:
            break
    return open_line


# --- typed columns --------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """One output field: where it comes from in the CSV and how its text is parsed.

    `parse` is the definition (one value at a time, raising BadValue); `fast` is an optional
    vectorized equivalent over a whole chunk that raises Fallback on anything it is not sure
    of, leaving the verdict (and the error message) to `parse`. A column with `index` None is
    not in the CSV: every row gets `value`.
    """

    name: str                 # output name
    source: str | None        # CSV column name
    index: int | None         # position in the CSV row
    type: pa.DataType
    parse: Callable[[str], object] | None = None
    fast: Callable[[pa.Array], pa.Array] | None = None
    value: object = None


@dataclass(frozen=True)
class Layout:
    header_line: int
    width: int
    columns: tuple[Column, ...]   # output order; the timestamp is last

    @property
    def ts(self) -> Column:
        return self.columns[-1]


def _ts_parsers(spec: ConvertSpec) -> tuple[Callable[[str], int], Callable[[pa.Array], pa.Array] | None]:
    if spec.ts_format is not None:
        return format_timestamp_parser(spec.ts_format), fast_format_timestamp(spec.ts_format)
    return timestamp_parser(spec.ts_unit), FAST_TIMESTAMP[spec.ts_unit]


def header_layout(spec: ConvertSpec, display: str, line: int, raw: list[str]) -> Layout:
    header = [h.strip() for h in raw]
    listing = ", ".join(map(printable, header))
    seen: set[str] = set()
    for h in header:
        if h in seen:
            raise at(display, line, f"duplicate column {h!r} in the header")
        seen.add(h)

    def index(name: str, hint: str = "") -> int:
        if name not in seen:
            raise at(display, line, f"missing column {name!r} (columns: {listing}){hint}")
        return header.index(name)

    if spec.kind == "ticks":
        if spec.price_unit == "dollars":
            price = (parse_dollars, fast_dollars)
        else:
            price = (positive_int_parser(" (cents)"), fast_positive_int32)
        cols = [Column("symbol", spec.symbol_column, index(spec.symbol_column), pa.string(), parse_symbol),
                Column("price", spec.price_column, index(spec.price_column), pa.int32(), *price)]
        if spec.default_size is not None and spec.size_column not in seen:
            cols.append(Column("size", None, None, pa.int32(), value=spec.default_size))
        else:
            cols.append(Column("size", spec.size_column,
                               index(spec.size_column, "; give --default-size N if the file has no sizes"),
                               pa.int32(), positive_int_parser(""), fast_positive_int32))
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
                pa.int64(), *_ts_parsers(spec))
    return Layout(line, len(header), (*cols, ts))


# --- the row loop ---------------------------------------------------------------------------

@dataclass
class Chunk:
    arrays: list[pa.Array]  # output order, timestamp last
    ts: np.ndarray          # int64 epoch ms
    rows: int
    fraction_read: float    # of the CSV's bytes so far, for a progress estimate


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
                 prev: _Previous | None, ordered: bool, fraction_read: float) -> Chunk:
    """Parse a chunk column by column; raise on its first bad row (in row order).

    Rows all have the header's width. `first` is the record number of rows[0], for the line.
    """
    transposed = list(zip(*rows))
    parsed = []
    for col in layout.columns:
        if col.index is None:
            parsed.append((pa.repeat(pa.scalar(col.value, col.type), len(rows)), None))
        else:
            parsed.append(_parse_column(col, transposed[col.index]))
    bad = min((b for _, b in parsed if b is not None), default=None)
    ts = parsed[-1][0].to_numpy()
    limit = len(rows) if bad is None else bad[0]
    j = _order_violation(ts[:limit], prev) if ordered else None
    if j is not None:
        texts = transposed[layout.ts.index]
        before = prev.text if j == 0 else texts[j - 1].strip()
        bad = (j, f"{printable(layout.ts.source)} {printable(texts[j].strip())} is earlier than the previous "
                  f"row's {printable(before)} (rows must be in time order; --sort sorts them)")
    if bad is not None:
        raise records.error(first + bad[0], bad[1])
    return Chunk([a for a, _ in parsed], ts, len(rows), fraction_read)


def parsed_chunks(spec: ConvertSpec, records: CsvRecords, ordered: bool = True) -> Iterator[tuple[Layout, Chunk]]:
    """Check every record and yield the parsed columns, a batch of records at a time.

    With `ordered`, a row earlier than its predecessor is an error; without, rows may come in
    any time order (the caller sorts them).
    """
    layout: Layout | None = None
    prev: _Previous | None = None
    size = max(records.path.stat().st_size, 1)
    first = 0                  # record number of rows[0]; the header is record 0
    for rows in records.batches(CHUNK_ROWS):
        if layout is None:
            layout = header_layout(spec, records.display, records.line_of(0), rows[0])
            rows, first = rows[1:], 1
            if not rows:
                continue
        width = layout.width
        wrong = next((i for i, r in enumerate(rows) if len(r) != width), None)
        if wrong is not None:
            if wrong > 0:  # an earlier bad row is reported first
                _parse_chunk(layout, records, first, rows[:wrong], prev, ordered, 0.0)
            raise records.error(first + wrong, f"expected {width} fields as in the header (line "
                                               f"{layout.header_line}), got {len(rows[wrong])}")
        chunk = _parse_chunk(layout, records, first, rows, prev, ordered, records.bytes_read / size)
        prev = _Previous(int(chunk.ts[-1]), rows[-1][layout.ts.index].strip())
        first += len(rows)
        yield layout, chunk
    if layout is None:
        raise at(records.display, 1, "empty file (expected a header line with column names)")
    if prev is None:
        raise records.error(1, "no data rows after the header")
