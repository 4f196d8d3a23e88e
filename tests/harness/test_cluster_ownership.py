"""`cepkit cluster stop` signals only processes it can prove the kit's own (harness/cluster.py,
issue 45): the recorded daemons by pid and command line, their descendants, and processes that
carry the cluster's token in their environment; never a process for where it runs.

No engine: the cluster.json is stale (its daemons are gone), as after a reboot or a crash, and the
bystanders are real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.cluster import CLUSTER_TOKEN_ENV, stop_cluster
from harness.cluster_spec import STATE_FILE, read_cluster_info
from kit.errors import CepkitError

TOKEN = "0123456789abcdef" * 2
ROOT = Path(__file__).resolve().parents[2]


def gone_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def stale_record(directory: Path, engine: str = "spark", token: str | None = TOKEN) -> None:
    scheme = {"spark": "spark://", "flink": "flink://"}[engine]
    doc = {"kind": "cepkit.cluster", "schema_version": 1, "engine": engine,
           "master_url": f"{scheme}127.0.0.1:7077", "webui_url": "http://127.0.0.1:8080", "host": "127.0.0.1",
           "pids": {"master": gone_pid(), "workers": [gone_pid()]},
           "logs": {"master": str(directory / "master.log"), "workers": [str(directory / "worker-1.log")]},
           "started_ms": 0}
    if token:
        doc["token"] = token
    (directory / STATE_FILE).write_text(json.dumps(doc))


def sleeper(cwd: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=cwd,
                            env={**os.environ, **(env or {})})


def running(p: subprocess.Popen) -> bool:
    return p.poll() is None


@pytest.mark.parametrize("engine", ["spark", "flink"])
def test_a_stale_stop_leaves_a_process_that_only_runs_in_the_directory(tmp_path, engine):
    """Regression: a stale cluster.json made `stop` SIGKILL every process whose working directory
    lay in the cluster's directory, whether the kit started it or not."""
    stale_record(tmp_path, engine)
    (tmp_path / "work").mkdir()
    bystanders = [sleeper(tmp_path), sleeper(tmp_path / "work")]
    try:
        stop_cluster(tmp_path)
        time.sleep(0.3)
        assert all(running(p) for p in bystanders)
        assert not (tmp_path / STATE_FILE).exists()
    finally:
        for p in bystanders:
            p.kill()
            p.wait()


def test_a_stale_stop_ends_the_processes_that_carry_the_clusters_token(tmp_path):
    """An executor a worker started, orphaned since: it carries the token, so it is the kit's."""
    stale_record(tmp_path)
    orphan = sleeper(Path("/"), {CLUSTER_TOKEN_ENV: TOKEN})
    other = sleeper(Path("/"), {CLUSTER_TOKEN_ENV: "f" * 32})     # another cluster's
    try:
        stop_cluster(tmp_path)
        assert orphan.wait(timeout=10) == -9
        assert running(other)
    finally:
        for p in (orphan, other):
            p.kill()
            p.wait()


def test_cluster_stop_in_the_clusters_own_directory_kills_neither_itself_nor_its_shell(tmp_path):
    """Regression: `cepkit cluster stop --dir .` killed itself and the shell that called it."""
    stale_record(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(["bash", "-c", f"{sys.executable} -m cepkit_app.cli cluster stop --dir . ; echo rc=$?"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "rc=0" in proc.stdout, proc.stderr
    assert "was not running; removed its cluster.json" in proc.stderr
    assert not (tmp_path / STATE_FILE).exists()


def test_a_token_is_recorded_and_checked(tmp_path):
    stale_record(tmp_path)
    assert read_cluster_info(tmp_path).token == TOKEN
    stale_record(tmp_path, token="not-hex")
    with pytest.raises(CepkitError, match=r"cluster.json: .*token: not valid"):
        read_cluster_info(tmp_path)
    stale_record(tmp_path, token=None)          # an older kit's record: no sweep, still stoppable
    assert read_cluster_info(tmp_path).token is None
    assert "was not running" in stop_cluster(tmp_path)
    assert psutil.Process().is_running()
