"""Shared fixtures: small generated datasets, built once per test session or per test module, and
the driver tests' check that no driver thread outlives a test."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest

from datagen.micro import generate_micro
from datagen.pairs import generate_pairs
from kit.config import MicroConfig, RateConfig
from kit.workload import load_aux
from querygen.output import write_strategies
from tests.fuzz import run_cli
from tests.helpers import SCHEMAS, pairs_config


# Run only when an -m expression names them (`-m slow`, `-m cluster`, `-m flink`, `-m "slow and spark"`): any
# other selection, the default run and `-m "not spark and not postgres"` included, leaves them out.
ON_REQUEST = ("slow", "cluster", "flink")


def pytest_collection_modifyitems(config, items):
    asked = config.option.markexpr or ""
    for mark in ON_REQUEST:
        if mark in asked:
            continue
        left_out = [item for item in items if item.get_closest_marker(mark)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker(mark)]


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


# -- the load driver's tests (tests/harness/test_driver_*.py) ---------------------------------------

@pytest.fixture(scope="module")
def ticks(tmp_path_factory) -> Path:
    """~20k ticks over 4 s of simulated time, in 2 Parquet files."""
    out = tmp_path_factory.mktemp("drv") / "ticks"
    generate_pairs(pairs_config(file_count=2, rate={"profile": "constant", "duration_s": 4.0}), out)
    return out


@pytest.fixture(scope="module")
def micro2(tmp_path_factory) -> Path:
    """Two streams at 2000 events/s for 5 s (many equal TS within and across streams), 2 files each."""
    out = tmp_path_factory.mktemp("drv") / "micro2"
    generate_micro(MicroConfig(streams=2, file_count=2, attributes=2,
                               rate=RateConfig(profile="constant", basis_rate_eps=2000.0, duration_s=5.0)), out)
    return out


@pytest.fixture
def no_leaked_threads():
    """Fails a test that leaves a driver thread running (the driver tests use it on every test)."""
    yield
    left = [t.name for t in threading.enumerate() if t.name.startswith("driver-")]
    assert not left, f"driver threads left running: {left}"


# -- the validate fuzz tests (test_fuzz_validate_*.py) ----------------------------------------------

class Run(tuple):
    """(data, strategies, expected frames, sim_start), shown short in hypothesis' failure reports."""

    def __repr__(self) -> str:
        return f"Run({self[0]})"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 2-minute dataset in 3 files, its strategies and expected answers (orders included)."""
    root = tmp_path_factory.mktemp("fuzz-validate")
    data = root / "data"
    generate_pairs(pairs_config(file_count=3, rate={"duration_s": 120.0, "basis_rate_eps": 500.0}), data)
    strategies = root / "strategies.xml"
    write_strategies(load_aux(data), 42, strategies)
    code, out, err = run_cli(["validate", "pairs", "--data", str(data), "--strategies", str(strategies),
                              "--out", str(root / "expected")])
    assert code == 0, out + err
    expected = {n: pd.read_parquet(root / "expected" / "expected" / f"{n}.parquet") for n in SCHEMAS}
    assert len(expected["MarketOrder"]) >= 3
    sim_start = json.loads((data / "manifest.json").read_text())["start_epoch_ms"]
    return Run((data, strategies, expected, sim_start))
