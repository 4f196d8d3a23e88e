"""What a translation needs: the workload spec, the plan mode and where the spec came from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kit.config import PLANS
from kit.errors import CepkitError
from kit.workload import StrategySet, read_strategies


@dataclass(frozen=True)
class PairsTranslation:
    """A Pairs strategies spec to translate, with its plan mode (kit.config.PLANS) and, for the
    keyed plan, its number of state keys (`buckets`, 0: one per shuffle partition, at least 2).

    `source_name` and `source_sha256` only label the generated program, so a program can be
    traced back to the exact spec it was made from.
    """

    strategies: StrategySet
    plan: str = "keyed"
    source_name: str = "<memory>"
    source_sha256: str = ""
    buckets: int = 0

    def __post_init__(self) -> None:
        if self.plan not in PLANS:
            raise CepkitError(f"plan: must be one of {', '.join(PLANS)}, got {self.plan!r}")
        if not isinstance(self.strategies, StrategySet):
            raise CepkitError("strategies: must be a StrategySet")
        if isinstance(self.buckets, bool) or not isinstance(self.buckets, int) or self.buckets < 0:
            raise CepkitError(f"buckets: must be an integer >= 0, got {self.buckets!r}")

    @classmethod
    def from_file(cls, path: Path, plan: str = "keyed", buckets: int = 0) -> "PairsTranslation":
        path = Path(path)
        spec = read_strategies(path)
        return cls(spec, plan, path.name, hashlib.sha256(path.read_bytes()).hexdigest(), buckets)
