"""The PySpark translation of microbenchmark workloads (thesis chapter 4, Q1-Q7).

`translate_micro(MicroTranslation)` writes one standalone program per workload
(templates/pyspark_micro.py.j2): filters and in-memory table joins as DataFrame operators, every
other kind as a core (templates/micro_cores/) inside one `transformWithStateInPandas` operator
with a group per query. specs/TRANSLATION.md says why each kind is planned the way it is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from kit import __version__
from kit.config import DATABASE_JOIN_PLANS, TIME_WINDOW_PLANS
from kit.errors import CepkitError
from kit.workload import Suite, Workload, read_spec
from translators.micro_cores import core_source
from translators.micro_literal import query_literal
from translators.render import render

# query kind -> (core file, class), for the kinds that need a stateful operator
STATEFUL_CORES = {
    "count_window": ("count_window", "CountWindowCore"),
    "time_window": ("time_window", "TimeWindowCore"),
    "window_join": ("window_join", "WindowJoinCore"),
    "pattern": ("pattern", "PatternCore"),
}
_SPARK_TYPES = {"int": "int", "long": "long", "double": "double"}


@dataclass(frozen=True)
class MicroTranslation:
    """A workload to translate. `table_path` is the dataset's join table (a Parquet file) when a
    query joins with it in memory; `source_name`/`source_sha256` only label the program."""

    workload: Workload
    table_path: Path | None = None
    source_name: str = "<memory>"
    source_sha256: str = ""
    time_windows: str = "core"
    database_join: str = "lookup"

    def __post_init__(self) -> None:
        if not isinstance(self.workload, Workload):
            raise CepkitError("workload: must be a Workload")
        if self.time_windows not in TIME_WINDOW_PLANS:
            raise CepkitError(f"time_windows: must be one of {', '.join(TIME_WINDOW_PLANS)}, got {self.time_windows!r}")
        if self.database_join not in DATABASE_JOIN_PLANS:
            raise CepkitError(f"database_join: must be one of {', '.join(DATABASE_JOIN_PLANS)}, "
                              f"got {self.database_join!r}")
        if self.table_path is not None and Path(self.table_path).suffix != ".parquet":
            raise CepkitError(f"{self.table_path}: the join table must be a Parquet file for the PySpark translation")

    @classmethod
    def from_files(cls, spec_xml: Path, dataset_dir: Path | None = None, workload_name: str | None = None,
                   time_windows: str = "core", database_join: str = "lookup") -> "MicroTranslation":
        """From a Workload file, or a Suite file and the name of one of its workloads."""
        spec_xml = Path(spec_xml)
        spec = read_spec(spec_xml)
        if isinstance(spec, Suite):
            names = [w.name for w in spec.workloads]
            if workload_name is None and len(names) > 1:
                raise CepkitError(f"{spec_xml}: a suite of {len(names)} workloads; name one ({', '.join(names)})")
            name = workload_name or names[0]
            if name not in names:
                raise CepkitError(f"{spec_xml}: no workload {name!r} (has {', '.join(names)})")
            spec = spec.workload(name)
        if not isinstance(spec, Workload):
            raise CepkitError(f"{spec_xml}: not a workload or suite spec")
        return cls(spec, table_of(dataset_dir) if dataset_dir else None,
                   spec_xml.name + (f"#{spec.name}" if workload_name else ""),
                   hashlib.sha256(spec_xml.read_bytes()).hexdigest(), time_windows, database_join)


def table_of(dataset_dir: Path) -> Path | None:
    """The join table of a micro dataset (datagen-micro.md), or None."""
    manifest_path = Path(dataset_dir) / "manifest.json"
    try:
        table = json.loads(manifest_path.read_text()).get("table")
    except (OSError, ValueError) as e:
        raise CepkitError(f"{manifest_path}: cannot read: {e}") from None
    return (Path(dataset_dir) / table["path"]).resolve() if table else None


def output_fields(literals: list[dict]) -> list[str]:
    """One row type for every query's output: `stream`, the union of their columns, ingestTS."""
    types: dict[str, str] = {}
    for q in literals:
        for name, logical in zip(q["fields"], q["types"]):
            if types.setdefault(name, logical) != logical:
                raise CepkitError(f"query {q['id']}: output column {name} is {logical} here but "
                                  f"{types[name]} in another query of the set; rename it (as=...)")
    types.setdefault("ingestTS", "long")
    return ["stream string"] + [f"{n} {_SPARK_TYPES[t]}" for n, t in types.items()]


def _imports(stateful: bool, database: bool, jdbc: bool) -> str:
    """The program's import block: standard library, then third party, each sorted."""
    std, third = set(), {"from pyspark.sql import functions as F"}
    if stateful:
        # The cores may use any of the CORE_IMPORTS (translators/micro_cores.py).
        std |= {"import bisect", "import collections", "import heapq", "import json", "import math",
                "from typing import Iterator"}
        third |= {"import numpy as np", "import pandas as pd",
                  "from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle",
                  "from pyspark.sql.types import StringType, StructField, StructType"}
    if database:
        std |= {"import functools", "import os"}
    if jdbc:
        std |= {"import os"}

    def order(lines):
        return sorted(lines, key=lambda ln: (ln.startswith("from "), ln))

    noqa = "  # noqa: F401 - for the cores"
    std_lines = [ln + noqa if ln in ("import bisect", "import collections", "import heapq", "import math") else ln
                 for ln in order(std)]
    third_lines = [ln + noqa if ln == "import numpy as np" else ln for ln in order(third)]
    return "\n".join(std_lines + ([""] if std_lines else []) + third_lines)


def translate_micro(req: MicroTranslation) -> str:
    w = req.workload
    literals = [query_literal(q) for q in w.queries]
    for q in literals:
        # Q3 on Spark's own window(); Q4 keeps the paned core (its plan is the point of Q4).
        if req.time_windows == "native" and q["kind"] == "time_window" and not q["paned"]:
            q["kind"] = "native_time_window"
        if req.database_join == "jdbc" and q["kind"] == "table_join" and q["storage"] == "database":
            q["kind"] = "jdbc_table_join"
    for q in literals:
        if q["kind"] == "table_join" and q["storage"] == "memory" and req.table_path is None:
            raise CepkitError(f"query {q['id']}: joins table {q['table']} in memory, but no dataset table was given")
    kinds = sorted({q["kind"] for q in literals if q["kind"] in STATEFUL_CORES})
    db_tables = [q for q in literals if q["kind"] == "table_join" and q["storage"] == "database"]
    tables = [q for q in literals if q["kind"] == "jdbc_table_join"
              or (q["kind"] == "table_join" and q["storage"] == "memory")]
    jdbc = any(q["kind"] == "jdbc_table_join" for q in tables)
    cores = [(STATEFUL_CORES[k][0], core_source(STATEFUL_CORES[k][0])) for k in kinds]
    return render("pyspark_micro.py.j2", workload=w.name, version=__version__, source_name=req.source_name,
                  source_sha256=req.source_sha256 or "-" * 16, queries=literals,
                  filters=[q for q in literals if q["kind"] in ("filter", "native_time_window")],
                  tables=tables, memory_tables=any(q["storage"] == "memory" for q in tables),
                  jdbc_tables=jdbc, db_tables=db_tables,
                  natives=[q for q in literals if q["kind"] == "native_time_window"],
                  imports=_imports(bool(kinds), bool(db_tables), jdbc),
                  stateful=[q for q in literals if q["kind"] in STATEFUL_CORES],
                  multi_stream=w.dataset.streams > 1,
                  table_path=str(req.table_path) if req.table_path else None,
                  output_fields=output_fields(literals), cores=cores,
                  core_classes=[(k, STATEFUL_CORES[k][1]) for k in kinds],
                  listing=lambda qs: ", ".join(f"{q['id']} ({q['kind']})" for q in qs))
