"""Reading a tick dataset for the reference engine, independently of the generator's code.

The validator must not share code with what it checks, so it reads datasets from their
documented layout (specs/DATA.md): `manifest.json` lists the tick files in event order; each
file holds `symbol`, `price`, `tickTS` (plus `size`). Batches are yielded in event order with
the symbol mapped to an index into a caller-given list (-1 for symbols not in the list).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kit.errors import CepkitError, at

MANIFEST_KIND = "cepkit.datagen-manifest"
BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class TickBatch:
    """A run of consecutive ticks: symbol index (-1 if not wanted), price cents, tickTS ms."""

    offset: int            # event-order position of the first row
    sym: np.ndarray        # int32
    price: np.ndarray      # int64
    tick_ts_ms: np.ndarray  # int64


def read_manifest(directory: Path) -> dict:
    """A dataset's manifest.json, checked to be a cepkit datagen manifest."""
    mpath = Path(directory) / "manifest.json"
    try:
        manifest = json.loads(mpath.read_text())
    except FileNotFoundError:
        raise CepkitError(f"{mpath}: not found; is {directory} a cepkit dataset?") from None
    except json.JSONDecodeError as e:
        raise at(mpath, e.lineno, f"invalid JSON: {e.msg}") from None
    if manifest.get("kind") != MANIFEST_KIND:
        raise at(mpath, "kind", f"expected {MANIFEST_KIND!r}, got {manifest.get('kind')!r}")
    return manifest


def dataset_files(directory: Path) -> tuple[list[Path], dict]:
    """The tick files of a dataset in event order, and its manifest."""
    directory = Path(directory)
    mpath = directory / "manifest.json"
    manifest = read_manifest(directory)
    files = [directory / f["path"] for f in manifest.get("files", [])]
    if not files or not all(f.name.startswith("ticks-") for f in files):
        raise at(mpath, "files", "lists no tick files (ticks-*.parquet or ticks-*.csv)")
    for f in files:
        if not f.exists():
            raise CepkitError(f"{f}: listed in {mpath.name} but missing")
    return files, manifest


def _batches_of(path: Path) -> Iterator[pa.RecordBatch]:
    cols = ["symbol", "price", "tickTS"]
    try:
        if path.suffix == ".parquet":
            yield from pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS, columns=cols)
        else:
            opts = pacsv.ConvertOptions(include_columns=cols, column_types={
                "symbol": pa.string(), "price": pa.int64(), "tickTS": pa.int64()})
            yield from pacsv.open_csv(path, convert_options=opts, read_options=pacsv.ReadOptions(block_size=1 << 24))
    except (pa.ArrowInvalid, KeyError) as e:
        raise CepkitError(f"{path}: cannot read ticks: {str(e).splitlines()[0]}") from None


def _symbol_index(col: pa.Array, wanted: pa.Array) -> np.ndarray:
    if pa.types.is_dictionary(col.type):
        lookup = pc.index_in(col.dictionary, value_set=wanted).fill_null(-1).to_numpy(zero_copy_only=False)
        return lookup[col.indices.to_numpy(zero_copy_only=False)].astype(np.int32)
    return pc.index_in(col, value_set=wanted).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)


def iter_ticks(directory: Path, symbols: Sequence[str]) -> Iterator[TickBatch]:
    """Ticks of a dataset in event order, with symbols mapped to indices into `symbols`."""
    files, _ = dataset_files(directory)
    wanted = pa.array(list(symbols), type=pa.string())
    offset = 0
    for path in files:
        for batch in _batches_of(path):
            if batch.num_rows == 0:
                continue
            sym = _symbol_index(batch.column("symbol"), wanted)
            price = batch.column("price").to_numpy(zero_copy_only=False).astype(np.int64)
            ts = batch.column("tickTS").to_numpy(zero_copy_only=False).astype(np.int64)
            yield TickBatch(offset, sym, price, ts)
            offset += batch.num_rows
