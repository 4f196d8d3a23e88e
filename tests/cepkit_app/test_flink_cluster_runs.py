"""The benchmarks on a real Flink standalone cluster (1 JobManager, 2 TaskManagers of one slot each
on 127.0.0.1, started from the distribution PyFlink ships: harness/flink_cluster.py): its start,
bindings and status; a microbenchmark workload validated there; quick SF=1 Pairs (the tests' short
replay, tests/data/configs/short-pairs.toml) with a TaskManager killed mid-run (Flink restores the
job from its checkpoint once the keeper has brought the TaskManager back); quick Pairs from the run's
`flink run` line started by hand while the harness feeds, validated, with the runtime shipped to
the TaskManagers (every Pairs run here is also the cluster's plain Pairs run); and a stop that
leaves no JobManager, keeper, TaskManager or Python worker behind (specs/ENGINE_RUN.md, "Clusters"). The tests run in file order; the fixture stops the cluster anyway if a test fails."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from cepkit_app.cli import main
from harness.cluster import cluster_status, start_cluster, stop_cluster
from harness.cluster_spec import STATE_FILE, ClusterSpec
from harness.fault_injection import taskmanager_jvms
from harness.flink_cluster import JOBMANAGER_CLASS, KEEPER, overview
from kit.errors import CepkitError
from tests.cepkit_app import scale_out
from tests.helpers import REPO, SHORT_PAIRS, program_event

# `cluster` only: CI's cluster stage runs them, its Flink stage does not run them again.
pytestmark = [pytest.mark.cluster]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("flink-cluster") / "state"
    began = time.monotonic()
    info = start_cluster(ClusterSpec(directory, workers=2, cores_per_worker=1, memory_per_worker="2g",
                                     engine="flink"))
    info_took = time.monotonic() - began
    try:
        yield info, info_took
    finally:
        stop_cluster(directory)


def _running(info, timeout_s: float = 90) -> None:
    """Both TaskManagers registered: a job's cancellation at the end of a run may have made one
    fail (a Beam reference-count error when two Python operators of a slot close at once; its keeper
    starts it again, specs/ENGINE_RUN.md "Clusters"), and a run is best started on the whole cluster."""
    deadline = time.monotonic() + timeout_s
    while cluster_status(info.directory)["state"] != "running" and time.monotonic() < deadline:
        time.sleep(1)
    assert cluster_status(info.directory)["state"] == "running"


def _cepkit(*args, cwd, wait: bool = True):
    cmd = [sys.executable, "-m", "cepkit_app.cli", *map(str, args)]
    if not wait:
        return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=900)


def _passed(run_dir, stderr: str) -> dict:
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["verdict"] == "PASSED", stderr[-3000:]
    for s in summary["streams"]:
        assert (s["missing"], s["undue"], s["wrong"]) == (0, 0, 0), s
    return summary


def _cluster_processes(directory: Path) -> list[str]:
    """Running processes of this cluster: its JobManager, keepers or TaskManagers (they name its
    directory), or anything running in it (Python workers). Other Flink processes are not ours."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd", "status"]):
        argv, cwd = p.info["cmdline"] or [], p.info["cwd"] or ""
        if p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(str(directory) in a for a in argv) or cwd.startswith(str(directory)):
            found.append(f"{p.info['pid']} {' '.join(argv)[-120:]}")
    return found


def test_a_jobmanager_that_cannot_start_is_one_line_naming_its_log(tmp_path):
    """Its REST port is taken; before the module's cluster starts, so the two do not compete for the
    2 cores. Nothing is left running and no cluster.json is written."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(CepkitError) as e:
            start_cluster(ClusterSpec(tmp_path / "c", master_port=taken.getsockname()[1], engine="flink"))
    message = str(e.value)
    assert message.startswith("the Flink JobManager exited during start-up (exit code 1): ") and \
        "BindException" in message and message.endswith(f"; see {tmp_path / 'c' / 'jobmanager.log'}")
    with pytest.raises(CepkitError, match=r"^the Flink JobManager did not come up in time; see .*/jobmanager\.log$"):
        start_cluster(ClusterSpec(tmp_path / "slow", engine="flink"), timeout_s=0.5)
    assert not (tmp_path / "c" / STATE_FILE).exists() and not (tmp_path / "slow" / STATE_FILE).exists()
    assert _cluster_processes(tmp_path) == []


def test_start_records_the_cluster_binds_only_127_0_0_1_and_status_shows_it(cluster, capsys):
    info, took = cluster
    doc = json.loads((info.directory / STATE_FILE).read_text())
    assert (doc["kind"], doc["engine"]) == ("cepkit.cluster", "flink")
    assert info.master_url.startswith("flink://127.0.0.1:") and info.webui_url.startswith("http://127.0.0.1:")
    assert [Path(p).name for p in doc["logs"]["workers"]] == ["taskmanager-1.log", "taskmanager-2.log"]
    assert JOBMANAGER_CLASS in psutil.Process(info.master_pid).cmdline()
    assert all(str(KEEPER) in psutil.Process(pid).cmdline() for pid in info.worker_pids)
    tms = taskmanager_jvms(info.master_url)
    assert len(tms) == 2 and {p.ppid() for p in tms} == set(info.worker_pids)      # one JVM under each keeper
    _running(info)      # the TaskManagers' logs say registered a moment before the JobManager's overview counts them
    assert overview(info.webui_url)["slots-total"] == 2
    listening = [c.laddr for p in [psutil.Process(info.master_pid), *tms] for c in p.net_connections("inet")
                 if c.status == psutil.CONN_LISTEN]
    assert len(listening) >= 6, listening          # REST, RPC, blob server; each TaskManager's RPC and data
    assert {a.ip for a in listening} <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
    conf = (info.directory / "conf" / "config.yaml").read_text()
    assert 'rest.bind-address: "127.0.0.1"' in conf and "taskmanager.numberOfTaskSlots: 1" in conf
    assert (info.directory / "lib" / "flink-python-2.3.0.jar").is_symlink()
    st = cluster_status(info.directory)
    assert st["state"] == "running" and all(p["alive"] for p in st["processes"])
    assert main(["cluster", "status", "--dir", str(info.directory)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"running: {info.master_url}") and "2 TaskManager(s) registered, slots 2/2 free" in out
    print(f"cluster start took {took:.1f} s")


def test_a_micro_workload_passes_on_the_cluster(cluster, tmp_path):
    info, _ = cluster
    _running(info)
    run_dir = tmp_path / "run"
    proc = _cepkit("micro", "--engine", "flink", "--suite", "count-windows", "--quick", "--workload",
                   "count-windows-window-sliding-r50-sum", "--master", info.master_url, "--out", run_dir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert (row["status"], row["verdict"]) == ("completed", "PASSED")


def test_a_killed_taskmanager_is_brought_back_and_the_job_restored_loses_no_answer(cluster, tmp_path):
    info, _ = cluster
    _running(info)
    run_dir = tmp_path / "run"
    proc = _cepkit("pairs", "--engine", "flink", "-c", SHORT_PAIRS, "--master", info.master_url,
                   "--fault", "kill-taskmanager@18s", "--out", run_dir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (recovery,) = _passed(run_dir, proc.stderr)["faults"]
    assert recovery["kind"] == "kill-taskmanager" and 0 < recovery["recovery_ms"] < 120_000
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    (fault,) = run["faults"]
    assert fault["target"] == "java" and fault["restarted_ms"] is None       # no program restart
    # The TaskManagers (and their Python workers) are sampled with the program it launched: more
    # than the program's own.
    assert run["resources"]["peak_rss_bytes"] > 1.5e9
    assert "fault kill-taskmanager@18s: recovery" in proc.stderr
    print(proc.stderr[proc.stderr.index("fault kill-taskmanager@18s: recovery"):].splitlines()[0])
    # The killed JVM was a TaskManager of this cluster, under its keeper, which started it again;
    # Flink restored the job from its latest checkpoint, or from the start when none had completed
    # by the kill (on a loaded machine a Python task can take 15 s to start, and Flink checkpoints
    # only once every task runs; seen on CI with a kill at 12 s).
    logs = "".join(log.read_text(errors="replace") for log in info.worker_logs)
    assert f"(pid {fault['pid']}) exited with code -9" in logs
    master_log = info.master_log.read_text(errors="replace")
    master_log = master_log[master_log.index("Job cepkit pairs"):]       # from this run's job running, on
    if _checkpoints_completed_before(master_log, fault["at_ms"]):
        assert "Restoring job" in master_log
    else:
        assert "No checkpoint found during restore" in master_log       # the restart's
    _running(info)
    after = {p.pid for p in taskmanager_jvms(info.master_url)}
    assert len(after) == 2 and fault["pid"] not in after
    assert sum(p["restarts"] for p in cluster_status(info.directory)["processes"]) >= 1


def _checkpoints_completed_before(jobmanager_log, ts_ms):
    """How many checkpoints the JobManager's log says completed before `ts_ms` (epoch ms; the log's
    times are the machine's local time, to the millisecond)."""
    done = 0
    for line in jobmanager_log.splitlines():
        if "Completed checkpoint" in line:
            at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000
            done += at < ts_ms
    return done


def test_the_written_flink_run_line_run_by_hand_is_a_validated_run_with_the_runtime_shipped(cluster, tmp_path):
    info, _ = cluster
    _running(info)
    run_dir = tmp_path / "run"
    harness = _cepkit("pairs", "--engine", "flink", "-c", SHORT_PAIRS, "--master", info.master_url,
                      "--launch", "external", "--out", run_dir, cwd=tmp_path, wait=False)
    script = run_dir / "engine" / "flink-run.sh"
    deadline = time.monotonic() + 120
    while not script.exists() and time.monotonic() < deadline and harness.poll() is None:
        time.sleep(0.5)
    assert script.exists(), harness.communicate()[1][-3000:]
    # The run's secret waits beside it, for it (never in it): the engine is served with it.
    secret = run_dir / "engine" / "secret"
    value = secret.read_text().strip()
    assert secret.stat().st_mode & 0o777 == 0o600 and value not in script.read_text()
    # By hand: another directory, a bare environment (no PYTHONPATH, no cepkit variables).
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    by_hand = subprocess.run(["sh", str(script)], cwd="/", env=env, capture_output=True, text=True, timeout=900)
    assert by_hand.returncode == 0, by_hand.stderr[-3000:]
    assert '"event": "finished"' in by_hand.stdout
    _, stderr = harness.communicate(timeout=300)
    assert harness.returncode == 0, stderr[-3000:]
    _passed(run_dir, stderr)
    assert "(an engine started outside the harness)" in stderr
    assert not secret.exists()
    for path in (p for p in run_dir.rglob("*") if p.is_file()):      # the engine's own logs included
        assert value.encode() not in path.read_bytes(), path
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["refused_connections"] == {"feed": 0, "sink": 0}
    started = program_event(by_hand.stdout, "started")
    assert (started["master"], started["parallelism"]) == (info.master_url, 2)     # every slot
    # The TaskManagers got the runtime zip from the job (their blob stores), byte for byte. Both ran
    # the job's Python (parallelism 2 over two 1-slot TaskManagers, asserted above; without the
    # runtime a task fails and the run with it), but a TaskManager may drop a finished job's blobs
    # before this looks (seen once on a slow machine: one of the two stores left), so at least one.
    # The job also ships cepkit's Flink jar (its JVM source and sink, pipeline.jars) the same way.
    blobs = list(info.directory.glob(f"tmp/tm_*/blobStorage/job_{started['run_id']}/blob_p-*"))
    runtime = (run_dir / "runtime.zip").read_bytes()
    zips = [b for b in blobs if b.read_bytes() == runtime]
    assert 1 <= len(zips) <= 2, blobs
    jar = Path(run["runtime_jar"]).read_bytes() if run.get("runtime_jar") else None
    assert all(jar is not None and b.read_bytes() == jar for b in blobs if b not in zips), blobs
    script_text = script.read_text()
    assert f"  run \\\n  -m {info.master_url.removeprefix('flink://')} \\\n" in script_text and "-pyfs " in script_text


def test_the_default_plan_runs_its_per_event_work_on_both_workers(cluster, tmp_path):
    # A keyed pattern at 30,000 ev/s (tests/data/suites/scale-out.xml) in the default plan family:
    # its work runs in the engine's keyed operator, spread over both workers' JVMs, which together
    # are busier than the driver or client (tests/cepkit_app/scale_out.py).
    info, _ = cluster
    _running(info)
    run_dir = tmp_path / "run"
    proc = _cepkit("micro", "--engine", "flink", "--suite-file", REPO / scale_out.SUITE, "--master", info.master_url,
                   "--out", run_dir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert (row["status"], row["verdict"]) == ("completed", "PASSED"), row
    run = json.loads((run_dir / scale_out.WORKLOAD / "engine" / "run.json").read_text())
    assert run["plan"]["work"]["family"] == "engine", run["plan"]
    print(f"work split: {scale_out.assert_on_workers(run)}; plan: {run['plan']['work_text']}")


def test_stop_leaves_no_jobmanager_keeper_taskmanager_or_python_worker(cluster, capsys):
    info, _ = cluster
    tree = [psutil.Process(pid) for pid in info.pids]
    tree += [c for p in tree for c in p.children(recursive=True)]
    assert main(["cluster", "stop", "--dir", str(info.directory)]) == 0
    assert f"stopped the cluster {info.master_url}" in capsys.readouterr().err
    assert [p.pid for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    assert _cluster_processes(info.directory) == []
    assert not (info.directory / STATE_FILE).exists()
    assert cluster_status(info.directory)["state"] == "not running"
    assert stop_cluster(info.directory) == f"no cluster is running in {info.directory}"

