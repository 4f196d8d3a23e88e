"""Shared fixtures: small generated datasets, built once per test session or per test module, and
the driver tests' check that no driver thread outlives a test."""

from __future__ import annotations

import fcntl
import json
import resource
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from datagen.micro import generate_micro
from datagen.pairs import generate_pairs
from kit.config import MicroConfig, RateConfig
from kit.workload import load_aux
from querygen.output import write_strategies
from tests.fuzz import run_cli
from tests.helpers import SCHEMAS, pairs_config


# Run only when an -m expression names them (`-m e2e`, `-m cluster`, `-m flink`, `-m multihost`,
# `-m "slow and spark"`): any
# other selection, the default run and `-m "not spark and not postgres"` included, leaves them out. The
# default run keeps every test that starts no engine plus the `smoke` runs (tests/helpers.py, engine_params).
ON_REQUEST = ("slow", "e2e", "cluster", "flink", "multihost")


def pytest_collection_modifyitems(config, items):
    asked = config.option.markexpr or ""
    for mark in ON_REQUEST:
        if mark in asked:
            continue
        left_out = [item for item in items if item.get_closest_marker(mark)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker(mark)]


# -- engine runs alone under pytest-xdist ------------------------------------------------------------
# The default run spreads its tests over the machine's cores (scripts/test.sh: pytest-xdist, -n 2).
# A test that starts an engine must not share the 2 cores: its replay runs at a wall-clock rate and a
# starved engine falls behind and is stopped as unsustainable; nor may a test that measures CPU or
# wall time (marked `alone`). So under xdist each test holds a
# share of the machine: engine-free tests a shared one, side by side; an engine test an exclusive
# one, taken once the running tests have finished and held until it has, while the other workers
# wait. Two flock(2) locks in the run's temporary directory (which the workers share): the gate,
# which an engine test closes first so that no new test starts while it waits, and the room itself.

# Run alone: tests that start an engine, and tests that measure CPU or wall time (`alone`).
EXCLUSIVE_MARKS = ("spark", "flink", "alone")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not hasattr(item.config, "workerinput"):      # not an xdist worker: one test at a time anyway
        yield
        return
    alone = any(item.get_closest_marker(m) for m in EXCLUSIVE_MARKS)
    mode = fcntl.LOCK_EX if alone else fcntl.LOCK_SH
    shared = item.config._tmp_path_factory.getbasetemp().parent     # <run>/popen-gwN -> <run>
    with open(shared / "machine.gate", "a") as gate, open(shared / "machine.room", "a") as room:
        fcntl.flock(gate, mode)
        fcntl.flock(room, mode)
        fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)


# -- a stage's time budget (.ci/run) -----------------------------------------------------------------
# .ci/run gives each stage a budget (--budget-s). Past it, the session stops after the running test
# and fails, whatever the tests said: a slow change is named in its stage, long before CI's limit
# cuts the whole run short. Kept by the process that reports (the xdist controller, or the only one).

class StageBudget:
    def __init__(self, config, budget_s: float):
        self.config, self.budget_s = config, budget_s
        self.started = time.monotonic()
        self.session = None
        self.over = False

    def took_s(self) -> float:
        return time.monotonic() - self.started

    @pytest.hookimpl
    def pytest_sessionstart(self, session):
        self.session = session

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report):
        if report.when == "teardown" and not self.over and self.took_s() > self.budget_s:
            self.over = True
            self.session.shouldstop = f"over the stage's time budget ({self.budget_s:g} s, .ci/run)"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        took = self.took_s()
        over = self.over or took > self.budget_s
        line = f"stage time {took:.0f} s of a {self.budget_s:g} s budget" + (": OVER BUDGET, failed" if over else "")
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_sep("=", line, red=over, green=not over, bold=True)
        if over and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_addoption(parser):
    parser.addoption("--budget-s", type=float, default=None, metavar="S",
                     help="stop the session after the running test, and fail it, once it has taken more than S "
                          "seconds (.ci/run gives each stage its budget)")


def pytest_configure(config):
    budget = config.getoption("budget_s")
    if budget is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(StageBudget(config, budget), "cepkit-stage-budget")


# -- hostile input under a memory cap ------------------------------------------------------------------
# The tests of bad and hostile input (fuzzing, round trips, path options, exit codes) run under a
# memory cap: during the test, this process's address space may grow by MEMORY_HEADROOM_BYTES at
# most, and the commands it starts inherit the cap, so a regression (a reader or an allocation sized
# by the input) fails with a MemoryError instead of exhausting the machine. The modules ask for it:
# `pytestmark = pytest.mark.usefixtures("memory_cap")`.
MEMORY_HEADROOM_BYTES = 4 << 30


@pytest.fixture
def memory_cap():
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = psutil.Process().memory_info().vms + MEMORY_HEADROOM_BYTES
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


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
