"""Microbenchmark inputs for the reference engine: streams, the table, and their event order.

Read from a micro dataset's documented layout (specs/datagen-micro.md) without the generator's
code. Streams become DataFrames with a `_pos` column: the event's position in the merged order
of specs/SEMANTICS.md section 1 (by TS, then stream number, then row order).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kit.errors import CepkitError, at
from kit.workload import Comparison
from validator.ticks import read_manifest

_OPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def _read(path: Path) -> pd.DataFrame:
    try:
        table = pq.read_table(path) if path.suffix == ".parquet" else pacsv.read_csv(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise CepkitError(f"{path}: cannot read: {str(e).splitlines()[0]}") from None
    return table.to_pandas()


def load_micro_dataset(directory: Path) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None]:
    """All streams (in file order) and the join table T (None if the dataset has none)."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    if not isinstance(manifest.get("streams"), list):
        raise at(directory / "manifest.json", "streams", "not a microbenchmark dataset manifest")
    streams = {}
    for s in manifest["streams"]:
        parts = [_read(directory / f["path"]) for f in s["files"]]
        streams[s["name"]] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    table = manifest.get("table")
    return merge_order(streams), (_read(directory / table["path"]) if table else None)


def merge_order(streams: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Add `_pos`, each event's position in the merged order (TS, stream number, row)."""
    names = sorted(streams, key=lambda s: int(s[1:]) if s[1:].isdigit() else s)
    ts = np.concatenate([streams[n]["TS"].to_numpy(np.int64) for n in names])
    stream_no = np.concatenate([np.full(len(streams[n]), i) for i, n in enumerate(names)])
    row = np.concatenate([np.arange(len(streams[n])) for n in names])
    order = np.lexsort((row, stream_no, ts))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    out, start = {}, 0
    for n in names:
        df = streams[n].copy()
        df["_pos"] = pos[start:start + len(df)]
        out[n] = df
        start += len(df)
    return out


def where_mask(df: pd.DataFrame, where: tuple[Comparison, ...], column=lambda f: f) -> np.ndarray:
    """All comparisons hold; `column` maps a spec field name to a column of `df`."""
    mask = np.ones(len(df), dtype=bool)
    for c in where:
        mask &= _OPS[c.op](df[column(c.field)].to_numpy(), c.value)
    return mask
