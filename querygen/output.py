"""Writing generated specs to disk, never over an existing file, never half-written (kit.atomic),
and describing what was written.

`Written` is what the CLI's summary table shows: one row per file.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit.atomic import atomic_write
from kit.workload import PairsAux, StrategySet, Suite, Workload, to_xml
from querygen.strategies import generate_strategies, with_strategy_count
from querygen.suites import build_suite


@dataclass(frozen=True)
class Written:
    path: Path
    kind: str            # strategies | suite | workload
    name: str
    items: int           # strategies, or workloads
    queries: int
    details: str


def describe(spec: StrategySet | Suite | Workload, path: Path, aux: PairsAux | None = None) -> Written:
    if isinstance(spec, StrategySet):
        details = f"SF {spec.scale_factor}, seed {spec.seed}, {len(spec.users):,} users"
        if aux is not None:
            market_of = dict(aux.symbols)
            per_market = Counter(market_of[s.symbol1] for s in spec.strategies)
            details += ", per market: " + " + ".join(str(per_market[m]) for m in sorted(per_market))
        return Written(path, "strategies", "", len(spec), len(spec), details)
    if isinstance(spec, Suite):
        experiments = list(dict.fromkeys(w.experiment for w in spec.workloads))
        return Written(path, "suite", spec.name + (" (quick)" if spec.quick else ""), len(spec.workloads),
                       spec.query_count, ", ".join(experiments))
    kinds = sorted({q.KIND for q in spec.queries})
    return Written(path, "workload", spec.name, 1, len(spec.queries), ", ".join(kinds))


def write_strategies(aux: PairsAux, seed: int, out: Path, count: int | None = None) -> Written:
    """Generate the strategies for `aux` (`count` of them, default the aux file's number) with
    `default_rng(seed)` and write them to `out` (must not exist)."""
    aux = with_strategy_count(aux, count)
    spec = generate_strategies(aux, np.random.default_rng(seed), seed=seed)
    return describe(spec, _write(spec, out), aux)


def _write(spec: StrategySet | Suite, out: Path) -> Path:
    """The spec's XML at `out`, atomically (kit.atomic): never over a file, never half-written."""
    return atomic_write(Path(out), to_xml(spec))


def default_strategies_name(aux: PairsAux, seed: int) -> str:
    return f"strategies-sf{aux.scale_factor}-seed{seed}.xml"


def write_suite(name: str, quick: bool, out: Path) -> Written:
    spec = build_suite(name, quick)
    return describe(spec, _write(spec, out))

