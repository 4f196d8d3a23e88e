"""A real Spark standalone cluster on 127.0.0.1 (harness/cluster.py, `cepkit cluster`).

One master and two workers serve the whole module (starting them takes ~8 s on 2 cores): its state
and bindings, a PySpark job whose Python UDF runs on the cluster's executors, the refusals, and a
stop that leaves no master, worker, executor or Python worker behind. The tests run in file order;
the stop comes last, and the fixture stops the cluster anyway if a test fails first.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import psutil
import pytest

from cepkit_app.cli import main
from harness.cluster import MASTER_CLASS, WORKER_CLASS, cluster_status, start_cluster, stop_cluster
from harness.cluster_spec import STATE_FILE, ClusterSpec
from kit.errors import CepkitError
from tests.helpers import with_class_archive

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster") / "state"
    info = start_cluster(ClusterSpec(directory, workers=2, cores_per_worker=1, memory_per_worker="1g"))
    try:
        yield info
    finally:
        stop_cluster(directory)


@pytest.fixture(scope="module")
def spark(cluster):
    """A driver in this process, connected to the cluster; executors of 512 MB, one per worker."""
    from pyspark.sql import SparkSession

    with pytest.MonkeyPatch.context() as mp:
        # The executors' Python workers must be this venv's interpreter (pandas, pyarrow).
        mp.setenv("PYSPARK_PYTHON", sys.executable)
        mp.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        session = (with_class_archive(SparkSession.builder).master(cluster.master_url).appName("cepkit-cluster-test")
                   .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
                   .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        try:
            assert session.sparkContext.master == cluster.master_url, "an earlier session was still active"
            yield session
        finally:
            session.stop()


def _spark_processes(directory: Path, master_url: str) -> list[str]:
    """Running processes of this cluster: a Spark daemon or executor naming its master or running in
    its directory (other Spark processes on the machine are not ours to judge)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd", "status"]):
        argv, cwd = p.info["cmdline"] or [], p.info["cwd"] or ""
        if p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        daemon = master_url in argv and any(c in argv for c in (MASTER_CLASS, WORKER_CLASS))
        if daemon or cwd.startswith(str(directory)):
            found.append(f"{p.info['pid']} {' '.join(argv)[-120:]}")
    return found


def test_a_master_that_cannot_start_is_one_line_naming_its_log(tmp_path):
    """Its port is taken (no retry on the next port: the URL recorded would be wrong); before the
    module's cluster starts, so the two do not compete for the 2 cores."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(CepkitError) as e:
            start_cluster(ClusterSpec(tmp_path / "c", master_port=taken.getsockname()[1]))
    message = str(e.value)
    assert message.startswith("the Spark master exited during start-up (exit code 1): ") and "Address already in use" \
        in message and message.endswith(f"; see {tmp_path / 'c' / 'master.log'}")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["master.log"]      # no cluster.json
    with pytest.raises(CepkitError, match=r"^the Spark master did not come up in time; see .*/master\.log$"):
        start_cluster(ClusterSpec(tmp_path / "slow"), timeout_s=0.5)
    assert _spark_processes(tmp_path, "spark://none") == []


def test_start_records_the_cluster_and_binds_only_127_0_0_1(cluster):
    doc = json.loads((cluster.directory / STATE_FILE).read_text())
    assert doc["kind"] == "cepkit.cluster" and doc["schema_version"] == 1
    assert doc["master_url"] == cluster.master_url and cluster.master_url.startswith("spark://127.0.0.1:")
    assert doc["pids"] == {"master": cluster.master_pid, "workers": list(cluster.worker_pids)}
    assert [Path(p).name for p in doc["logs"]["workers"]] == ["worker-1.log", "worker-2.log"]
    # The master lists a worker ALIVE (what start_cluster waits for) a moment before the worker
    # logs the master's reply; on a loaded CI machine that moment was seen to outlast the read.
    deadline = time.monotonic() + 15
    while "Successfully registered with master" not in cluster.worker_logs[1].read_text():
        assert time.monotonic() < deadline, cluster.worker_logs[1].read_text()[-2000:]
        time.sleep(0.2)
    listening = [c.laddr for pid in cluster.pids for c in psutil.Process(pid).net_connections("inet")
                 if c.status == psutil.CONN_LISTEN]
    # Master RPC + UI and each worker's RPC + UI; no REST submission server on 6066.
    assert len(listening) == 6, listening
    assert {a.ip for a in listening} <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
    assert 6066 not in {a.port for a in listening}


def test_status_shows_two_alive_workers(cluster, capsys):
    st = cluster_status(cluster.directory)
    assert st["state"] == "running" and all(p["alive"] for p in st["processes"])
    m = st["master"]
    assert (m["status"], m["alive_workers"], m["cores"], m["memory_mb"]) == ("ALIVE", 2, 2, 2048)
    assert main(["cluster", "status", "--dir", str(cluster.directory)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"running: {cluster.master_url}") and "2 worker(s) alive, cores 0/2 used" in out


def test_a_pyspark_job_runs_python_on_the_executors(cluster, spark):
    from pyspark.sql.functions import udf

    assert spark.range(1000).selectExpr("sum(id)").collect()[0][0] == 499500

    @udf("string")
    def where(x):
        import os
        return f"{os.getcwd()}|{x * 2}"

    rows = spark.range(1000).repartition(2).select(where("id").alias("w")).collect()
    cwds = {r.w.split("|")[0] for r in rows}
    assert sum(int(r.w.split("|")[1]) for r in rows) == 999000
    # An executor runs in its worker's work folder (app, then executor id): the UDF ran there, not in the driver.
    assert cwds and all(Path(c).relative_to(cluster.directory).parts[0] in ("worker-1", "worker-2") for c in cwds)
    apps = cluster_status(cluster.directory)["master"]["applications"]
    assert [(a["name"], a["state"], a["cores"], a["memoryperexecutor"]) for a in apps] == \
        [("cepkit-cluster-test", "RUNNING", 2, 512)]


def test_a_second_start_in_the_same_directory_is_refused(cluster, capsys):
    before = (cluster.directory / STATE_FILE).read_text()
    with pytest.raises(CepkitError) as e:
        start_cluster(ClusterSpec(cluster.directory))
    assert str(e.value).startswith(f"a cluster is already running: {cluster.master_url} ")
    assert main(["cluster", "start", "--dir", str(cluster.directory)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cepkit: error: a cluster is already running: spark://")
    assert (cluster.directory / STATE_FILE).read_text() == before


@pytest.mark.parametrize("field, value, message", [
    ("workers", 0, "cluster spec: workers: must be a whole number from 1 to 64, got 0"),
    ("memory_per_worker", "lots", "cluster spec: memory_per_worker: must be a size such as 2g or 512m"),
    ("host", "0.0.0.0", "cluster spec: host: must be one interface's"),
    ("master_port", 70000, "cluster spec: master_port: must be a port"),
])
def test_a_bad_spec_is_one_line(tmp_path, field, value, message):
    with pytest.raises(CepkitError) as e:
        ClusterSpec(tmp_path, **{field: value})
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_the_cli_on_a_directory_without_a_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["cluster", "status"]) == 0
    assert capsys.readouterr().out == "not running (no cluster.json in cluster)\n"
    assert main(["cluster", "stop"]) == 0
    assert "no cluster is running in cluster" in capsys.readouterr().err
    assert main(["cluster", "start", "--workers", "0", "--memory", "1g"]) == 2
    assert capsys.readouterr().err == "cepkit: error: --workers: must be a whole number from 1 to 64, got 0\n"
    assert list(tmp_path.iterdir()) == []        # nothing written: the default ./cluster was never made


def test_a_stale_record_is_not_running_and_never_signals_a_reused_pid(tmp_path):
    """cluster.json naming pids that now belong to other processes (here: this test's own)."""
    doc = {"kind": "cepkit.cluster", "schema_version": 1, "master_url": "spark://127.0.0.1:7077",
           "webui_url": "http://127.0.0.1:8080", "host": "127.0.0.1",
           "pids": {"master": os.getpid(), "workers": [os.getppid()]},
           "logs": {"master": str(tmp_path / "master.log"), "workers": [str(tmp_path / "worker-1.log")]},
           "started_ms": 0}
    (tmp_path / STATE_FILE).write_text(json.dumps(doc))
    st = cluster_status(tmp_path)
    assert st["state"] == "not running" and "stale" in st["detail"]
    assert stop_cluster(tmp_path) == f"the cluster spark://127.0.0.1:7077 was not running; removed its {STATE_FILE}"
    assert not (tmp_path / STATE_FILE).exists()


def test_stop_leaves_no_master_worker_or_executor(cluster, spark, capsys):
    tree = [psutil.Process(pid) for pid in cluster.pids]
    tree += [c for w in tree[1:] for c in w.children(recursive=True)]
    names = " ".join(" ".join(p.cmdline()) for p in tree if p.status() != psutil.STATUS_ZOMBIE)
    # The session is still connected: each worker runs an executor, and that executor Python workers.
    assert names.count(EXECUTOR_CLASS) == 2 and "pyspark.daemon" in names
    assert main(["cluster", "stop", "--dir", str(cluster.directory)]) == 0
    assert f"stopped the cluster {cluster.master_url}" in capsys.readouterr().err
    assert [p.pid for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    assert _spark_processes(cluster.directory, cluster.master_url) == []
    assert not (cluster.directory / STATE_FILE).exists()
    assert cluster_status(cluster.directory)["state"] == "not running"
    assert stop_cluster(cluster.directory) == f"no cluster is running in {cluster.directory}"
