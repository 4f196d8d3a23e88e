"""A program's output rows and the streams they belong to, for every engine's runtime.

An engine program's output carries a string column `stream` naming each row's output stream,
plus the union of the streams' columns; `split_streams` cuts one batch of it into each stream's
rows with that stream's columns, as the harness sink takes them (specs/ENGINE_RUN.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from kit.errors import CepkitError

STREAM_COLUMN = "stream"


def split_streams(table: pa.Table, streams: Mapping[str, Sequence[str]]) -> dict[str, pa.Table]:
    """One micro-batch's output split by its `stream` column, each with its stream's columns.
    Streams without rows are left out; a row of an unknown stream is an error."""
    if table.num_rows == 0:
        return {}
    col = table.column(STREAM_COLUMN)
    if col.null_count:
        raise CepkitError(f"build(): {col.null_count} output row(s) have a null {STREAM_COLUMN!r}")
    unknown = set(pc.unique(col).to_pylist()) - set(streams)
    if unknown:
        raise CepkitError(f"build(): rows for unknown stream(s) {sorted(unknown)} (known: {', '.join(streams)})")
    if len(streams) == 1:
        (name, cols), = streams.items()
        return {name: table.select(list(cols))}
    out = {}
    for name, cols in streams.items():
        part = table.filter(pc.equal(col, name))
        if part.num_rows:
            out[name] = part.select(list(cols))
    return out
