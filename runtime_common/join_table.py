"""The join table of a microbenchmark dataset as an engine program reads it.

specs/datagen-micro.md: `T.parquet`, or `T.csv` with a header line when the dataset is CSV
(`micro.format = "csv"`); columns `ID` int32 then `T1..TM` float64 either way. The CSV is read
with those types, never inferred, so both forms give the engine the same table.
"""

from __future__ import annotations

import csv
from pathlib import Path


def is_csv(path) -> bool:
    return Path(path).suffix.lower() == ".csv"


def columns(path) -> list[str]:
    """The table's column names (its header line, or its Parquet schema)."""
    if is_csv(path):
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return next(csv.reader(fh), [])
    import pyarrow.parquet as pq

    return list(pq.ParquetFile(path).schema_arrow.names)


def arrow_types(names) -> dict:
    """ID int32, every other column float64 (datagen-micro.md)."""
    import pyarrow as pa

    return {n: pa.int32() if n == "ID" else pa.float64() for n in names}


def read(path):
    """The whole table as a pyarrow Table of the spec's types."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if not is_csv(path):
        return pq.read_table(path)
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=arrow_types(columns(path))))


def spark_schema(path) -> str:
    """The table's schema as Spark's DDL string (`ID INT, T1 DOUBLE, ...`), for `spark.read.csv`."""
    return ", ".join(f"`{n}` {'INT' if n == 'ID' else 'DOUBLE'}" for n in columns(path))
