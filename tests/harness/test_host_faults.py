"""Host faults (`cut-link`, `kill-worker`): the run's fault command started with the kind as its
last argument and left to work, its failures said; and the workers' interpreter handed to the
engine (harness/fault_injection.py, kit/faults.py, run.worker_python)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from harness.fault_injection import FaultInjector
from kit.config import RunConfig
from kit.errors import CepkitError
from kit.faults import Fault, check_faults


def test_a_host_fault_needs_a_fault_command():
    with pytest.raises(CepkitError, match="cut-link need run.fault_command"):
        check_faults((Fault("cut-link", 5),), "spark://10.0.0.2:7077", "harness")
    check_faults((Fault("kill-worker", 5),), "flink://10.0.0.2:8081", "harness", ("netns-cluster.sh", "fault", "d"))
    with pytest.raises(CepkitError, match="fault_command"):
        RunConfig(faults=("cut-link@12s",))
    assert RunConfig(faults=("cut-link@12s",), fault_command=("x",)).fault_command == ("x",)
    with pytest.raises(CepkitError, match="must not be empty"):
        RunConfig(worker_python="")


def test_the_workers_interpreter_reaches_each_engine(tmp_path):
    from harness.config import DriverConfig
    from harness.launch import program_env, spark_submit_command
    from harness.run_spec import EngineRunSpec
    from harness.runners import flink

    def spec(engine, **kw):
        return EngineRunSpec(program=tmp_path / "p.py", run_dir=tmp_path, driver=DriverConfig(tmp_path), engine=engine,
                             **kw)

    spark = spec("spark", master="spark://10.0.0.2:7077", worker_python="/opt/workers/bin/python")
    assert program_env(spark)["PYSPARK_PYTHON"] == "/opt/workers/bin/python"       # what executors run
    assert program_env(spark)["PYSPARK_DRIVER_PYTHON"] == spark.python
    assert "spark.pyspark.python=/opt/workers/bin/python" in spark_submit_command(spark, [], ())
    assert program_env(spec("spark"))["PYSPARK_PYTHON"] == spec("spark").python   # unset: the engine's own
    flink_python = Path(__file__).resolve().parents[2] / ".venv-flink" / "bin" / "python"   # scripts/setup.sh --test
    remote = spec("flink", master="flink://10.0.0.2:8081", worker_python="/opt/workers/bin/python",
                  python=str(flink_python))
    launch = flink.launch(remote, ["--driver", "h:1"], {})
    assert "python.executable=/opt/workers/bin/python" in launch.command
    assert "-pyexec /opt/workers/bin/python" in launch.script


def test_the_fault_command_runs_with_the_kind_and_the_run_goes_on(tmp_path):
    mark = tmp_path / "struck"
    script = f"import sys, time; time.sleep(0.5); open({str(mark)!r}, 'w').write(sys.argv[1])"
    faults = FaultInjector((Fault("cut-link", 1),), "X", (sys.executable, "-c", script), tmp_path / "logs")
    (fault,) = faults.due(2.0)
    began = time.monotonic()
    record = faults.inject(fault, [], None)
    assert time.monotonic() - began < 0.4            # started, not waited for
    assert record.at_ms is not None and record.pid and "cut-link by" in record.target
    assert faults.log_entries() == [{"fault": "cut-link@1s", "kind": "cut-link", "at_ms": record.at_ms}]
    assert faults.close() == [] and mark.read_text() == "cut-link"     # the run's end waits for it
    assert (tmp_path / "logs" / "fault-1.log").exists()


def test_a_failing_or_missing_fault_command_is_said(tmp_path):
    failing = FaultInjector((Fault("kill-worker", 1),), "X", (sys.executable, "-c", "raise SystemExit(3)"), tmp_path)
    failing.inject(failing.due(1)[0], [], None)
    (noted,) = failing.close()
    assert noted.note.startswith("its command exited with code 3")
    missing = FaultInjector((Fault("kill-worker", 1),), "X", (str(tmp_path / "no-such-command"),), tmp_path)
    record = missing.inject(missing.due(1)[0], [], None)
    assert record.at_ms is None and "could not start" in record.note


def test_a_command_still_at_work_after_the_wait_is_ended(tmp_path):
    faults = FaultInjector((Fault("cut-link", 1),), "X", (sys.executable, "-c", "import time; time.sleep(60)"), tmp_path)
    faults.inject(faults.due(1)[0], [], None)
    (noted,) = faults.wait_commands(timeout_s=0.3)
    assert "still at work" in noted.note
