"""How generated datasets' data files are written, and what a generator returns.

The generators write a dataset into a hidden staging directory next to its final place
(`kit.atomic.StagedDir`), renamed into place only when complete, so an interrupted run never
leaves a directory that looks finished and never touches an earlier dataset. `SplitWriter` sends
rows to `file_count` files (Parquet or CSV) split at given time boundaries and describes each
file (rows, bytes, sha256) for `manifest.json` (`kit.manifest.write_manifest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kit.datafiles import sha256_of


@dataclass(frozen=True)
class GeneratedDataset:
    """A finished dataset directory and its manifest."""

    directory: Path
    manifest: dict
    elapsed_s: float

    @property
    def total_rows(self) -> int:
        return int(self.manifest["total_rows"])


class SplitWriter:
    """Writes Arrow record batches into `len(bounds)+1` files split on a sort column.

    `bounds` are the first values of files 2..n on the split column (non-decreasing input).
    Parquet files get one row group per written chunk piece; CSV files a single header line.
    """

    def __init__(self, directory: Path, stem: str, schema: pa.Schema, fmt: str, split_column: str,
                 bounds: list[int]):
        self.dir = Path(directory)
        self.schema = schema
        self.fmt = fmt
        self.col = split_column
        self.bounds = list(bounds)
        n = len(self.bounds) + 1
        self.names = [f"{stem}-{i + 1:05d}-of-{n:05d}.{'parquet' if fmt == 'parquet' else 'csv'}" for i in range(n)]
        self.rows = [0] * n
        self.first = [None] * n
        self.last = [None] * n
        self._writers: list = [None] * n

    def _writer(self, i: int):
        if self._writers[i] is None:
            path = self.dir / self.names[i]
            if self.fmt == "parquet":
                self._writers[i] = pq.ParquetWriter(path, self.schema, compression="zstd",
                                                    compression_level=1, use_dictionary=True)
            else:
                self._writers[i] = pacsv.CSVWriter(path, self.schema)
        return self._writers[i]

    def write(self, table: pa.Table) -> None:
        import numpy as np
        key = table.column(self.col).to_numpy()
        cuts = np.searchsorted(key, self.bounds, side="left") if self.bounds else np.empty(0, np.int64)
        edges = [0, *cuts.tolist(), len(key)]
        for i in range(len(edges) - 1):
            lo, hi = edges[i], edges[i + 1]
            if hi <= lo:
                continue
            part = table.slice(lo, hi - lo)
            if self.fmt == "csv":
                part = part.cast(self.schema)
            self._writer(i).write_table(part)
            self.rows[i] += hi - lo
            if self.first[i] is None:
                self.first[i] = int(key[lo])
            self.last[i] = int(key[hi - 1])

    def close(self) -> list[dict]:
        """Close all files (empty ones are still written, with the schema) and describe them."""
        out = []
        for i, name in enumerate(self.names):
            self._writer(i).close()
            path = self.dir / name
            out.append({"path": name, "rows": self.rows[i], "bytes": path.stat().st_size,
                        "sha256": sha256_of(path), f"first_{self.col}": self.first[i],
                        f"last_{self.col}": self.last[i]})
        return out

