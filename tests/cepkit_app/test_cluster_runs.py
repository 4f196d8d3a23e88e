"""The benchmarks on a real Spark standalone cluster (1 master, 2 workers on 127.0.0.1): a
microbenchmark workload validated there; quick SF=1 Pairs (the tests' short replay,
tests/data/configs/short-pairs.toml) with an executor killed mid-run; and quick Pairs from the run's
spark-submit line started by hand while the harness feeds, validated, with the runtime shipped to
each executor (specs/ENGINE_RUN.md, "Clusters"). Every Pairs run here is also the cluster's plain
Pairs run (one engine run fewer in CI's cluster stage)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cluster import start_cluster, stop_cluster
from harness.cluster_spec import ClusterSpec
from tests.cepkit_app import scale_out
from tests.helpers import REPO, SHORT_PAIRS, program_event

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster") / "state"
    info = start_cluster(ClusterSpec(directory, workers=2, cores_per_worker=1, memory_per_worker="2g"))
    try:
        yield info
    finally:
        stop_cluster(directory)


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


def test_a_micro_workload_passes_on_the_cluster_with_no_answer_through_the_driver(master, tmp_path):
    # Half the events answered, read by the executors through the JVM source and written by them
    # through the JVM writer (specs/ENGINE_RUN.md, "Connectors"): the driver's JVM, which holds
    # every writer of a local master, sent none of the answers the sink got, and the driver's
    # Python collected none (no foreachBatch: the sink is "jvm").
    run_dir = tmp_path / "run"
    proc = _cepkit("micro", "--suite", "filtering", "--quick", "--workload", "filtering-selectivity-50pct",
                   "--master", master.master_url, "--out", run_dir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert (row["status"], row["verdict"]) == ("completed", "PASSED")
    assert row["connectors"] == {"source": "jvm", "sink": "jvm", "why": None} and row["outputs"] > 1000
    run = json.loads((run_dir / "filtering-selectivity-50pct" / "engine" / "run.json").read_text())
    assert run["plan"]["connectors"]["sink"] == "jvm"
    assert run["engine"]["finished"]["output_rows"] == 0         # SinkWriter.sentRows() in the driver's JVM
    assert sum(run["outputs"].values()) == row["outputs"]


def test_a_killed_executor_loses_no_answer(master, tmp_path):
    run_dir = tmp_path / "run"
    proc = _cepkit("pairs", "-c", SHORT_PAIRS, "--master", master.master_url, "--fault", "kill-executor@12s",
                   "--out", run_dir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (recovery,) = _passed(run_dir, proc.stderr)["faults"]
    assert recovery["kind"] == "kill-executor" and 0 < recovery["recovery_ms"] < 120_000
    (fault,) = json.loads((run_dir / "engine" / "run.json").read_text())["faults"]
    assert fault["target"] == "java" and fault["restarted_ms"] is None       # no program restart needed
    assert "fault kill-executor@12s: recovery" in proc.stderr


def test_the_written_spark_submit_line_run_by_hand_is_a_validated_run_with_the_runtime_shipped(master, tmp_path):
    run_dir = tmp_path / "run"
    harness = _cepkit("pairs", "-c", SHORT_PAIRS, "--master", master.master_url, "--launch", "external",
                      "--out", run_dir, cwd=tmp_path, wait=False)
    script = run_dir / "engine" / "spark-submit.sh"
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
    assert started["master"] == master.master_url
    # Each executor's directory (worker-N, then its work folder, the application, the executor id).
    shipped = list(master.directory.glob(str(Path("worker-*", "work", started["app_id"], "*", "runtime.zip"))))
    assert len(shipped) == 2, shipped          # each executor got the engine's runtime


def test_the_default_plan_runs_its_per_event_work_on_both_workers(master, tmp_path):
    # A keyed pattern at 30,000 ev/s (tests/data/suites/scale-out.xml) in the default plan family:
    # its work runs in the engine's keyed operator, spread over both workers' JVMs, which together
    # are busier than the driver or client (tests/cepkit_app/scale_out.py).
    run_dir = tmp_path / "run"
    proc = _cepkit("micro", "--suite-file", REPO / scale_out.SUITE, "--master", master.master_url, "--out", run_dir,
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert (row["status"], row["verdict"]) == ("completed", "PASSED"), row
    run = json.loads((run_dir / scale_out.WORKLOAD / "engine" / "run.json").read_text())
    assert run["plan"]["work"]["family"] == "engine", run["plan"]
    print(f"work split: {scale_out.assert_on_workers(run)}; plan: {run['plan']['work_text']}")
