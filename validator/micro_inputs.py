"""Microbenchmark inputs for the reference engine: streams, the table, and their event order.

Read from a micro dataset's documented layout (specs/datagen-micro.md) without the generator's
code; `kit.manifest` reads and verifies the manifest. Streams become DataFrames with a `_pos`
column: the event's position in the merged order of specs/SEMANTICS.md section 1 (by TS, then
stream number, then row order). Every file must hold its columns (`ID`, `A1..AN`, `TS`; the table
`ID`, `T1..TM`) as numbers without nulls (`ID` and `TS` integers); anything else is one error
naming the file and the column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from kit.datafiles import read_data_table
from kit.errors import at
from kit.manifest import DataFile, read_manifest
from kit.workload import Comparison

_OPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


INTEGER_COLUMNS = ("ID", "TS")


def _read(f: DataFile, fmt: str, prefix: str, required: tuple[str, ...]) -> pd.DataFrame:
    """One file: `required` columns present, integers (ID, TS) or numbers (`prefix`N), no nulls."""
    path = f.path
    table = read_data_table(path, fmt)
    for col in required:
        if col not in table.column_names:
            raise at(path, col, f"missing column (the file has {', '.join(table.column_names) or 'none'})")
    for col in table.column_names:
        if col not in INTEGER_COLUMNS and not (col.startswith(prefix) and col[len(prefix):].isdigit()):
            continue
        arr = table.column(col)
        t = arr.type
        ok = pa.types.is_integer(t) if col in INTEGER_COLUMNS else (pa.types.is_integer(t) or pa.types.is_floating(t))
        if not ok and not (pa.types.is_null(t) and table.num_rows == 0):
            want = "integers" if col in INTEGER_COLUMNS else "numbers"
            raise at(path, col, f"expected {want}, got {t}{_first_bad(arr, fmt, col in INTEGER_COLUMNS)}")
        if arr.null_count:
            row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
            raise at(path, col, f"{_where(fmt, row)}: is empty (null); every event needs a value")
    return table.to_pandas()


def _where(fmt: str, row: int) -> str:
    return f"line {row + 2}" if fmt == "csv" else f"data row {row + 1}"


def _first_bad(arr: pa.ChunkedArray, fmt: str, integer: bool) -> str:
    """Where the first value that is no number sits (CSV columns get their type from the values)."""
    values = pd.Series(arr.to_pandas(), dtype=object)
    num = pd.to_numeric(values, errors="coerce")
    bad = values.notna() & (num.isna() | (integer & (num % 1 != 0)))
    rows = np.flatnonzero(bad.to_numpy())
    return f" ({_where(fmt, int(rows[0]))}: {values.iloc[int(rows[0])]!r})" if len(rows) else ""


def load_micro_dataset(directory: Path, *, verify: bool = True) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None]:
    """All streams (in file order) and the join table T (None if the dataset has none); the
    manifest and its files are verified first (`verify=False`: no checksums, kit.manifest)."""
    m = read_manifest(Path(directory), verify=verify)
    if m.kind != "micro":
        raise m.error("streams", "not a microbenchmark dataset manifest (no streams)")
    streams = {}
    for s in m.streams:
        parts = [_read(f, m.format, "A", ("ID", "TS")) for f in s.files]
        streams[s.name] = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    table = _read(m.table, m.format, "T", ("ID",)) if m.table is not None else None
    return merge_order(streams), table


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
