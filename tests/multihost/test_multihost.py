"""The benchmarks across hosts: four network namespaces made by scripts/netns-cluster.sh (the
harness, the engine's master, two workers, each with its own address on a private bridge), the
workers running the engine from a Python environment without cepkit, in working directories outside
the checkout (specs/ENGINE_RUN.md, "On several machines"), the cluster requiring its credentials
("Authentication": Spark's secret and encrypted RPC, Flink's mutual TLS). On each engine: quick
SF=1 Pairs (the tests' short replay) validated PASSED while a host without the run's secret is
refused by the feed and the sink and a host without the cluster's credentials by the master /
JobManager, with no secret on the wire; J3 against the kit's password-protected PostgreSQL; and a
worker host whose link is cut for 20 s mid-run.

Needs root (network namespaces); torn down after each engine's tests, also when they fail."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import SHORT_PAIRS

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "netns-cluster.sh"
CUT_SECONDS = 20
# What the engines' Python workers run: Spark's daemon and its forks, Flink's Beam worker.
PYTHON_WORKERS = ("pyspark.daemon", "pyspark.worker", "fn_execution", "beam")

pytestmark = pytest.mark.multihost


def _can_make_hosts() -> bool:
    return os.geteuid() == 0 and subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


@pytest.fixture(scope="module", params=["spark", "flink"])
def hosts(request, tmp_path_factory):
    """The four hosts with the engine's cluster up: cluster.env's settings, and the state dir."""
    if not _can_make_hosts():
        if os.environ.get("CI"):
            pytest.fail("the multihost tests need root and iproute2 (network namespaces)")
        pytest.skip("needs root and iproute2 (network namespaces)")
    directory = tmp_path_factory.mktemp(f"hosts-{request.param}")
    env = {**os.environ, "CEPKIT_NETNS": f"ck{os.getpid() % 100_000}"}
    try:
        up = subprocess.run(["bash", SCRIPT, "up", directory, request.param], capture_output=True, text=True,
                            env=env, timeout=600)
        assert up.returncode == 0, up.stderr[-3000:]
        info = dict(line.split("=", 1) for line in (directory / "cluster.env").read_text().splitlines() if "=" in line)
        yield {**info, "DIR": directory, "ENV": env}
    finally:
        subprocess.run(["bash", SCRIPT, "down", directory], capture_output=True, env=env, timeout=300)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert env["CEPKIT_NETNS"] + "-" not in left, left


def _config(hosts, path: Path, **run) -> Path:
    """The tests' short Pairs run (quick SF=1, replayed at 4x), on the cluster across the hosts."""
    settings = {"engine": hosts["ENGINE"], "master": hosts["MASTER_URL"], "feed_bind": hosts["HARNESS_ADDR"],
                "checkpoint_url": f"file://{hosts['SHARED_DIR']}/checkpoints",
                "worker_python": hosts["WORKER_PYTHON"],
                **({"cluster_credentials": hosts["CREDENTIALS"]} if hosts.get("CREDENTIALS") else {}), **run}
    head, sep, tail = SHORT_PAIRS.read_text().partition("[run]\n")
    path.write_text(head + sep + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()) + tail)
    return path


def _on(hosts, host: str, *cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", SCRIPT, "exec", hosts["DIR"], host, *map(str, cmd)], capture_output=True,
                          text=True, env=hosts["ENV"], **kw)


def _cepkit(hosts, *args, cwd: Path) -> subprocess.Popen:
    """`cepkit ARGS` on the harness host (in the background)."""
    cmd = ["bash", SCRIPT, "exec", hosts["DIR"], "harness", sys.executable, "-m", "cepkit_app.cli", *map(str, args)]
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**hosts["ENV"], "PYTHONPATH": str(REPO)})


def _summary(run_dir: Path, out: str) -> dict:
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["verdict"] == "PASSED", out[-3000:]
    for s in summary["streams"]:
        assert (s["missing"], s["undue"], s["wrong"]) == (0, 0, 0), s
    return summary


def _worker_processes(hosts) -> list[int]:
    pids = []
    for host in ("worker-1", "worker-2"):
        ns = f"{hosts['NETNS_PREFIX']}-{host}"
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
        pids += [int(p) for p in out.split()]
    return pids


def _python_workers_free_of_the_checkout(hosts) -> list[str]:
    """What the engine's Python workers on the worker hosts run: each one's interpreter, working
    directory and PYTHONPATH, none of them in the checkout. Empty when none runs now."""
    seen = []
    for pid in _worker_processes(hosts):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
            environ = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().decode(
                errors="replace").split("\0") if "=" in e)
        except OSError:
            continue                       # gone meanwhile
        if "python" not in Path(exe).name:
            continue
        where = " ".join(a.decode(errors="replace") for a in argv)
        if not any(w in where for w in PYTHON_WORKERS):
            continue                       # e.g. a launcher script's probe, not a worker
        assert argv[0].decode().startswith(str(Path(hosts["WORKER_PYTHON"]).parent)), where
        assert not cwd.startswith(str(REPO)), (where, cwd)
        assert str(REPO) not in environ.get("PYTHONPATH", ""), (where, environ.get("PYTHONPATH"))
        seen.append((where, environ.get("PYTHONPATH", "")))
    return seen


def test_quick_pairs_passes_across_hosts_and_refuses_a_host_without_the_secret(hosts, tmp_path):
    # The workers' interpreter knows nothing of cepkit, from their own directories.
    for host in ("worker-1", "worker-2"):
        probe = _on(hosts, host, "env", "-i", hosts["WORKER_PYTHON"], "-c", "import kit", cwd=hosts["DIR"] / host)
        assert probe.returncode != 0 and "No module named 'kit'" in probe.stderr, probe.stderr
    run_dir = tmp_path / "run"
    # Every frame on the bridge, from before the run to its end (the switch's namespace sees each
    # host's traffic on its port), to be searched for the run's secret afterwards.
    capture_file = tmp_path / "bridge.bin"
    capture = subprocess.Popen(["ip", "netns", "exec", f"{hosts['NETNS_PREFIX']}-switch", sys.executable, "-c",
                                _CAPTURE, str(capture_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)
    secrets_seen: set[str] = set()
    # The Python plan (run.work = "python"): its Python workers on the worker hosts show the runtime
    # shipped the engine's way (the default JVM plan across hosts is the cut-link test's and the
    # scale-out test's).
    proc = _cepkit(hosts, "pairs", "-c", _config(hosts, tmp_path / "run.toml", work="python"), "--out", run_dir,
                   cwd=tmp_path)
    # Meanwhile a stranger on worker-2, without the cluster's credentials, submits a program of its own.
    stranger = _submit_as_stranger(hosts, tmp_path)
    # While it runs: the engine's Python workers on the worker hosts, and a stranger on worker-2
    # who knows the feed's and the sink's addresses (the program's arguments) but not the secret.
    script = run_dir / "engine" / ("spark-submit.sh" if hosts["ENGINE"] == "spark" else "flink-run.sh")
    python_workers, refusals, ports, command_lines = [], {}, set(), set()
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not (python_workers and refusals
                                                                       and secrets_seen):
        time.sleep(1)
        secrets_seen |= _feed_secrets(hosts)
        command_lines |= _command_lines(hosts)
        python_workers = python_workers or _python_workers_free_of_the_checkout(hosts)
        if script.exists() and not refusals:
            text = script.read_text()
            for flag in ("--driver", "--sink"):
                address = re.search(rf"{flag} (\S+)", text)[1]
                host, port = address.rsplit(":", 1)
                ports.add(int(port))
                refusals[flag] = _on(hosts, "worker-2", hosts["WORKER_PYTHON"], "-c", _STRANGER, host, port,
                                     timeout=60).stdout.strip()
    out, err = proc.communicate(timeout=900)
    capture.terminate()
    capture.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]
    _summary(run_dir, err)
    _assert_stranger_refused(hosts, stranger)
    # No secret on the wire: the run's secret (read from the feed's environment while it ran) is
    # nowhere in what crossed the bridge, though the handshake and the load did.
    assert len(secrets_seen) == 1, secrets_seen
    secret = secrets_seen.pop()
    wire, engines_own = _tcp_payloads(capture_file.read_bytes(), ports)
    assert len(ports) == 2 and b'"nonce"' in wire and b'"proof"' in wire and b'"op":"read"' in wire
    for form in (secret.encode(), secret.upper().encode(), bytes.fromhex(secret)):
        assert form not in wire             # the feed's and the sink's connections: the handshake only
    _ENGINE_LEAKS[hosts["ENGINE"]] = secret.encode() in engines_own
    # The cluster's own secret: in its credentials file only, never on the wire, on a command line
    # (any process of the hosts while the run ran), in the run's files or the daemons' logs.
    if hosts.get("CREDENTIALS"):
        cluster_secret = _cluster_secret(hosts)
        assert cluster_secret not in wire + engines_own
        assert command_lines and not [c for c in command_lines if cluster_secret in c]
        # Each worker host's Spark work directory holds its executors' stdout and stderr.
        executor_logs = [p for w in hosts["DIR"].glob("worker-*") for p in (w / "work").glob("*/*/std*")]
        for path in [*run_dir.rglob("*"), *hosts["DIR"].glob("*/*.log"), *hosts["DIR"].glob("*/log/*"),
                     *executor_logs]:
            if path.is_file():
                assert cluster_secret not in path.read_bytes(), path
    assert python_workers, "no Python worker of the engine was seen on the worker hosts"
    # The runtime reached the workers the engine's way: Spark's executors fetched runtime.zip
    # (addPyFile) into their work directories; Flink's Python workers run it from the job's
    # shipped python files (python.files, through the blob server).
    if hosts["ENGINE"] == "spark":
        shipped = hosts["DIR"].glob(str(Path("worker-*", "work", "app-*", "*", "runtime.zip")))   # executors' dirs
        assert list(shipped), "no executor got runtime.zip"
    else:
        assert any("/python-files/" in path for _, path in python_workers), python_workers
    for flag, answer in refusals.items():
        assert answer.startswith("refused"), (flag, answer)
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["refused_connections"]["feed"] >= 1 and run["refused_connections"]["sink"] >= 1, run
    assert run["engine"]["started"]["master"] == hosts["MASTER_URL"]
    # The feed and the sink listened on the harness host's address, which the workers reached.
    assert run["spec"]["advertised_host"] == hosts["HARNESS_ADDR"]
    print(f"\n{hosts['ENGINE']} across hosts: {err.strip().splitlines()[-4:]}; python workers: "
          f"{[w for w, _ in python_workers[:2]]}")


# A stranger's Spark program: the cluster's master URL, none of its credentials (no SPARK_CONF_DIR).
_SPARK_STRANGER = r"""
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master(sys.argv[1]).appName("stranger").config("spark.driver.host", sys.argv[2])
         .config("spark.ui.enabled", "false").getOrCreate())
print("ran:", spark.sparkContext.parallelize(range(4), 2).map(lambda x: x * x).sum(), flush=True)
"""
STRANGER_WAIT_S = 75
# The names of the JobManager's jobs, asked with the cluster's client certificate.
_FLINK_JOBS = r"""
import json, ssl, sys, urllib.request as u
c = ssl.create_default_context(cafile=sys.argv[1] + "/ca.pem"); c.load_cert_chain(sys.argv[1] + "/client.pem")
print(json.dumps([j["name"] for j in json.load(u.urlopen(sys.argv[2] + "/jobs/overview", context=c))["jobs"]]))
"""


# A stranger's Flink job submission: the JobManager's REST API (POST /jobs, a job graph of its own)
# over https without a client certificate, and over plain http; prints what each answered.
_FLINK_STRANGER = r"""
import json, ssl, sys, urllib.request as u
host, port = sys.argv[1], sys.argv[2]
body = json.dumps({"jobGraphFileName": "stranger.bin", "jobName": "stranger"}).encode()
for scheme in ("https", "http"):
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    try:
        r = u.urlopen(u.Request(f"{scheme}://{host}:{port}/jobs", data=body, method="POST",
                                headers={"Content-Type": "application/json"}), timeout=20,
                      **({"context": ctx} if scheme == "https" else {}))
        print(scheme, "served:", r.status, r.read()[:200])
    except u.HTTPError as e:
        print(scheme, "answered:", e.code, e.read()[:200])
    except Exception as e:
        print(scheme, "refused:", type(e).__name__, e)
"""


def _submit_as_stranger(hosts, tmp_path: Path) -> subprocess.Popen:
    """On worker-2 (which holds none of the cluster's credentials): a program submitted to the
    Spark master, given STRANGER_WAIT_S to be served; a job to the Flink JobManager's REST API."""
    log = open(tmp_path / "stranger.log", "w")
    if hosts["ENGINE"] == "flink":
        host, port = hosts["MASTER_URL"].removeprefix("flink://").rsplit(":", 1)
        cmd = ["bash", SCRIPT, "exec", hosts["DIR"], "worker-2", "timeout", "60", hosts["WORKER_PYTHON"], "-c",
               _FLINK_STRANGER, host, port]
    else:
        cmd = ["bash", SCRIPT, "exec", hosts["DIR"], "worker-2", "timeout", str(STRANGER_WAIT_S), "env", "-u",
               "SPARK_CONF_DIR", "-u", "PYTHONPATH", hosts["WORKER_PYTHON"], "-c", _SPARK_STRANGER,
               hosts["MASTER_URL"], hosts["WORKER_ADDRS"].split(",")[1]]
    proc = subprocess.Popen(list(map(str, cmd)), stdout=log, stderr=subprocess.STDOUT, env=hosts["ENV"],
                            cwd=tmp_path)
    proc.log = tmp_path / "stranger.log"
    return proc


def _assert_stranger_refused(hosts, stranger: subprocess.Popen) -> None:
    """The stranger's program never ran: it did not print its result, the master never listed it
    among its applications, and its driver was refused at the master's door."""
    stranger.wait(timeout=STRANGER_WAIT_S + 60)
    text = stranger.log.read_text(errors="replace")
    if hosts["ENGINE"] == "flink":
        # No TLS session without the cluster's client certificate; plain HTTP gets no answer.
        assert re.search(r"^https refused: (SSLError|URLError|ConnectionResetError)", text, re.M), text
        assert re.search(r"^http refused: ", text, re.M), text
        assert "served" not in text and "answered" not in text, text
        jobs = _on(hosts, "harness", hosts["WORKER_PYTHON"], "-c", _FLINK_JOBS, hosts["CREDENTIALS"],
                   hosts["UI_URL"], timeout=30)
        names = json.loads(jobs.stdout)
        assert names and "stranger" not in names, (names, jobs.stderr)
        return
    assert "ran:" not in text, text[-2000:]
    doc = json.loads(_on(hosts, "harness", hosts["WORKER_PYTHON"], "-c",
                         f"import urllib.request as u; print(u.urlopen('{hosts['UI_URL']}/json/').read().decode())",
                         timeout=30).stdout)
    names = [a.get("name") for a in doc.get("activeapps", []) + doc.get("completedapps", [])]
    assert "stranger" not in names and names, names
    assert "Failed to connect to master" in text and "Expected SaslMessage" in text, text[-2000:]
    master_log = (hosts["DIR"] / "master" / "spark-master.log").read_text(errors="replace")
    assert "stranger" not in master_log, master_log[-2000:]


# Every frame any interface of the namespace sees, appended to argv[1] until SIGTERM.
_CAPTURE = r"""
import signal, socket, struct, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
with open(sys.argv[1], "wb") as f:
    while True:
        frame = s.recv(65536)
        f.write(struct.pack(">I", len(frame)) + frame)
"""


def _tcp_payloads(capture: bytes, ports: set[int]) -> tuple[bytes, bytes]:
    """The captured Ethernet frames' TCP payloads, split in two: those to or from one of `ports`
    (the feed's and the sink's) and all the others' (whole frames)."""
    ours, others, at = [], [], 0
    while at + 4 <= len(capture):
        (n,) = struct.unpack(">I", capture[at:at + 4])
        frame = capture[at + 4:at + 4 + n]
        at += 4 + n
        if len(frame) >= 34 and frame[12:14] == b"\x08\x00" and frame[23] == 6:      # IPv4, TCP
            ihl = (frame[14] & 0x0F) * 4
            tcp = frame[14 + ihl:]
            if len(tcp) >= 20:
                sport, dport = struct.unpack(">HH", tcp[:4])
                if sport in ports or dport in ports:
                    ours.append(tcp[(tcp[12] >> 4) * 4:])
                    continue
        others.append(frame)
    return b"".join(ours), b"".join(others)


# What the engines' own traffic carried (item 1 of issue 45: their RPC is not encrypted yet).
_ENGINE_LEAKS: dict[str, bool] = {}


def _cluster_secret(hosts) -> bytes:
    """The cluster's secret, from its credentials (scripts/netns-cluster.sh): Spark's shared secret,
    the password of Flink's keystore."""
    if hosts["ENGINE"] == "flink":
        text = (Path(hosts["CREDENTIALS"]) / "flink-ssl.yaml").read_text()
        (secret,) = set(re.findall(r"^security\.ssl\.\w+\.\S+-password: (\S+)$", text, re.M))
        return secret.encode()
    text = (Path(hosts["CREDENTIALS"]) / "spark-defaults.conf").read_text()
    (secret,) = re.findall(r"^spark\.authenticate\.secret (\S+)$", text, re.M)
    assert len(secret) == 64, "a 256-bit secret"
    return secret.encode()


def _command_lines(hosts) -> set[bytes]:
    """The command lines of every process on the hosts now."""
    found = set()
    for host in ("harness", "master", "worker-1", "worker-2"):
        ns = f"{hosts['NETNS_PREFIX']}-{host}"
        for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
            try:
                found.add(Path(f"/proc/{pid}/cmdline").read_bytes())
            except OSError:
                continue
    return found


def _feed_secrets(hosts) -> set[str]:
    """The CEPKIT_SECRET of the feed process (harness.driver) running now on the harness host (we are
    root)."""
    found = set()
    ns = f"{hosts['NETNS_PREFIX']}-harness"
    for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
        try:
            if b"harness.driver" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                if entry.startswith(b"CEPKIT_SECRET="):
                    found.add(entry.split(b"=", 1)[1].decode())
        except OSError:
            continue
    return found


def test_the_engines_own_traffic_carries_no_secret(hosts):
    # The engines' own connections are authenticated and encrypted (the cluster's credentials):
    # Spark's RPC (spark.network.crypto.enabled), Flink's internal and REST SSL.
    assert _ENGINE_LEAKS.get(hosts["ENGINE"]) is False, _ENGINE_LEAKS


# A stranger's client: connects, asks the feed's `hello` (or the sink's `stats`) without the auth
# frame, prints "refused: ..." when the server answers with an error or hangs up, else what it got.
_STRANGER = r"""
import json, socket, struct, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port), timeout=20)
head = json.dumps({"op": "stats"}).encode()
s.sendall(struct.pack(">II", len(head), 0) + head)
try:
    data = s.recv(65536)
except OSError as e:
    print(f"refused: {e}"); sys.exit()
print("refused: hung up" if not data else ("refused: " if b'"ok": false' in data or b'"ok":false' in data
      else "served: ") + data[8:300].decode(errors="replace"))
"""


def test_a_worker_host_cut_off_for_20_s_recovers_and_passes(hosts, tmp_path):
    run_dir = tmp_path / "run"
    command = ["bash", str(SCRIPT), "fault", str(hosts["DIR"])]
    config = _config(hosts, tmp_path / "run.toml", faults=["cut-link@12s"], fault_command=command)
    proc = _cepkit(hosts, "pairs", "-c", config, "--out", run_dir, cwd=tmp_path)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    # The cut; the run may also have seen its program die and be restarted (recovered all the same).
    (recovery,) = [f for f in _summary(run_dir, err)["faults"] if f["kind"] == "cut-link"]
    assert recovery["kind"] == "cut-link" and recovery["recovery_ms"] is not None, recovery
    # The cut-off worker's answers came late: back to normal well after the first output.
    assert recovery["normal_ms"] >= CUT_SECONDS * 1000 // 2, recovery
    fault_log = (run_dir / "engine" / "logs" / "fault-1.log").read_text()
    assert "cutting worker-1's link" in fault_log and "link is up again" in fault_log, fault_log
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    (fault,) = run["faults"]
    assert fault["kind"] == "cut-link" and not fault["note"], fault
    print(f"\n{hosts['ENGINE']} link cut: {[line for line in err.splitlines() if 'fault cut-link' in line]}; "
          f"restarts: {run['restarts']}; sink: {run['sink']}")


def test_j3_looks_up_a_password_protected_database_across_hosts(hosts, tmp_path):
    """J3 across hosts (issue 45 item 3): the kit's PostgreSQL listens on the harness's address with
    a password made for the run (SCRAM), the workers' lookups reach it, the run PASSES; the
    password is in none of the run's files and a worker host without it is refused."""
    from tests.cepkit_app.test_micro_e2e import database_joins
    from kit.workload import Suite, write_spec

    workload = database_joins()
    suite = write_spec(Suite("coverage", True, (dataclasses.replace(workload, params=()),)), tmp_path / "suite.xml")
    settings = {"engine": hosts["ENGINE"], "master": hosts["MASTER_URL"], "feed_bind": hosts["HARNESS_ADDR"],
                "checkpoint_url": f"file://{hosts['SHARED_DIR']}/checkpoints", "worker_python": hosts["WORKER_PYTHON"],
                "cluster_credentials": hosts["CREDENTIALS"], "database_join": "lookup"}
    sets = [a for k, v in settings.items() for a in ("--set", f"run.{k}={json.dumps(v)}")]
    run_dir = tmp_path / "run"
    proc = _cepkit(hosts, "micro", "--suite-file", suite, *sets, "--out", run_dir, cwd=tmp_path)
    dsns: set[str] = set()
    refused = None
    while proc.poll() is None:
        time.sleep(1)
        dsns |= _program_env(hosts, "CEPKIT_PG_DSN")
        if dsns and refused is None:
            # A worker host that knows where the database is, not its password.
            public = " ".join(p for p in next(iter(dsns)).split() if not p.startswith("password="))
            refused = _on(hosts, "worker-2", hosts["WORKER_PYTHON"], "-c", _PG_STRANGER, public, timeout=60).stdout
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, (out + err)[-3000:]
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert row["verdict"] == "PASSED", row
    assert f"PostgreSQL on {hosts['HARNESS_ADDR']}" in err
    (dsn,) = dsns
    password = re.search(r"password=(\S+)", dsn)[1]
    assert f"host={hosts['HARNESS_ADDR']}" in dsn and len(password) >= 24
    assert refused is not None and refused.startswith("refused:") and "password" in refused, refused
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
    assert password not in out + err


# A stranger's connection to the database: its address, user and name, no password.
_PG_STRANGER = r"""
import sys, psycopg
try:
    psycopg.connect(sys.argv[1], connect_timeout=10).close()
    print("served")
except psycopg.Error as e:
    print("refused:", str(e).strip().splitlines()[-1])
"""


def _program_env(hosts, name: str) -> set[str]:
    """The values of the environment variable `name` in the processes on the harness host."""
    found = set()
    ns = f"{hosts['NETNS_PREFIX']}-harness"
    for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
        try:
            for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                if entry.startswith(name.encode() + b"="):
                    found.add(entry.split(b"=", 1)[1].decode())
        except OSError:
            continue
    return found


def test_the_default_plan_runs_its_per_event_work_on_both_worker_hosts(hosts, tmp_path):
    """Plans that scale out (issue 44): a keyed pattern at 30,000 ev/s in the default plan family
    runs its per-event work in the worker hosts' JVMs (Spark's executors, Flink's TaskManagers),
    both of them busy and together busier than the driver or client on the harness host."""
    from tests.cepkit_app import scale_out

    settings = {"engine": hosts["ENGINE"], "master": hosts["MASTER_URL"], "feed_bind": hosts["HARNESS_ADDR"],
                "checkpoint_url": f"file://{hosts['SHARED_DIR']}/checkpoints", "worker_python": hosts["WORKER_PYTHON"],
                "cluster_credentials": hosts["CREDENTIALS"]}
    sets = [a for k, v in settings.items() for a in ("--set", f"run.{k}={json.dumps(v)}")]
    run_dir = tmp_path / "run"
    proc = _cepkit(hosts, "micro", "--suite-file", REPO / scale_out.SUITE, *sets, "--out", run_dir, cwd=tmp_path)
    on_workers: set[int] = set()        # the worker hosts' processes while the run lasts (executors end with it)
    while proc.poll() is None:
        on_workers |= set(_worker_processes(hosts))
        time.sleep(1)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, (out + err)[-3000:]
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert row["verdict"] == "PASSED", row
    run = json.loads((run_dir / scale_out.WORKLOAD / "engine" / "run.json").read_text())
    assert run["plan"]["work"]["family"] == "engine", run["plan"]
    split = scale_out.assert_on_workers(run)
    # The busy worker JVMs are the worker hosts' processes (their network namespaces).
    assert set(split["workers"]) <= on_workers, (split, sorted(on_workers))
    print(f"\n{hosts['ENGINE']} across hosts: work split {split}; plan: {run['plan']['work_text']}")
