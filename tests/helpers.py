"""Helpers shared by tests: building Pairs configs and reading generated ticks back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from kit.config import PairsConfig

# The repository's root (tests read the written specs and the packages' sources there).
REPO = Path(__file__).resolve().parent.parent


def read_ticks(directory: Path) -> dict[str, np.ndarray]:
    """All ticks of a dataset in file order, as numpy columns (symbol as str)."""
    files = sorted(Path(directory).glob("ticks-*.parquet"))
    tables = [pq.read_table(f) for f in files]
    out = {}
    for col in ("price", "size", "tickTS"):
        out[col] = np.concatenate([t.column(col).to_numpy() for t in tables])
    out["symbol"] = np.concatenate([np.asarray(t.column("symbol").cast("string").to_numpy(zero_copy_only=False))
                                    for t in tables])
    return out


def pairs_config(**changes) -> PairsConfig:
    rate = changes.pop("rate", {})
    prices = changes.pop("prices", {})
    base = PairsConfig()
    return dataclasses.replace(base, rate=dataclasses.replace(base.rate, **rate),
                               prices=dataclasses.replace(base.prices, **prices), **changes)
