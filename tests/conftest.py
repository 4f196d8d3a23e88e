"""Shared fixtures: small generated Pairs datasets, built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from datagen.pairs import generate_pairs
from tests.helpers import pairs_config


@pytest.fixture(scope="session")
def quick_pairs(tmp_path_factory) -> Path:
    """SF=1, quick standard profile (~754k ticks), split into 3 files."""
    out = tmp_path_factory.mktemp("pairs") / "quick"
    generate_pairs(pairs_config(file_count=3, rate={"quick": True}), out)
    return out


@pytest.fixture(scope="session")
def correlated_pairs(tmp_path_factory) -> Path:
    """10 minutes at a constant 5000 ticks/s with high volatility, for return statistics."""
    out = tmp_path_factory.mktemp("pairs") / "corr"
    generate_pairs(pairs_config(rate={"profile": "constant", "duration_s": 600.0},
                                prices={"volatility_per_hour": 0.5, "correlation": 0.8}), out)
    return out

