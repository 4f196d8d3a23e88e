"""Reading a dataset's data files: verifying them against the manifest, hashing, row counting and
naming the bad value.

Shared by the manifest reader (kit.manifest), the harness's dataset reader and the validator's
tick reader, so each file is read once per process and every problem is one line:

- `verify_files(m, checksums=...)` checks the files a manifest (kit.manifest) lists: present and
  regular, byte sizes, Parquet row counts (from the footer) and, with `checksums`, sha256 and CSV
  row counts (one read per file), calling `progress(done, total)` for much to hash;
- `file_digest` reads a file once for its sha256 (and, for CSV, its record count), kept by
  (resolved path, size, mtime_ns) so a second verification of an unchanged file costs a `stat`;
  `sha256_of` and `parquet_rows` (from the footer) use the same caches;
- `CsvRecordCounter` counts records as pyarrow's CSV reader sees them (quoted line breaks);
- `streamed_parquet(path)` opens a Parquet file to be read batch by batch without keeping what
  it has read (the feed, the validator's tick reader);
- `csv_value_error`, `csv_header`, `first_decrease` and `first_line` turn a reader's failure or a
  time column going backwards into a message that names the file, the line and the column.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kit.errors import CepkitError, at

if TYPE_CHECKING:       # kit.manifest imports this module; the types are only for annotations
    from kit.manifest import DataFile, Manifest

PROGRESS_MIN_BYTES = 256 << 20          # below this much to hash, progress is never called
_BLOCK = 1 << 22                        # read size for hashing
_COUNT_BLOCK = 1 << 20                  # CSV record counting works on slices of this size

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class _Digest:
    sha256: str
    csv_rows: int | None


_DIGESTS: dict[tuple[str, int, int], _Digest] = {}
_PARQUET_ROWS: dict[tuple[str, int, int], int] = {}
_CACHE_LIMIT = 100_000


def is_digested(ident: tuple[str, int, int]) -> bool:
    """Whether the file with this (resolved path, size, mtime_ns) was hashed in this process."""
    return ident in _DIGESTS


def parquet_rows(path: Path, ident: tuple[str, int, int] | None = None) -> int:
    """Rows of a Parquet file from its footer; an unreadable file is an error naming it."""
    if ident is not None and ident in _PARQUET_ROWS:
        return _PARQUET_ROWS[ident]
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except (OSError, pa.ArrowException, ValueError) as e:
        raise at(path, None, f"not a readable Parquet file: {first_line(e)}") from None
    if ident is not None:
        _remember(_PARQUET_ROWS, ident, rows)
    return rows


def streamed_parquet(path: Path):
    """A `pyarrow.parquet.ParquetFile` for reading once, batch by batch, in flat memory.

    pyarrow's default `pre_buffer=True` caches every row group's compressed bytes until the reader
    is gone (apache/arrow#39808: the cache has no eviction), so a feed replaying a one-file dataset
    grew by the whole file over the run: 2.3 bytes per event, +2.6 GiB/h, in the SF 512 standard
    run. Without it, a batch's pages are read when the batch is."""
    import pyarrow.parquet as pq
    return pq.ParquetFile(path, pre_buffer=False)


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value


class Ticker:
    """Counts bytes read and reports them to `progress(done, total)` (if any)."""

    def __init__(self, progress: Progress | None, total: int):
        self.progress, self.total, self.done = progress, total, 0

    def __call__(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)


def file_digest(path: Path, ident: tuple[str, int, int], *, count_csv: bool, tick: Ticker) -> _Digest:
    cached = _DIGESTS.get(ident)
    if cached is not None and (cached.csv_rows is not None or not count_csv):
        return cached
    h = hashlib.sha256()
    counter = CsvRecordCounter() if count_csv else None
    try:
        with open(path, "rb") as fh:
            while True:
                block = fh.read(_BLOCK)
                if not block:
                    break
                h.update(block)
                if counter is not None:
                    counter.feed(block)
                tick(len(block))
    except OSError as e:
        raise at(path, None, f"cannot read: {e.strerror or e}") from None
    d = _Digest(h.hexdigest(), None if counter is None else max(counter.records() - 1, 0))
    _remember(_DIGESTS, ident, d)
    return d


def sha256_of(path: str | os.PathLike) -> str:
    """sha256 of a file, from the in-process cache when the file has not changed."""
    p = Path(path)
    st = p.stat()
    ident = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    return file_digest(p, ident, count_csv=False, tick=Ticker(None, 0)).sha256


class CsvRecordCounter:
    """Counts CSV records as pyarrow's reader sees them: fields in double quotes may hold line
    breaks; `\\n`, `\\r` and `\\r\\n` end a line; empty lines are skipped. Fed block by block."""

    def __init__(self) -> None:
        self.count = 0
        self.in_quotes = False        # parity of the quotes seen so far
        self.after_break = True       # the previous byte ended a line (or nothing was read yet)

    def feed(self, block: bytes) -> None:
        for lo in range(0, len(block), _COUNT_BLOCK):
            self._feed(np.frombuffer(block, dtype=np.uint8, count=min(_COUNT_BLOCK, len(block) - lo), offset=lo))

    def _feed(self, a: np.ndarray) -> None:
        if not len(a):
            return
        quote = a == 34
        # Quotes strictly before each byte, as a parity: a line break outside quotes ends a record.
        before = (np.cumsum(quote, dtype=np.int64) - quote + self.in_quotes) & 1
        newline = (a == 10) | (a == 13)
        breaks = newline & (before == 0)
        prev_break = np.empty(len(a), dtype=bool)
        prev_break[0] = self.after_break
        prev_break[1:] = breaks[:-1]
        # A record starts at a byte that is no line break right after a line break that counts.
        self.count += int(np.count_nonzero(~newline & prev_break))
        self.after_break = bool(breaks[-1])
        self.in_quotes = bool((int(np.count_nonzero(quote)) + self.in_quotes) & 1)

    def records(self) -> int:
        return self.count


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type's name when empty), for one-line errors."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def read_data_table(path: Path, fmt: str, **options):
    """A whole data file (Parquet or CSV) as a pyarrow Table; every way it cannot be read is one
    line naming the file: pyarrow's errors, and column names that are not UTF-8, which pyarrow
    decodes only when they are first asked for (a traceback, later, far from the read)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    what = "Parquet" if fmt == "parquet" else "CSV"
    try:
        table = pq.read_table(path, **options) if fmt == "parquet" else pacsv.read_csv(path, **options)
        table.column_names       # decoded here, inside the try
    except UnicodeDecodeError as e:
        raise at(path, 1 if fmt == "csv" else None,
                 f"cannot read as {what}: a column name is not UTF-8 text ({e.reason})") from None
    except (pa.ArrowException, OSError) as e:
        raise at(path, None, f"cannot read as {what}: {first_line(e)}") from None
    return table


def csv_header(path: Path) -> list[str]:
    """The column names on a CSV data file's first line; an unreadable one is one line naming it."""
    import csv
    try:
        # utf-8-sig: a byte-order mark is not part of the first column's name (pyarrow skips it too).
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise at(path, 1, f"cannot read the CSV header: {first_line(e)}") from None


def first_decrease(ts: np.ndarray, last_ts: int | None) -> int | None:
    """Index of the first value below its predecessor (`last_ts` precedes ts[0]), or None: data
    files list events in event order, so their time column never decreases (DATA.md)."""
    if last_ts is not None and len(ts) and ts[0] < last_ts:
        return 0
    down = np.flatnonzero(np.diff(ts) < 0)
    return int(down[0]) + 1 if down.size else None


# -- data files: naming the value a CSV reader choked on ---------------------------------------

def csv_value_error(path: str | os.PathLike, types: Mapping, error: BaseException) -> CepkitError:
    """The error for a CSV file pyarrow failed to convert with `types` ({column: arrow type}):
    it names the file, the line (the header is line 1) and the column of the first value that is
    not of its column's type, which pyarrow's message does not. Reads the file again as text, so
    only call it on that error path."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            include_columns=list(types), column_types={c: pa.string() for c in types}, strings_can_be_null=True))
    except (OSError, pa.ArrowException) as e:
        return at(path, None, f"cannot read as CSV: {first_line(e)}")
    for col, t in types.items():
        values = table.column(col)
        if pa.types.is_integer(t):
            ok = pc.match_substring_regex(values, r"^\s*[+-]?\d+\s*$").fill_null(True)
            ok = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
            what = "an integer"
        elif pa.types.is_floating(t):
            import pandas as pd
            text = values.to_pandas()
            ok = (text.isna() | pd.to_numeric(text, errors="coerce").notna()).to_numpy(dtype=bool)
            what = "a number"
        else:
            continue
        bad = np.flatnonzero(~ok)
        if len(bad):
            return at(path, int(bad[0]) + 2, f"column {col}: {values[int(bad[0])].as_py()!r} is not {what}")
        try:
            values.cast(t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for i, v in enumerate(values.to_pylist()):
                try:
                    pa.scalar(v, pa.string()).cast(t)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return at(path, i + 2, f"column {col}: {v!r} does not fit in {t}")
    return at(path, None, f"cannot read as CSV: {first_line(error)}")


# -- checking the files a manifest lists ------------------------------------------------------

def verify_files(m: Manifest, *, checksums: bool = True, progress: Progress | None = None) -> None:
    """Check every listed file: present, a regular file, its size and Parquet row count; with
    `checksums` also its sha256 (where listed) and the row count of a CSV file."""
    todo: list[tuple[DataFile, tuple[str, int, int]]] = []
    for f in m.data_files():
        st = _stat(m, f)
        if f.bytes is not None and st.st_size != f.bytes:
            raise at(f.path, None, f"has {st.st_size} bytes but {m.path.name} says {f.bytes} ({f.key}.bytes); "
                                   "the file changed after it was written")
        ident = (str(f.path.resolve()), st.st_size, st.st_mtime_ns)
        if f.name.endswith(".parquet"):
            rows = parquet_rows(f.path, ident)
            if rows != f.rows:
                raise at(f.path, None, f"has {rows} rows but {m.path.name} says {f.rows} ({f.key}.rows)")
        if checksums and (f.sha256 is not None or not f.name.endswith(".parquet")):
            todo.append((f, ident))
    if todo:
        _check_digests(m, todo, progress)
    total = m.doc.get("total_rows")
    replayed = sum(s.rows for s in m.streams) if m.streams else sum(f.rows for f in m.files)
    if total is not None and total != replayed:
        raise m.error("total_rows", f"is {total} but the listed files hold {replayed} rows")


def _check_digests(m: Manifest, todo: list[tuple[DataFile, tuple[str, int, int]]],
                   progress: Progress | None) -> None:
    pending = sum(ident[1] for _, ident in todo if not is_digested(ident))
    tick = Ticker(progress if progress is not None and pending >= PROGRESS_MIN_BYTES else None, pending)
    for f, ident in todo:
        d = file_digest(f.path, ident, count_csv=not f.name.endswith(".parquet"), tick=tick)
        if f.sha256 is not None and d.sha256 != f.sha256:
            raise at(f.path, None, f"sha256 {d.sha256[:12]}... differs from {m.path.name}'s {f.sha256[:12]}... "
                                   f"({f.key}.sha256); the file changed after it was written")
        if d.csv_rows is not None and d.csv_rows != f.rows:
            raise at(f.path, None, f"has {d.csv_rows} rows but {m.path.name} says {f.rows} ({f.key}.rows)")


def _stat(m: Manifest, f: DataFile) -> os.stat_result:
    try:
        st = f.path.stat()
    except FileNotFoundError:
        raise at(f.path, None, f"listed in {m.path.name} but missing ({f.key})") from None
    except OSError as e:
        raise at(f.path, None, f"cannot read: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise at(f.path, None, f"listed in {m.path.name} ({f.key}) but not a regular file")
    return st
