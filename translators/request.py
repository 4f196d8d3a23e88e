"""What a translation needs, for every engine: the workload spec, the plan settings and where the
spec came from (`PairsTranslation`, `MicroTranslation`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kit.config import DATABASE_JOIN_PLANS, PLANS, TRIGGERS, WORK_PLANS
from kit.errors import CepkitError
from kit.manifest import load_manifest
from kit.workload import StrategySet, Suite, Workload, read_spec, read_strategies


@dataclass(frozen=True)
class PairsTranslation:
    """A Pairs strategies spec to translate, with its plan mode (kit.config.PLANS) and, for the
    keyed plan, its number of state keys (`buckets`, 0: one per shuffle partition, at least 2);
    `trigger` (kit.config.TRIGGERS): micro-batches or Spark's real-time mode; `work`
    (kit.config.WORK_PLANS, run.work): the plan family (Flink: "python" runs the Python plan, the
    others the JVM plan).

    `source_name` and `source_sha256` only label the generated program, so a program can be
    traced back to the exact spec it was made from.
    """

    strategies: StrategySet
    plan: str = "keyed"
    source_name: str = "<memory>"
    source_sha256: str = ""
    buckets: int = 0
    trigger: str = "micro-batch"
    work: str = "engine"

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise CepkitError(f"trigger: must be one of {', '.join(TRIGGERS)}, got {self.trigger!r}")
        if self.work not in WORK_PLANS:
            raise CepkitError(f"work: must be one of {', '.join(WORK_PLANS)}, got {self.work!r}")
        if self.plan not in PLANS:
            raise CepkitError(f"plan: must be one of {', '.join(PLANS)}, got {self.plan!r}")
        if not isinstance(self.strategies, StrategySet):
            raise CepkitError("strategies: must be a StrategySet")
        if isinstance(self.buckets, bool) or not isinstance(self.buckets, int) or self.buckets < 0:
            raise CepkitError(f"buckets: must be an integer >= 0, got {self.buckets!r}")

    @classmethod
    def from_file(cls, path: Path, plan: str = "keyed", buckets: int = 0, trigger: str = "micro-batch",
                  work: str = "engine") -> "PairsTranslation":
        path = Path(path)
        spec = read_strategies(path)
        return cls(spec, plan, path.name, hashlib.sha256(path.read_bytes()).hexdigest(), buckets, trigger, work)


@dataclass(frozen=True)
class MicroTranslation:
    """A workload to translate. `table_path` is the dataset's join table (a Parquet file) when a
    query joins with it in memory; `source_name`/`source_sha256` only label the program."""

    workload: Workload
    table_path: Path | None = None
    source_name: str = "<memory>"
    source_sha256: str = ""
    database_join: str = "lookup"
    trigger: str = "micro-batch"
    # The plan family (run.work; specs/TRANSLATION.md, "Plan families").
    work: str = "engine"

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise CepkitError(f"trigger: must be one of {', '.join(TRIGGERS)}, got {self.trigger!r}")
        if not isinstance(self.workload, Workload):
            raise CepkitError("workload: must be a Workload")
        if self.work not in WORK_PLANS:
            raise CepkitError(f"work: must be one of {', '.join(WORK_PLANS)}, got {self.work!r}")
        if self.database_join not in DATABASE_JOIN_PLANS:
            raise CepkitError(f"database_join: must be one of {', '.join(DATABASE_JOIN_PLANS)}, "
                              f"got {self.database_join!r}")
        if self.table_path is not None and Path(self.table_path).suffix not in (".parquet", ".csv"):
            raise CepkitError(f"{self.table_path}: the join table must be a Parquet or CSV file (datagen-micro.md)")

    @classmethod
    def from_files(cls, spec_xml: Path, dataset_dir: Path | None = None, workload_name: str | None = None,
                   database_join: str = "lookup", trigger: str = "micro-batch", work: str = "engine"
                   ) -> "MicroTranslation":
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
                   hashlib.sha256(spec_xml.read_bytes()).hexdigest(), database_join,
                   trigger, work)


def table_of(dataset_dir: Path) -> Path | None:
    """The join table of a micro dataset (datagen-micro.md), or None."""
    table = load_manifest(dataset_dir).table
    return table.path.resolve() if table is not None else None
