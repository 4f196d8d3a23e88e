"""Reading an engine's output log (specs/OUTPUT_LOG.md) into one pandas DataFrame per stream.

The output log is the only thing the validator reads from an engine run, so this module is strict:
`output-log.json` must have the right kind, schema version, clocks and file list; every file must
hold the stream's fields (`kit.records` schema) and the sink's `arrivalTS`, with the right types.
Anything wrong raises one `CepkitError` line naming the file and the field, column or row.

Columns come back with the schema's logical types: string columns as pandas strings (categorical
when dictionary-encoded: always from CSV, usually from Parquet), int as int32, long as int64,
double as float64. An int or long column holding nulls becomes a nullable pandas Int32/Int64
column; `arrivalTS` may not be null. Columns outside the schema and the harness stamps are dropped
(a stream read without a schema keeps all its columns). Rows keep arrival order: files in the
listed order, rows in file order.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kit.datafiles import read_data_table
from kit.errors import CepkitError, at
from kit.faults import LOGGED_KINDS
from kit.inputs import require_regular
from kit.jsonfile import read_json_object
from kit.outputlog import ARRIVAL_TS, BATCH_ID, FORMATS, INGEST_TS, KIND, LOG_NAME, PACINGS, SCHEMA_VERSION
from kit.records import RecordSchema, arrow_type

# The harness sink's stamps: every one is a wall-clock long (batchId a long id).
STAMPS = ((ARRIVAL_TS, True), (INGEST_TS, False), (BATCH_ID, False))
RESOURCE_COLUMNS = ("ts_ms", "cpu_percent", "rss_bytes")

_NULLABLE = {"int": pd.Int32Dtype(), "long": pd.Int64Dtype()}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_BITS = {"int": "an int (32 bits)", "long": "a long (64 bits)"}


@dataclass(frozen=True)
class Clocks:
    """How the run's wall clock maps onto simulated time: sim = sim_start + (wall - run_start) * speed.

    The rate profile's time zero is `sim_start_ms`, so `run_ms(wall)` is a wall instant's position
    on the profile's time axis (simulated ms since the start of the run).
    """

    run_start_wall_ms: int
    sim_start_ms: int
    speed: float = 1.0
    # "tickts": events were released at their recorded times / speed, so the dataset's rate profile
    # is the run's time axis; "rate" or "pull": no such relation, the axis is wall time.
    pacing: str = "tickts"

    def __post_init__(self) -> None:
        for name in ("run_start_wall_ms", "sim_start_ms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise CepkitError(f"clocks: {name} must be an integer epoch ms, got {v!r}")
        if isinstance(self.speed, bool) or not isinstance(self.speed, (int, float)) \
                or not math.isfinite(self.speed) or self.speed <= 0:
            raise CepkitError(f"clocks: speed must be a positive number, got {self.speed!r}")

    def run_ms(self, wall_ms) -> np.ndarray:
        """Simulated ms since the run start for wall-clock epoch ms (vectorized, float64)."""
        return (np.asarray(wall_ms, dtype=np.float64) - self.run_start_wall_ms) * self.speed

    def sim_ms(self, wall_ms) -> np.ndarray:
        return self.sim_start_ms + self.run_ms(wall_ms)

    def wall_ms(self, run_ms) -> np.ndarray:
        """Inverse of `run_ms`: the wall-clock epoch ms of a point on the profile's time axis."""
        return self.run_start_wall_ms + np.asarray(run_ms, dtype=np.float64) / self.speed

    def to_dict(self) -> dict:
        return {"run_start_wall_ms": int(self.run_start_wall_ms), "sim_start_ms": int(self.sim_start_ms),
                "speed": float(self.speed), "pacing": self.pacing}


@dataclass(frozen=True)
class LoggedFault:
    """A fault the harness injected into the engine (kit/faults.py): its kind and kill time."""

    fault: str                  # as asked, e.g. "kill-engine@40s"
    kind: str
    at_ms: int                  # wall-clock epoch ms of the kill


class LazyStreams(Mapping):
    """Each stream's rows, read from its files the first time they are asked for and then kept: a
    reader that needs one stream, or only its row count, never holds a long run's other streams."""

    def __init__(self, files: Mapping[str, tuple[Path, ...]], fmt: str, schemas: Mapping[str, RecordSchema]):
        self._files, self._fmt, self._schemas = dict(files), fmt, dict(schemas)
        self._read: dict[str, pd.DataFrame] = {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._read:
            self._read[name] = _read_stream(self._files[name], self._fmt, self._schemas.get(name))
        return self._read[name]

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


@dataclass(frozen=True)
class OutputLog:
    """A read output log: where it is, its format and clocks, each stream's rows, and the faults
    injected during the run. `schemas` are the fields each stream was checked against."""

    directory: Path
    format: str
    clocks: Clocks
    streams: Mapping[str, pd.DataFrame]
    files: dict[str, tuple[Path, ...]]
    faults: tuple[LoggedFault, ...] = ()
    schemas: Mapping[str, RecordSchema] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise CepkitError(f"{self.directory}: unknown output-log format {self.format!r}")
        if set(self.streams) != set(self.files):
            raise CepkitError(f"{self.directory}: streams and files disagree")

    def stream(self, name: str) -> pd.DataFrame:
        self._known(name)
        return self.streams[name]

    def iter_stream(self, name: str, columns: Sequence[str] | None = None) -> Iterator[pd.DataFrame]:
        """The stream's rows file by file, checked as `stream` checks them, without keeping them;
        `columns` reads only those (the ones a file lacks are left out, as in `stream`)."""
        self._known(name)
        for path in self.files[name]:
            yield _read_file(path, self.format, self.schemas.get(name), columns)

    def rows(self, name: str) -> int | None:
        """The stream's row count from its files' metadata without reading them (Parquet), or
        None when only reading would tell (CSV)."""
        self._known(name)
        if self.format != "parquet":
            return None
        try:
            return sum(pq.ParquetFile(p).metadata.num_rows for p in self.files[name])
        except (pa.ArrowException, OSError) as e:
            raise CepkitError(f"{self.directory}: stream {name}: cannot read a file's metadata: {_first_line(e)}") \
                from None

    def _known(self, name: str) -> None:
        if name not in self.files:
            raise CepkitError(f"{self.directory / LOG_NAME}:streams: no stream {name!r} "
                              f"(has {', '.join(self.files) or 'none'})")


def log_path(path: str | Path) -> Path:
    """`output-log.json` for a run directory, its `outputs/` directory or the file itself."""
    p = Path(path)
    if p.name == LOG_NAME:
        return p
    if (p / LOG_NAME).exists() or not (p / "outputs").is_dir():
        return p / LOG_NAME
    return p / "outputs" / LOG_NAME


def read_output_log(path: str | Path, schemas: Mapping[str, RecordSchema] | None = None, *,
                    only: bool = False, lazy: bool = False) -> OutputLog:
    """Read every stream of the log at `path` (run dir, outputs dir or output-log.json).

    `schemas` names the streams the run must have and their fields; a log stream that is not in
    `schemas` is read with the stamp columns checked only, or, with `only` (validation), is an
    error naming it (specs/OUTPUT_LOG.md: an engine that wrote a stream under another name would
    otherwise have it silently ignored). Pass `{s.name: s for s in (INDICATOR, MARKET_ORDER)}` for
    Pairs, or the query output schemas for a microbenchmark run. With `lazy`, only the log and
    its file list are read now; each stream's files are read (and checked) when it is first used
    (`LazyStreams`), or file by file with `OutputLog.iter_stream`: what a run too large to hold
    whole needs (validator/micro_run.py).
    """
    lpath = log_path(path)
    meta = _read_meta(lpath)
    fmt = meta["format"]
    clocks = _clocks(lpath, meta)
    streams_meta = meta["streams"]
    schemas = dict(schemas or {})
    for name in schemas:
        if name not in streams_meta:
            raise at(lpath, "streams", f"no stream {name!r} (the log has {', '.join(streams_meta) or 'none'})")
    if only:
        for name in streams_meta:
            if name not in schemas:
                raise at(lpath, f"streams.{name}", f"a stream the spec does not have (it has "
                                                   f"{', '.join(schemas) or 'none'}); was it written under "
                                                   "another name?")
    files = {name: tuple(_stream_files(lpath, name, entry, fmt)) for name, entry in streams_meta.items()}
    streams = LazyStreams(files, fmt, schemas)
    if not lazy:
        streams = {name: streams[name] for name in files}
    return OutputLog(lpath.parent, fmt, clocks, streams, files, _faults(lpath, meta), schemas)


def _read_stream(paths: Sequence[Path], fmt: str, schema: RecordSchema | None) -> pd.DataFrame:
    parts = [_read_file(p, fmt, schema) for p in paths]
    if not parts:
        return _empty_frame(schema)
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def read_resources(path: str | Path) -> pd.DataFrame | None:
    """`metrics/resources.csv` of a run (ts_ms, cpu_percent, rss_bytes, ...), or None if absent.

    `path` is the run directory or the CSV file itself. Extra memory columns are kept.
    """
    p = Path(path)
    csv_path = p if p.suffix == ".csv" else p / "metrics" / "resources.csv"
    if not csv_path.exists():
        return None
    require_regular(csv_path, what="a CSV file")
    table = read_data_table(csv_path, "csv")
    for col in RESOURCE_COLUMNS:
        if col not in table.column_names:
            raise at(csv_path, 1, f"missing column {col!r} (has {', '.join(table.column_names)})")
    df = table.to_pandas()
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]):
            raise at(csv_path, 1, f"column {col!r} is not numeric")
    return df.sort_values("ts_ms", kind="stable", ignore_index=True)


# -- output-log.json -------------------------------------------------------------------------

def _read_meta(lpath: Path) -> dict:
    meta = read_json_object(lpath, missing=f"not found; is {lpath.parent} an engine output log?",
                            what="an output log", kind="output-log")
    if meta.get("kind") != KIND:
        raise at(lpath, "kind", f"expected {KIND!r}, got {meta.get('kind')!r}")
    if type(meta.get("schema_version")) is not int or meta["schema_version"] != SCHEMA_VERSION:   # not True
        raise at(lpath, "schema_version", f"expected {SCHEMA_VERSION}, got {meta.get('schema_version')!r}")
    if meta.get("format") not in FORMATS:
        raise at(lpath, "format", f"expected one of {', '.join(FORMATS)}, got {meta.get('format')!r}")
    if not isinstance(meta.get("streams"), dict):
        raise at(lpath, "streams", "expected an object mapping stream names to their files")
    return meta


def _clocks(lpath: Path, meta: dict) -> Clocks:
    for key in ("run_start_wall_ms", "sim_start_ms"):
        v = meta.get(key)
        if isinstance(v, bool) or not isinstance(v, int):
            raise at(lpath, key, f"expected an integer epoch ms, got {v!r}")
    speed = meta.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not speed > 0 or not math.isfinite(speed):
        raise at(lpath, "speed", f"expected a positive number, got {speed!r}")
    pacing = meta.get("pacing", "tickts" if "speed" in meta else "rate")
    if pacing not in PACINGS:
        raise at(lpath, "pacing", f"expected one of {', '.join(PACINGS)}, got {pacing!r}")
    return Clocks(meta["run_start_wall_ms"], meta["sim_start_ms"], float(speed), pacing)


def _faults(lpath: Path, meta: dict) -> tuple[LoggedFault, ...]:
    entries = meta.get("faults", [])
    if not isinstance(entries, list):
        raise at(lpath, "faults", f"expected a list, got {type(entries).__name__}")
    out = []
    for i, e in enumerate(entries):
        where = f"faults[{i}]"
        if not isinstance(e, dict) or e.get("kind") not in LOGGED_KINDS:
            raise at(lpath, where, f"expected an object with kind one of {', '.join(LOGGED_KINDS)}, got {e!r}")
        at_ms = e.get("at_ms")
        if isinstance(at_ms, bool) or not isinstance(at_ms, int) or at_ms < 0:
            raise at(lpath, f"{where}.at_ms", f"expected an epoch ms, got {at_ms!r}")
        out.append(LoggedFault(str(e.get("fault") or e["kind"]), e["kind"], at_ms))
    return tuple(sorted(out, key=lambda f: f.at_ms))


def _stream_files(lpath: Path, name: str, entry, fmt: str) -> list[Path]:
    files = entry.get("files") if isinstance(entry, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
        raise at(lpath, f"streams.{name}.files", "expected a list of file names")
    out = []
    for f in files:
        rel = Path(f)
        # Files must live inside the outputs directory: the log describes one self-contained run.
        if rel.is_absolute() or ".." in rel.parts:
            raise at(lpath, f"streams.{name}.files", f"{f!r} must be a path inside {lpath.parent}")
        if rel.suffix != f".{fmt}":
            raise at(lpath, f"streams.{name}.files", f"{f!r} does not end in .{fmt} (format is {fmt})")
        p = lpath.parent / rel
        if not p.exists():
            raise CepkitError(f"{p}: listed in {lpath.name} for stream {name} but missing")
        out.append(require_regular(p, what=f"a {fmt} file", missing=f"listed in {lpath.name} for stream {name} "
                                                                     "but missing"))
    return out


# -- data files ------------------------------------------------------------------------------

def _read_file(path: Path, fmt: str, schema: RecordSchema | None,
               columns: Sequence[str] | None = None) -> pd.DataFrame:
    """One file's rows; with `columns`, only those (the checks on them unchanged)."""
    expected = _expected_columns(schema)
    if columns is not None:
        expected = [(c, required) for c, required in expected if c in columns]
    table = _read_parquet(path, columns) if fmt == "parquet" else _read_csv(path, expected, keep_all=schema is None)
    for col, required in expected:
        if required and col not in table.column_names:
            raise at(path, col, f"missing column (has {', '.join(table.column_names) or 'none'})")
    frame = {}
    known = {col for col, _ in expected}
    for col in table.column_names:
        if columns is not None and col not in columns:
            continue
        if col in known:
            frame[col] = _checked_column(path, fmt, col, table.column(col), _logical_type(schema, col))
        elif schema is None:
            # A stream without a schema keeps its columns as the file has them.
            frame[col] = table.column(col).to_pandas()
    return pd.DataFrame(frame)


def _expected_columns(schema: RecordSchema | None) -> list[tuple[str, bool]]:
    fields = [(f.name, True) for f in schema.fields] if schema is not None else []
    return fields + [s for s in STAMPS if s[0] not in {n for n, _ in fields}]


def _logical_type(schema: RecordSchema | None, col: str) -> str:
    if schema is not None and col in schema.names:
        return schema.field(col).type
    return "long"  # the harness stamps


def _read_parquet(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    try:
        if columns is not None:
            present = set(pq.read_schema(path).names)
            return pq.read_table(path, columns=[c for c in columns if c in present])
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise CepkitError(f"{path}: cannot read as Parquet: {_first_line(e)}") from None


def _read_csv(path: Path, expected: list[tuple[str, bool]], keep_all: bool = False) -> pa.Table:
    try:
        # utf-8-sig: a byte-order mark (what spreadsheet programs write) is not part of the first
        # column's name; pyarrow's reader below skips it too.
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise CepkitError(f"{path}: cannot read as CSV: {_first_line(e)}") from None
    wanted = [c for c, _ in expected if c in header]
    # Columns are read as text and converted in _parse_csv_column, so that a bad value can be
    # reported with its line (pyarrow's own conversion error does not say which row).
    try:
        table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            column_types={c: pa.string() for c in wanted}, include_columns=header if keep_all else wanted,
            strings_can_be_null=True))
    except (pa.ArrowException, OSError) as e:
        raise CepkitError(f"{path}: cannot read as CSV: {_first_line(e)}") from None
    return table if wanted or keep_all else pa.table({})


def _checked_column(path: Path, fmt: str, col: str, arr: pa.ChunkedArray, logical: str) -> pd.Series:
    if fmt == "csv":
        arr = _parse_csv_column(path, col, arr, logical)
    else:
        arr = _check_arrow_type(path, col, arr, logical)
    if arr.null_count and col == ARRIVAL_TS:
        raise _row_error(path, fmt, col, _first_null(arr), "is null; every row needs the sink's arrival time")
    if logical == "string":
        return arr.to_pandas()
    if logical in _NULLABLE:
        if arr.null_count:
            return arr.to_pandas(types_mapper={pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}.get)
        return pd.Series(arr.to_numpy(), dtype=np.int32 if logical == "int" else np.int64)
    return pd.Series(arr.to_numpy(), dtype=np.float64)


def _check_arrow_type(path: Path, col: str, arr: pa.ChunkedArray, logical: str) -> pa.ChunkedArray:
    t = arr.type
    if pa.types.is_null(t):
        # A column with no non-null value (e.g. an empty file written from pandas) has no type.
        return arr.cast(arrow_type(logical))
    value_type = t.value_type if pa.types.is_dictionary(t) else t
    if logical == "string":
        if not (pa.types.is_string(value_type) or pa.types.is_large_string(value_type)):
            raise at(path, col, f"expected a string column, got {t}")
        return arr if pa.types.is_dictionary(t) else arr.cast(pa.string())
    if pa.types.is_dictionary(t):
        raise at(path, col, f"expected a {logical} column, got {t}")
    if logical == "double":
        if not (pa.types.is_floating(t) or pa.types.is_integer(t)):
            raise at(path, col, f"expected a double column, got {t}")
        return arr.cast(pa.float64())
    if not pa.types.is_integer(t):
        raise at(path, col, f"expected an integer ({logical}) column, got {t}")
    return _fit_integers(path, "parquet", col, arr, logical)


def _fit_integers(path: Path, fmt: str, col: str, arr: pa.ChunkedArray, logical: str) -> pa.ChunkedArray:
    lo, hi = (_INT32_MIN, _INT32_MAX) if logical == "int" else (-(1 << 63), (1 << 63) - 1)
    if pa.types.is_unsigned_integer(arr.type):
        bad = pc.greater(arr.cast(pa.uint64()), pa.scalar(hi, pa.uint64()))
    else:
        wide = arr.cast(pa.int64())
        bad = pc.or_(pc.less(wide, lo), pc.greater(wide, hi))
    if pc.any(bad).as_py():
        row = _first_true(bad)
        raise _row_error(path, fmt, col, row, f"value {arr[row].as_py()} does not fit in {_BITS[logical]}")
    return arr.cast(arrow_type(logical))


def _parse_csv_column(path: Path, col: str, text: pa.ChunkedArray, logical: str) -> pa.ChunkedArray:
    if logical == "string":
        # Dictionary-encoded like Parquet's string columns: pandas gets a compact categorical.
        return text.dictionary_encode()
    target = pa.int64() if logical in _NULLABLE else pa.float64()
    try:
        parsed = text.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        parsed = None
    if parsed is None:
        # Find the first value that does not parse, to name its line.
        values = text.to_pandas()
        if logical in _NULLABLE:
            bad = values.notna() & ~values.str.fullmatch(r"\s*[+-]?\d+\s*").fillna(False).astype(bool)
        else:
            bad = values.notna() & pd.to_numeric(values, errors="coerce").isna()
        rows = np.flatnonzero(bad.to_numpy())
        if not len(rows):
            raise at(path, col, f"cannot parse the column as {logical}")
        raise _row_error(path, "csv", col, int(rows[0]), f"{values.iloc[int(rows[0])]!r} is not a valid {logical}")
    return _fit_integers(path, "csv", col, parsed, logical) if logical in _NULLABLE else parsed


def _row_error(path: Path, fmt: str, col: str, row: int, message: str) -> CepkitError:
    # CSV: the file line (the header is line 1); Parquet: the 1-based row number in the file.
    if fmt == "csv":
        return at(path, row + 2, f"column {col}: {message}")
    return at(path, col, f"row {row + 1}: {message}")


def _first_null(arr: pa.ChunkedArray) -> int:
    return _first_true(pc.is_null(arr))


def _first_true(mask: pa.ChunkedArray) -> int:
    return int(np.flatnonzero(mask.to_numpy(zero_copy_only=False))[0])


def _empty_frame(schema: RecordSchema | None) -> pd.DataFrame:
    cols = {}
    for col, required in _expected_columns(schema):
        if not required:
            continue
        logical = _logical_type(schema, col)
        dtype = {"string": object, "int": np.int32, "long": np.int64, "double": np.float64}[logical]
        cols[col] = pd.Series([], dtype=dtype)
    return pd.DataFrame(cols)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
