"""The runners that start each engine's program (harness/runners/), and where its interpreter is
(harness/environments.py): commands, by-hand scripts, refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.config import DriverConfig
from harness.environments import engine_python
from harness.run_spec import EngineRunSpec
from harness.runners import runner
from kit.errors import CepkitError
from kit.faults import parse_faults

ARGS = ["--driver", "127.0.0.1:1", "--sink", "127.0.0.1:2", "--checkpoint", "/tmp/ck"]


def _spec(tmp_path: Path, **changes) -> EngineRunSpec:
    program = tmp_path / "program.py"
    program.write_text("")
    return EngineRunSpec(program=program, run_dir=tmp_path / "run" / "engine", driver=DriverConfig(tmp_path),
                         **changes)


def test_flink_runs_the_program_under_its_interpreter_with_flink_settings_only(tmp_path):
    spec = _spec(tmp_path, engine="flink", python="/opt/flink-env/bin/python", master="local[2]",
                 spark_conf=(("spark.driver.memory", "4g"), ("execution.checkpointing.interval", "5 s")))
    launch = runner("flink").launch(spec, ARGS, {"PYTHONPATH": "/src"})
    assert launch.command[:2] == ["/opt/flink-env/bin/python", str(spec.program.resolve())]
    assert launch.command[-4:] == ["--master", "local[2]", "--conf", "execution.checkpointing.interval=5 s"]
    assert "spark.driver.memory=4g" not in " ".join(launch.command)
    assert launch.script_name == "flink-run.sh" and "export PYTHONPATH=/src" in launch.script
    # The run's secret: from the caller's environment or the external launch's file, never written in.
    assert f"CEPKIT_SECRET=$(cat {spec.run_dir.absolute() / 'secret'})" in launch.script
    assert launch.env["FLINK_LOG_DIR"].endswith("run/engine/logs")
    assert runner("flink").sampled_extra(spec, {"pid": 1}) == []


def test_flink_refuses_a_cluster_master_and_faults(tmp_path):
    with pytest.raises(CepkitError, match="local mini-cluster"):
        runner("flink").launch(_spec(tmp_path, engine="flink", master="spark://h:7077"), ARGS, {})
    assert _spec(tmp_path, engine="flink", faults=parse_faults(("kill-engine@40s",))).faults[0].kind == "kill-engine"


def test_spark_keeps_its_submit_script_and_the_old_name_still_means_spark(tmp_path):
    spec = _spec(tmp_path, engine="pyspark", jvm_class_archive=False, quiet_local_fs=False)
    assert spec.engine == "spark"
    launch = runner(spec.engine).launch(spec, ARGS, {})
    assert launch.script_name == "spark-submit.sh" and "spark-submit" in launch.script
    assert f"CEPKIT_SECRET=$(cat {spec.run_dir.absolute() / 'secret'})" in launch.script
    assert launch.command[:2] == [spec.python, str(spec.program.resolve())]
    with pytest.raises(CepkitError, match="engine: engine 'storm' is not known"):
        _spec(tmp_path, engine="storm")


def test_the_engine_interpreter_is_ours_or_its_own_environments(tmp_path, monkeypatch):
    assert engine_python("spark") == sys.executable
    fake = tmp_path / "python"
    fake.write_text("")
    monkeypatch.setenv("CEPKIT_FLINK_PYTHON", str(fake))
    assert engine_python("flink") == str(fake)
    monkeypatch.setenv("CEPKIT_FLINK_PYTHON", str(tmp_path / "nowhere"))
    with pytest.raises(CepkitError, match="CEPKIT_FLINK_PYTHON: .*nowhere: no such interpreter"):
        engine_python("flink")


@pytest.mark.parametrize("engine", ["spark", "flink"])
def test_the_engine_jvms_keep_their_temporary_files_in_the_run_directory(engine, tmp_path, monkeypatch):
    # A killed JVM never deletes its temporary files (Flink's extracted jars, Spark's spark-* and
    # blockmgr-*): they go to the run's tmp/, which the harness removes when the run ends.
    monkeypatch.setenv("JVM_ARGS", "-Duser.flag=1")
    spec = _spec(tmp_path, engine=engine, jvm_class_archive=False, quiet_local_fs=False,
                 spark_conf=(("spark.driver.extraJavaOptions", "-Dmine=1"),))
    launch = runner(engine).launch(spec, ARGS, {})
    scratch = spec.run_dir.absolute() / "tmp"
    assert launch.scratch == scratch and scratch.is_dir() and launch.env["TMPDIR"] == str(scratch)
    if engine == "spark":
        assert f"spark.driver.extraJavaOptions=-Djava.io.tmpdir={scratch} -Dmine=1" in launch.command
    else:
        assert launch.env["JVM_ARGS"] == f"-Djava.io.tmpdir={scratch} -Duser.flag=1"
        assert "-Dmine=1" not in " ".join(launch.command)
    # The by-hand script may run on another machine: it leaves the JVM's temporary directory alone.
    assert "java.io.tmpdir" not in launch.script
    external = _spec(tmp_path, engine=engine, launch="external", jvm_class_archive=False, quiet_local_fs=False)
    assert runner(engine).launch(external, ARGS, {}).scratch is None


def test_a_run_directory_with_whitespace_keeps_the_jvms_tmp(tmp_path):
    (tmp_path / "p.py").write_text("")
    spec = EngineRunSpec(program=tmp_path / "p.py", run_dir=tmp_path / "my runs" / "engine",
                         driver=DriverConfig(tmp_path), engine="flink")
    launch = runner("flink").launch(spec, ARGS, {})
    assert launch.scratch is None and not {"JVM_ARGS", "TMPDIR"} & set(launch.env)
    assert not (spec.run_dir / "tmp").exists()
