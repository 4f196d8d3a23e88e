"""Helpers shared by the CSV converter's tests (tests/datagen/test_convert*.py): writing an input file
and reading a converted dataset's rows back."""

from __future__ import annotations

from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

T0 = 1_767_623_400_000  # 2026-01-05 14:30:00 UTC


def write(tmp_path: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def rows_of(directory: Path, pattern: str) -> list[dict]:
    out = []
    for f in sorted(directory.glob(pattern)):
        out.extend(pq.read_table(f).to_pylist() if f.suffix == ".parquet" else pacsv.read_csv(f).to_pylist())
    return out
