"""Fault injection without an engine: stand-in processes whose command lines name the JVM classes
the harness looks for are found and SIGKILLed at their time (harness/fault_injection.py)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from harness.fault_injection import EXECUTOR_JVM, FaultInjector, executor_jvms, find_program
from harness.runners import runner
from kit.engines import ENGINE_NAMES
from kit.faults import parse_faults

SPARK_JVM = runner("spark").ENGINE_JVM


@pytest.fixture
def stand_in():
    """Start a sleeping process whose command line carries the given words."""
    procs = []

    def start(*words: str) -> subprocess.Popen:
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *words]))
        # Until it has exec'd, a child's command line is still its parent's (slow on a loaded machine).
        deadline = time.monotonic() + 30
        while words[-1] not in " ".join(psutil.Process(procs[-1].pid).cmdline()) and time.monotonic() < deadline:
            time.sleep(0.01)
        return procs[-1]

    yield start
    for p in procs:
        p.kill()
        p.wait()


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_kill_engine_kills_the_engine_jvm_of_the_program_at_its_time(stand_in, engine):
    engine_class = runner(engine).ENGINE_JVM
    other, jvm = stand_in("not-a-jvm"), stand_in(engine_class, "engine-shell")
    injector = FaultInjector(parse_faults(["kill-engine@5s"]), engine_class)
    assert injector.due(4.9) == []
    (fault,) = injector.due(5.0)
    record = injector.inject(fault, [psutil.Process(other.pid), psutil.Process(jvm.pid)], None)
    assert jvm.wait(5) == -9 and other.poll() is None
    assert (record.pid, record.kind, record.restarted_ms) == (jvm.pid, "kill-engine", None)
    assert record.at_ms > 0 and record.target
    assert injector.log_entries() == [{"fault": "kill-engine@5s", "kind": "kill-engine", "at_ms": record.at_ms}]
    assert injector.due(100.0) == []            # each fault once
    late = FaultInjector(parse_faults(["kill-engine@500s"]), engine_class)
    (never,) = late.close()
    assert never.at_ms is None and "not injected" in never.note and late.records == [never]


def test_kill_executor_picks_an_executor_of_the_run_and_a_missing_target_is_said(stand_in):
    mine = stand_in(EXECUTOR_JVM, "--app-id", "app-20261125-0001")
    theirs = stand_in(EXECUTOR_JVM, "--app-id", "app-20261125-0002")
    assert [p.pid for p in executor_jvms("app-20261125-0001")] == [mine.pid]
    injector = FaultInjector(parse_faults(["kill-executor@1s", "kill-engine@2s"]), SPARK_JVM)
    record = injector.inject(injector.due(1.0)[0], [], "app-20261125-0001")
    assert mine.wait(5) == -9 and theirs.poll() is None and record.pid == mine.pid
    missing = injector.inject(injector.due(2.0)[0], [psutil.Process(theirs.pid)], None)
    assert missing.at_ms is None and missing.note == "no target process found"


def test_an_engine_started_by_hand_is_found_by_its_program_path(stand_in, tmp_path):
    program = tmp_path / "program.py"
    assert find_program(program) is None
    p = stand_in(str(program), "--driver", "127.0.0.1:1")
    assert find_program(program) == p.pid
