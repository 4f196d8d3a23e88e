"""Validating one query's output in key partitions: a run whose answers do not fit in memory.

Q7 at the thesis's parameters with a 600-s interval pairs each event with thousands of earlier
ones: at 130,000 ev/s a 14-minute step answers ~0.5 billion rows, and the reference would hold as
many again. Where a query's answers split exactly by a key (a keyed pattern pairs events of one
key only, and its output names the first element's key), both sides are split by `key mod parts`:

1. the engine's rows are read once, file by file, and spilled into one Arrow file per partition
   in a temporary directory beside the log (removed afterwards, also on an error);
2. for each partition, the reference answers over the input events of that partition's keys
   alone, and the comparison runs on that pair of frames;
3. the partitions' outcomes add up (counts, mismatches per field, duplicates: a row and its
   duplicate share a key) and their listed incorrect answers merge in time order, so the result
   is the one the whole comparison would give (tests/validator/test_micro_partitions.py).

Memory then grows with a partition (`PARTITION_ROWS` engine rows), not with the run; the
latencies of every row are still kept, 4 bytes each.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from kit.errors import CepkitError
from kit.records import RecordSchema
from kit.workload import Pattern, Query
from kit.workload.query_base import out_name, split_qualified
from validator.compare import StreamComparison

PARTITION_ROWS = 8_000_000      # engine rows per partition: a few GiB with the reference's and the comparison's


def partition_columns(query: Query) -> tuple[str, str] | None:
    """(input column, output column) by which the query's answers split exactly, or None."""
    if isinstance(query, Pattern) and query.key:
        for name in query.select:
            alias, column = split_qualified(name)
            if alias == query.first.alias and column == query.key:
                return query.key, out_name(name)
    return None


def partition_count(rows: int | None, limit: int = PARTITION_ROWS) -> int:
    if limit < 1:
        raise CepkitError(f"partition rows must be >= 1, got {limit}")
    return 1 if rows is None or rows <= limit else math.ceil(rows / limit)


def partition_of(values, parts: int) -> np.ndarray:
    """Each row's partition: key mod parts; a null key (never an expected answer) goes to 0."""
    keys = pd.Series(values)
    return (keys.fillna(0).to_numpy(np.int64) % parts).astype(np.int64)


def spill(frames: Iterable[pd.DataFrame], column: str, parts: int, directory: Path) -> list[Path]:
    """Write the rows of `frames` into one Arrow file per partition of `column`; their paths."""
    paths = [Path(directory) / f"part-{p:05d}.arrow" for p in range(parts)]
    writers: list = [None] * parts
    schemas: list = [None] * parts
    try:
        for frame in frames:
            if not len(frame):
                continue
            part = partition_of(frame[column], parts)
            table = pa.Table.from_pandas(_plain(frame), preserve_index=False).replace_schema_metadata(None)
            order = np.argsort(part, kind="stable")
            bounds = np.searchsorted(part[order], np.arange(parts + 1))
            for p in np.flatnonzero(np.diff(bounds)):
                rows = table.take(pa.array(order[bounds[p]:bounds[p + 1]]))
                if writers[p] is None:
                    writers[p], schemas[p] = pa.ipc.new_file(paths[p], rows.schema), rows.schema
                writers[p].write_table(rows.cast(schemas[p]))
    finally:
        for w in writers:
            if w is not None:
                w.close()
    return paths


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as their values, so every chunk spills with one schema."""
    cats = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
    return frame.astype({c: object for c in cats}) if cats else frame


def read_part(path: Path, like: pd.DataFrame) -> pd.DataFrame:
    """A spilled partition's rows, with the column types of `like` (an empty one: no rows)."""
    if not path.exists():
        return like.iloc[0:0].copy()
    with pa.memory_map(str(path)) as source:
        table = pa.ipc.open_file(source).read_all()
    frame = {}
    for name in table.column_names:
        arr = table.column(name)
        if pa.types.is_integer(arr.type) and arr.null_count:
            frame[name] = arr.to_pandas(types_mapper={pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}.get)
        else:
            frame[name] = arr.to_pandas()
    return pd.DataFrame(frame)


def input_index(streams: dict[str, pd.DataFrame], column: str, parts: int) -> dict[str, np.ndarray]:
    """Each input stream's events' partitions (a stream without `column`: all in partition 0)."""
    return {name: partition_of(df[column], parts) if column in df.columns else np.zeros(len(df), np.int64)
            for name, df in streams.items()}


def input_part(streams: dict[str, pd.DataFrame], index: dict[str, np.ndarray], p: int) -> dict[str, pd.DataFrame]:
    """The input streams' events of partition `p` (`index`: input_index)."""
    return {name: df[index[name] == p] for name, df in streams.items()}


def merge(parts: Sequence[StreamComparison], schema: RecordSchema) -> StreamComparison:
    """The comparison of the whole stream from its partitions' (see the module doc, step 3);
    listed answers in the order compare_stream lists them: by the first long key."""
    first = parts[0]
    fields: dict[str, int] = {}
    for c in parts:
        for f, n in c.mismatches_by_field.items():
            fields[f] = fields.get(f, 0) + n
    listed = [c.incorrect for c in parts if len(c.incorrect)]
    incorrect = pd.concat(listed, ignore_index=True) if listed else first.incorrect
    time_key = next((k for k in first.keys if schema.field(k).type == "long"), None)
    if time_key is not None and len(incorrect):
        t = pd.to_numeric(incorrect[time_key], errors="coerce").to_numpy(np.float64)
        incorrect = incorrect.iloc[np.argsort(t, kind="stable")].reset_index(drop=True)
    return StreamComparison(
        stream=first.stream, keys=first.keys, compared=first.compared, tolerance=first.tolerance,
        expected=sum(c.expected for c in parts), engine=sum(c.engine for c in parts),
        correct=sum(c.correct for c in parts), missing=sum(c.missing for c in parts),
        undue=sum(c.undue for c in parts), wrong=sum(c.wrong for c in parts), mismatches_by_field=fields,
        incorrect=incorrect.head(first.list_limit), list_limit=first.list_limit,
        duplicates=sum(c.duplicates for c in parts))


def spill_directory(log_dir: Path) -> tempfile.TemporaryDirectory:
    """A temporary directory beside the run's log (on its disk, not a RAM-backed /tmp)."""
    return tempfile.TemporaryDirectory(prefix=".cepkit-validate-", dir=Path(log_dir).parent)
