"""A Flink standalone cluster without starting one (harness/flink_cluster.py, harness/flink_keeper.py,
the Flink runner's cluster master, the kill-taskmanager target): the spec's checks, the rendered
config.yaml, cluster.json, the runner's command and by-hand script, the TaskManagers a fault or the
sampler finds, the keeper's restarts and stop, the CLI's refusals. The real cluster runs in
tests/cepkit_app/test_flink_cluster_runs.py (`-m cluster`, `-m flink`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from cepkit_app.cli import main
from harness.cluster import cluster_status, stop_cluster
from harness.cluster_spec import STATE_FILE, ClusterInfo, ClusterSpec, read_cluster_info
from harness.config import DriverConfig
from harness.fault_injection import TASKMANAGER_JVM, FaultInjector, program_master, taskmanager_jvms
from harness.flink_cluster import KEEPER, cluster_settings, flink_home, render_config
from harness.run_spec import EngineRunSpec
from harness.runners import runner
from harness.runners.flink import cluster_address
from kit.errors import CepkitError
from kit.faults import parse_faults

HOST_KEYS = ("jobmanager.bind-host", "jobmanager.rpc.address", "taskmanager.bind-host", "taskmanager.host",
             "rest.address", "rest.bind-address")


def _settings(text: str) -> dict[str, str]:
    """A flat config.yaml's `key: value` lines (values as written)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition(": ")
            assert key not in out, f"{key} twice"
            out[key] = value
    return out


# -- the spec and the record ------------------------------------------------------------------------

@pytest.mark.parametrize("changes, message", [
    ({"engine": "storm"}, "cluster spec: engine: must be one of spark, flink, got 'storm'"),
    ({"engine": "flink", "memory_per_worker": "512m"},
     "cluster spec: memory_per_worker: a Flink TaskManager needs at least 1024m, got '512m'"),
    ({"engine": "flink", "webui_port": 8081}, "cluster spec: webui_port: a Flink JobManager serves its web UI"),
    ({"engine": "flink", "workers": 0}, "cluster spec: workers: must be a whole number from 1 to 64, got 0"),
])
def test_a_bad_flink_spec_is_one_line(tmp_path, changes, message):
    with pytest.raises(CepkitError) as e:
        ClusterSpec(tmp_path, **changes)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_spec_is_spark_unless_it_says_flink(tmp_path):
    assert ClusterSpec(tmp_path).engine == "spark"
    spec = ClusterSpec(tmp_path, engine="flink", workers=3, cores_per_worker=2, memory_per_worker="1536m")
    assert (spec.engine, spec.worker_memory_mib) == ("flink", 1536)


def test_cluster_json_records_the_engine_and_an_old_one_is_spark(tmp_path):
    info = ClusterInfo(tmp_path, "flink://127.0.0.1:8081", "http://127.0.0.1:8081", "127.0.0.1", 10, (11, 12),
                       tmp_path / "jobmanager.log", [tmp_path / "taskmanager-1.log", tmp_path / "taskmanager-2.log"],
                       1, "flink")
    doc = info.to_dict()
    assert doc["engine"] == "flink" and doc["master_url"] == "flink://127.0.0.1:8081"
    (tmp_path / STATE_FILE).write_text(json.dumps(doc))
    assert read_cluster_info(tmp_path) == info
    del doc["engine"]                      # written before Flink clusters: a Spark one
    doc["master_url"] = "spark://127.0.0.1:7077"
    assert ClusterInfo.from_dict(doc, tmp_path).engine == "spark"
    with pytest.raises(CepkitError, match="cluster info: master_url: not valid: 'spark://127.0.0.1:7077'"):
        ClusterInfo(tmp_path, "spark://127.0.0.1:7077", "http://127.0.0.1:8081", "127.0.0.1", 10, (11,),
                    tmp_path / "j.log", [tmp_path / "t.log"], 1, "flink")


# -- config.yaml ------------------------------------------------------------------------------------

def test_the_config_binds_every_address_to_the_host_and_overrides_the_distribution(tmp_path):
    spec = ClusterSpec(tmp_path, engine="flink", workers=2, cores_per_worker=1, memory_per_worker="2g")
    base = {"env.java.opts.all": "--add-opens=java.base/java.lang=ALL-UNNAMED", "jobmanager.bind-host": "localhost",
            "taskmanager.numberOfTaskSlots": 1, "parallelism.default": 1,
            "jobmanager.execution.failover-strategy": "region"}
    own = cluster_settings(spec, tmp_path, 40001, 40002, "/opt/flink-env/bin/python")
    conf = _settings(render_config(base, own))
    assert all(conf[k] == '"127.0.0.1"' for k in HOST_KEYS), conf
    assert (conf["rest.port"], conf["jobmanager.rpc.port"]) == ("40001", "40002")
    assert conf["env.java.opts.all"] == '"--add-opens=java.base/java.lang=ALL-UNNAMED"'    # kept: Java 17 needs it
    assert conf["jobmanager.execution.failover-strategy"] == '"region"'
    assert (conf["taskmanager.numberOfTaskSlots"], conf["parallelism.default"]) == ("1", "2")   # every slot
    assert conf["taskmanager.memory.process.size"] == '"2048m"' and conf["jobmanager.memory.process.size"] == '"1024m"'
    assert conf["restart-strategy.type"] == '"fixed-delay"' and int(conf["restart-strategy.fixed-delay.attempts"]) >= 3
    assert conf["heartbeat.interval"] == '"2 s"' and conf["web.submit.enable"] == "false"
    assert conf["io.tmp.dirs"] == json.dumps(str(tmp_path / "tmp"))
    assert conf["python.executable"] == '"/opt/flink-env/bin/python"'


def test_the_flink_distribution_is_found_beside_the_interpreter(tmp_path):
    python = tmp_path / "env" / "bin" / "python"
    flink = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "pyflink" / "bin" / "flink"
    for f in (python, flink):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("")
    assert flink_home(str(python)) == flink.parent.parent


# -- the runner on a cluster master -----------------------------------------------------------------

def _spec(tmp_path: Path, **changes) -> EngineRunSpec:
    program = tmp_path / "program.py"
    program.write_text("")
    return EngineRunSpec(program=program, run_dir=tmp_path / "run" / "engine", driver=DriverConfig(tmp_path),
                         **changes)


def test_the_runner_submits_to_a_cluster_and_writes_a_flink_run_script(tmp_path):
    python = tmp_path / "env" / "bin" / "python"
    flink = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "pyflink" / "bin" / "flink"
    for f in (python, flink):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("")
    spec = _spec(tmp_path, engine="flink", python=str(python), master="flink://127.0.0.1:8081",
                 spark_conf=(("spark.driver.memory", "4g"), ("parallelism.default", "3")))
    args = ["--driver", "127.0.0.1:1", "--sink", "127.0.0.1:2", "--checkpoint", "/tmp/ck",
            "--py-files", "/run/runtime.zip"]
    launch = runner("flink").launch(spec, args, {"PYTHONPATH": "/src", "CEPKIT_PG_DSN": "dbname=x y"})
    # The harness runs the program itself (it submits to the cluster its --master names).
    assert launch.command[:2] == [str(python), str(spec.program.resolve())]
    assert launch.command[-4:] == ["--master", "flink://127.0.0.1:8081", "--conf", "parallelism.default=3"]
    script = launch.script
    assert launch.script_name == "flink-run.sh" and script.startswith("#!/bin/sh\n")
    assert f"exec {flink} \\\n  run \\\n  -m 127.0.0.1:8081 \\\n" in script
    assert f"  -pyclientexec {python} \\\n  -pyexec {python} \\\n  -pyfs /run/runtime.zip \\\n" in script
    assert f"  -py {spec.program.resolve()} \\\n  --driver 127.0.0.1:1 \\\n" in script
    assert "  --py-files /run/runtime.zip \\\n" in script and script.endswith("--conf parallelism.default=3\n")
    assert "PYTHONPATH" not in script and "export CEPKIT_PG_DSN='dbname=x y'" in script
    assert f"export FLINK_LOG_DIR={(spec.run_dir / 'logs').absolute()}" in script
    assert "spark.driver.memory" not in script


@pytest.mark.parametrize("master, expected", [
    ("local[2]", None), ("local[*]", None), ("local", None), ("flink://127.0.0.1:8081", ("127.0.0.1", 8081)),
    ("flink://jm.example:1", ("jm.example", 1)),
])
def test_cluster_address(master, expected):
    assert cluster_address(master) == expected


@pytest.mark.parametrize("master", ["spark://h:7077", "flink://h", "flink://h:0", "flink://h:99999", "yarn",
                                    "flink://:8081", "local[0]"])
def test_other_masters_are_refused_in_one_line(tmp_path, master):
    with pytest.raises(CepkitError) as e:
        runner("flink").launch(_spec(tmp_path, engine="flink", master=master), [], {})
    assert "local mini-cluster (local[N]) or a Flink standalone cluster (flink://HOST:PORT" in str(e.value)
    assert "\n" not in str(e.value)


# -- the TaskManagers of a cluster: what kill-taskmanager kills and the sampler samples ---------------

@pytest.fixture
def stand_in():
    """Start a sleeping process whose command line carries the given words."""
    procs = []

    def start(*words: str) -> subprocess.Popen:
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *words]))
        deadline = time.monotonic() + 30
        while words[-1] not in psutil.Process(procs[-1].pid).cmdline() and time.monotonic() < deadline:
            time.sleep(0.01)
        return procs[-1]

    yield start
    for p in procs:
        p.kill()
        p.wait()


def _conf_dir(root: Path, port: int) -> Path:
    conf = root / f"cluster-{port}" / "conf"
    conf.mkdir(parents=True)
    (conf / "config.yaml").write_text(f'rest.address: "127.0.0.1"\nrest.port: {port}\n')
    return conf


def test_kill_taskmanager_kills_one_taskmanager_of_the_runs_cluster_only(stand_in, tmp_path):
    conf = str(_conf_dir(tmp_path, 18081))
    ours = [stand_in(TASKMANAGER_JVM, "--configDir", conf), stand_in(TASKMANAGER_JVM, "--configDir", conf)]
    theirs = stand_in(TASKMANAGER_JVM, "--configDir", str(_conf_dir(tmp_path, 18082)))
    program = stand_in("program.py", "--driver", "127.0.0.1:1", "--master", "flink://127.0.0.1:18081")
    assert [p.pid for p in taskmanager_jvms("flink://127.0.0.1:18081")] == sorted(p.pid for p in ours)
    assert [p.pid for p in taskmanager_jvms("flink://127.0.0.1:18082")] == [theirs.pid]
    assert taskmanager_jvms("flink://127.0.0.1:18083") == []
    assert program_master([psutil.Process(program.pid)]) == "flink://127.0.0.1:18081"
    spec = _spec(tmp_path, engine="flink", master="flink://127.0.0.1:18081")
    assert sorted(runner("flink").sampled_extra(spec, {})) == sorted(p.pid for p in ours)

    injector = FaultInjector(parse_faults(["kill-taskmanager@12s"]), runner("flink").ENGINE_JVM)
    (fault,) = injector.due(12.0)
    record = injector.inject(fault, [psutil.Process(program.pid)], None)
    victim = min(ours, key=lambda p: p.pid)
    assert victim.wait(5) == -9 and record.pid == victim.pid and record.kind == "kill-taskmanager"
    assert all(p.poll() is None for p in ours + [theirs] if p is not victim)
    # A program on a local master has no TaskManager to lose: said, nothing killed.
    local = stand_in("program.py", "--master", "local[2]")
    missing = FaultInjector(parse_faults(["kill-taskmanager@1s"]), "x").inject(
        parse_faults(["kill-taskmanager@1s"])[0], [psutil.Process(local.pid)], None)
    assert missing.at_ms is None and missing.note == "no target process found" and theirs.poll() is None


# -- the keeper ---------------------------------------------------------------------------------------

def _keeper(tmp_path: Path, *command: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "keeper.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-I", str(KEEPER), str(tmp_path), "taskmanager-1", "--", *command],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def _child(keeper: subprocess.Popen, other_than: int | None = None, timeout_s: float = 20) -> psutil.Process:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kids = [c for c in psutil.Process(keeper.pid).children() if c.pid != other_than]
        if kids:
            return kids[0]
        time.sleep(0.05)
    raise AssertionError("the keeper started no child")


def test_the_keeper_starts_a_killed_taskmanager_again_and_stops_it_on_sigterm(tmp_path):
    keeper, log = _keeper(tmp_path, sys.executable, "-c", "import time; time.sleep(120)")
    try:
        first = _child(keeper)
        first.send_signal(signal.SIGKILL)
        second = _child(keeper, other_than=first.pid)
        assert "taskmanager-1 (pid %d) exited with code -9" % first.pid in log.read_text()
        assert "starting it again in 1 s (restart 1)" in log.read_text()
        keeper.send_signal(signal.SIGTERM)
        assert keeper.wait(15) == 0
        assert not second.is_running() or second.status() == psutil.STATUS_ZOMBIE
        assert log.read_text().count("exited with code") == 1      # the stop is no death
    finally:
        if keeper.poll() is None:
            os.killpg(keeper.pid, signal.SIGKILL)
            keeper.wait()


def test_the_keeper_gives_up_on_a_taskmanager_that_cannot_start(tmp_path):
    keeper, log = _keeper(tmp_path, sys.executable, "-c", "raise SystemExit(3)")
    assert keeper.wait(30) == 1
    text = log.read_text()
    assert text.count("exited with code 3") == 3 and "3 times in a row" in text and "not starting it again" in text


# -- the CLI --------------------------------------------------------------------------------------------

def test_the_cli_refuses_a_bad_engine_or_size_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["cluster", "start", "--engine", "storm"]) == 2
    assert capsys.readouterr().err.startswith("cepkit: error: --engine: engine 'storm' is not known")
    assert main(["cluster", "start", "--engine", "flink", "--memory", "512m"]) == 2
    assert capsys.readouterr().err == ("cepkit: error: --memory: a Flink TaskManager needs at least 1024m, "
                                       "got '512m'\n")
    assert list(tmp_path.iterdir()) == []


def test_a_stale_flink_record_is_not_running_and_never_signals_a_reused_pid(tmp_path, capsys):
    """cluster.json naming pids that now belong to other processes (this test's own)."""
    info = ClusterInfo(tmp_path, "flink://127.0.0.1:18081", "http://127.0.0.1:18081", "127.0.0.1", os.getpid(),
                       (os.getppid(),), tmp_path / "jobmanager.log", [tmp_path / "taskmanager-1.log"], 0, "flink")
    (tmp_path / STATE_FILE).write_text(json.dumps(info.to_dict()))
    st = cluster_status(tmp_path)
    assert (st["state"], st["engine"]) == ("not running", "flink") and "stale" in st["detail"]
    assert [p["role"] for p in st["processes"]] == ["jobmanager", "taskmanager-1"]
    assert main(["cluster", "status", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("not running: flink://127.0.0.1:18081")
    assert stop_cluster(tmp_path) == f"the cluster flink://127.0.0.1:18081 was not running; removed its {STATE_FILE}"
    assert not (tmp_path / STATE_FILE).exists() and psutil.Process(os.getpid()).is_running()
