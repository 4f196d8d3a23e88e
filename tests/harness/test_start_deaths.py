"""An engine program that dies while it starts, before it reports `started`, is restarted like any
other death (harness/engine_run.py; specs/ENGINE_RUN.md, "Supervision"), and a run none of whose
attempts started is no FAILED verdict but a command that could not do its job (EngineNeverStarted,
a CepkitError: exit 2, specs/EXIT_CODES.md), with run.json written all the same.

The real harness (driver process, sink, monitor) and a light program without a JVM
(tests/harness/start_death_program.py), on a few thousand events: a few seconds each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datagen.micro import generate_micro
from harness.config import DriverConfig
from harness.engine_run import EngineNeverStarted, EngineRunSpec, run_engine
from kit.config import MicroConfig, RateConfig
from kit.errors import CepkitError
from tests.helpers import REPO

PROGRAM = Path(__file__).parent / "start_death_program.py"


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("start-deaths") / "events"
    generate_micro(MicroConfig(streams=1, attributes=1, file_count=1,
                               rate=RateConfig(profile="constant", basis_rate_eps=2000.0, duration_s=2.0)), out)
    return out


def spec(events: Path, run: Path, die_times: int, **changes) -> EngineRunSpec:
    driver = DriverConfig(events, pacing="pull", stamp="send", lead_ms=50, align_ms=1)
    return EngineRunSpec(program=PROGRAM, run_dir=run, driver=driver, master="local[1]", jvm_class_archive=False,
                         quiet_local_fs=False, startup_timeout_s=60,
                         env=(("PYTHONPATH", str(REPO)), ("DIE_TIMES", str(die_times))), **changes)


def test_a_program_killed_before_it_started_is_restarted(events, tmp_path):
    """Regression (issue 45): the run ended failed, NOT VALIDATED, at the first such death."""
    result = run_engine(spec(events, tmp_path / "run", die_times=2))
    assert result.status == "completed", result.message
    assert [r["outcome"] for r in result.restarts] == ["restarted", "restarted"]
    assert all("SIGKILL" in r["cause"] for r in result.restarts)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["events"]["total"] == result.outputs["Echo"] > 0


def test_a_program_that_never_starts_is_no_failed_verdict(events, tmp_path):
    """Regression (issue 45): a run whose engine could not start at all came back `failed`, and
    `cepkit pairs` exited 1 (a FAILED verdict) instead of 2."""
    run = tmp_path / "run"
    with pytest.raises(EngineNeverStarted) as never:
        run_engine(spec(events, run, die_times=-1, max_restarts=1))
    assert isinstance(never.value, CepkitError)
    message = str(never.value)
    assert message.startswith(f"{run}: the engine never started: the engine program died 2 times, more than "
                              "run.max_restarts = 1 allows; last: ")
    assert "\n" not in message
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "failed" and len(record["restarts"]) == 2


def test_one_death_before_start_with_no_restarts_allowed_names_it(events, tmp_path):
    with pytest.raises(EngineNeverStarted, match=r"the engine never started: the engine program exited before it "
                                                 r"started \(exit code 1\): .*cannot start \(on purpose\)"):
        run_engine(spec(events, tmp_path / "run", die_times=-1, max_restarts=0))
