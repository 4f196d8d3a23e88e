"""Convert a user's own CSV of timestamped events into a cepkit dataset.

Two kinds of input:
- `micro`: microbenchmark events; written as stream S1 (`S1-NNNNN-of-MMMMM.*`) with columns ID
  (int32), A1..AN (float64) and TS (int64 epoch ms), like `datagen.micro`;
- `ticks`: stock ticks; written as `ticks-NNNNN-of-MMMMM.*` with symbol, price (int32 cents),
  size (int32) and tickTS (int64 epoch ms), in the Arrow schemas of `datagen.pairs`. Prices may
  be given in dollars, sizes may be absent (one default size), and an optional correlations CSV
  (symbol1, symbol2) yields the `pairs-aux.json` the query generator reads (`convert_pairs`).

This module holds what to convert (`ConvertSpec`) and the conversion: the output files, the
auxiliary file and the manifest. Reading and checking the rows is `datagen.convert_csv`; handing
them out in time order (streamed, or sorted in memory with `sort`) and placing the file splits is
`datagen.convert_order`. Every row is checked; the first bad one stops the conversion with a
one-line `CepkitError` naming the file, the physical line the record starts on (the header is
line 1) and the field. Output goes through `StagedDir`, so a failed conversion leaves nothing.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from datagen.convert_csv import Chunk, Layout, check_readable
from datagen.convert_order import Progress, Source, Tally, gc_paused, sorted_source, streamed_source
from datagen.convert_pairs import check_pairs_present, converted_aux, read_correlations
from datagen.csv_values import INT32_MAX, check_time_format
from datagen.output import GeneratedDataset, SplitWriter
from datagen.pairs import TICK_CSV_SCHEMA, TICK_FILE_SCHEMA
from kit.atomic import StagedDir
from kit.config import FORMATS, MAX_SCALE_FACTOR
from kit.datafiles import sha256_of
from kit.errors import CepkitError, at
from kit.manifest import write_manifest
from kit.records import micro_event
from kit.workload.aux import write_aux

KINDS = ("micro", "ticks")
TS_UNITS = ("ms", "s", "us", "iso")
PRICE_UNITS = ("cents", "dollars")
DEFAULT_TS_COLUMN = {"micro": "TS", "ticks": "tickTS"}
MICRO_STREAM = "S1"

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
        # The config's range (pairs.scale_factor): the strategies file generated from this dataset
        # records the scale factor and refuses a larger one.
        if self.scale_factor > MAX_SCALE_FACTOR:
            raise CepkitError(f"convert: scale factor must be <= {MAX_SCALE_FACTOR}, got {self.scale_factor}")
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
    tally = Tally(progress, 2 if spec.sort or spec.file_count > 1 else 1)
    with gc_paused():
        source = sorted_source(spec, tally) if spec.sort else streamed_source(spec, tally)
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


def _write(spec: ConvertSpec, directory: Path, source: Source) -> _Written:
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
