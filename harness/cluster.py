"""A Spark standalone cluster on this machine, started from pyspark's own launcher (`bin/spark-class`);
and the entry points for every engine's cluster (`ClusterSpec.engine`; a Flink cluster is
harness/flink_cluster.py's, which shares the process handling here).

Benchmark runs can point `spark.master` at a real cluster (one Master, N Workers, executors in
their own JVMs) instead of `local[*]`. `start_cluster(spec)` starts the daemons as detached
processes bound to one host (127.0.0.1 by default), waits until the master's JSON status lists
every worker ALIVE and records the cluster in `<directory>/cluster.json`; `cluster_status` and
`stop_cluster` work from that file alone, so they may run in another process (the CLI); the
engine it records picks the module that handles it. Logs, worker work dirs and executor scratch
space all stay inside `directory`.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import warnings
from pathlib import Path

import psutil

from harness.cluster_auth import is_loopback, make_spark_credentials
from harness.cluster_spec import STATE_FILE, ClusterInfo, ClusterSpec, read_cluster_info
from harness.engine_process import last_error_line
from harness.runtime_archive import package_dir
from kit.atomic import atomic_write, check_parent
from kit.errors import CepkitError
from kit.jsonfile import dumps_json

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 90.0
# The environment variable that marks every process of one cluster (ClusterInfo.token).
CLUSTER_TOKEN_ENV = "CEPKIT_CLUSTER_TOKEN"
TERM_WAIT_S = 15.0          # a daemon stops within ~1 s of SIGTERM; executors go with their worker
# The Popen objects of daemons this process started, kept so that a stop from this process reaps
# them (no zombies while it lives on, as in tests).
_CHILDREN: dict[int, subprocess.Popen] = {}


@atexit.register
def _leave_daemons_running() -> None:
    # The daemons outlive the process that started them on purpose (`cepkit cluster start`):
    # dropping their Popen objects must not warn "subprocess ... is still running".
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        _CHILDREN.clear()



def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _ours(pid: int, *needles: str) -> psutil.Process | None:
    """The process `pid` if it runs and its command line has each of `needles` as an argument."""
    try:
        p = psutil.Process(pid)
        return p if all(n in p.cmdline() for n in needles) and _running(p) else None
    except psutil.Error:
        return None


def _live(info: ClusterInfo) -> tuple[psutil.Process | None, list[psutil.Process | None]]:
    """The recorded daemons that still run, each only if its command line still is the daemon we
    started: a pid reused by anything else is never signalled."""
    master = _ours(info.master_pid, MASTER_CLASS, str(info.master_port))
    return master, [_ours(pid, WORKER_CLASS, info.master_url) for pid in info.worker_pids]


def master_json(webui_url: str, timeout_s: float = 3.0) -> dict | None:
    """The master's JSON status page, or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"{webui_url}/json/", timeout=timeout_s) as r:
            doc = json.loads(r.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _alive_workers(doc: dict | None) -> list[dict]:
    return [w for w in (doc or {}).get("workers", []) if isinstance(w, dict) and w.get("state") == "ALIVE"]


def _free_ports(host: str, n: int) -> list[int]:
    """n distinct free ports on `host` (each socket stays bound until all are chosen)."""
    with contextlib.ExitStack() as stack:
        try:
            socks = [stack.enter_context(socket.socket()) for _ in range(n)]
            for s in socks:
                s.bind((host, 0))
        except OSError as e:
            raise CepkitError(f"cluster spec: host: cannot listen on {host}: {e.strerror or e}") from None
        return [s.getsockname()[1] for s in socks]


def _java_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with JAVA_HOME set when no java is on its PATH and it names none."""
    if not env.get("JAVA_HOME") and shutil.which("java", path=env.get("PATH")) is None:
        jdks = sorted(glob.glob("/usr/lib/jvm/*17*/bin/java"))       # Debian's place for a JDK
        if not jdks:
            raise CepkitError("no java found: install a JDK 17 or set JAVA_HOME")
        env = {**env, "JAVA_HOME": str(Path(jdks[-1]).parent.parent)}
    return env


def _spark_env(host: str) -> dict[str, str]:
    # Our pyspark's jars, not those of a SPARK_HOME the shell may name; SPARK_LOCAL_IP makes the web
    # UIs bind `host` instead of 0.0.0.0.
    return _java_env({**os.environ, "SPARK_HOME": str(package_dir("pyspark")), "SPARK_LOCAL_IP": host})


def _launch(cmd: list[str], env: dict, log: Path, cwd: Path) -> int:
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env=env, start_new_session=True)
    _CHILDREN[proc.pid] = proc
    return proc.pid


def _wait(pids: dict[int, Path], ready, what: str, blame, deadline: float) -> None:
    """Until `ready()`; a daemon that exits, or the deadline, is a one-line error naming a log.
    `what` names the daemons waited for ("Spark master")."""
    while not ready():
        for pid, log in pids.items():
            if _CHILDREN[pid].poll() is not None:
                raise CepkitError(f"the {what} exited during start-up (exit code {_CHILDREN[pid].returncode}"
                                  f"): {last_error_line(log)}; see {log}")
        if time.monotonic() >= deadline:
            raise CepkitError(f"the {what} did not come up in time; see {blame()}")
        time.sleep(0.25)


def _live_any(info: ClusterInfo) -> tuple[psutil.Process | None, list[psutil.Process | None]]:
    """`_live` of the cluster's own engine."""
    if info.engine == "flink":
        from harness.flink_cluster import live_flink

        return live_flink(info)
    return _live(info)


def _refuse_running(directory: Path) -> None:
    """A cluster recorded in `directory` whose processes still run, whatever its engine, is not
    started over."""
    old = read_cluster_info(directory)
    if old is not None:
        master, workers = _live_any(old)
        if master or any(workers):
            raise CepkitError(f"a cluster is already running: {old.master_url} (recorded in "
                              f"{directory / STATE_FILE}); stop it first")


def start_cluster(spec: ClusterSpec, *, timeout_s: float | None = None) -> ClusterInfo:
    """Start the cluster `spec` asks for (its engine's module); return once it is up."""
    if spec.engine == "flink":
        from harness.flink_cluster import start_flink_cluster

        return start_flink_cluster(spec, **({} if timeout_s is None else {"timeout_s": timeout_s}))
    return _start_spark(spec, timeout_s=START_TIMEOUT_S if timeout_s is None else timeout_s)


def _start_spark(spec: ClusterSpec, *, timeout_s: float) -> ClusterInfo:
    """Start the master, then the workers; return once every worker is registered and ALIVE."""
    directory = spec.directory.absolute()
    check_parent(directory / STATE_FILE)
    _refuse_running(directory)
    directory.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    env = {**_spark_env(spec.host), CLUSTER_TOKEN_ENV: token}
    if not is_loopback(spec.host):
        # Beyond loopback: authenticated, encrypted RPC; the secret in a 0600 defaults file that the
        # daemons (and each run's driver, run.cluster_credentials) read as SPARK_CONF_DIR.
        env["SPARK_CONF_DIR"] = str(make_spark_credentials(directory))
    chosen = iter(_free_ports(spec.host, 2 + spec.workers))
    port, ui_port = spec.master_port or next(chosen), spec.webui_port or next(chosen)
    worker_ui_ports = [p for p in chosen if p not in (port, ui_port)][:spec.workers]
    spark_class = str(Path(env["SPARK_HOME"]) / "bin" / "spark-class")
    # No retry on the next port: a port taken meanwhile fails loudly instead of moving the daemon
    # off the URL we record. Spark 4 turns on the master's REST submission server (fixed port 6066,
    # no authentication) by default; nothing here uses it.
    no_retry = "-Dspark.port.maxRetries=0"
    env_master = {**env, "SPARK_MASTER_OPTS": f"{env.get('SPARK_MASTER_OPTS', '')} {no_retry} "
                                              "-Dspark.master.rest.enabled=false".strip()}
    master_url, webui_url = f"spark://{spec.host}:{port}", f"http://{spec.host}:{ui_port}"
    master_log = directory / "master.log"
    worker_logs = [directory / f"worker-{i}.log" for i in range(1, spec.workers + 1)]
    started_ms = int(time.time() * 1000)
    deadline = time.monotonic() + timeout_s
    pids: dict[int, Path] = {}
    master_pid = None
    try:
        master_pid = _launch([spark_class, MASTER_CLASS, "--host", spec.host, "--port", str(port),
                              "--webui-port", str(ui_port)], env_master, master_log, directory)
        pids[master_pid] = master_log
        # Workers wait for the master: one that finds no master retries only after 5-15 s.
        _wait(pids, lambda: (master_json(webui_url) or {}).get("status") == "ALIVE", "Spark master",
              lambda: master_log, deadline)
        for i, (ui, log) in enumerate(zip(worker_ui_ports, worker_logs), start=1):
            home = directory / f"worker-{i}"
            (home / "work").mkdir(parents=True, exist_ok=True)
            # Executors inherit the worker's SPARK_LOCAL_DIRS: their scratch space stays in `directory`.
            env_worker = {**env, "SPARK_LOCAL_DIRS": str(home / "local"),
                          "SPARK_WORKER_OPTS": f"{env.get('SPARK_WORKER_OPTS', '')} {no_retry}".strip()}
            pids[_launch([spark_class, WORKER_CLASS, "--host", spec.host, "--cores", str(spec.cores_per_worker),
                          "--memory", spec.memory_per_worker, "--webui-port", str(ui), "--work-dir",
                          str(home / "work"), master_url], env_worker, log, directory)] = log

        def missing_log() -> Path:
            seen = {w.get("webuiaddress", "").rsplit(":", 1)[-1] for w in _alive_workers(master_json(webui_url))}
            return next((log for ui, log in zip(worker_ui_ports, worker_logs) if str(ui) not in seen), master_log)

        _wait(pids, lambda: len(_alive_workers(master_json(webui_url))) >= spec.workers, "Spark workers",
              missing_log, deadline)
        info = ClusterInfo(directory, master_url, webui_url, spec.host, master_pid, tuple(pids)[1:], master_log,
                           worker_logs, started_ms, token=token)
        atomic_write(directory / STATE_FILE, dumps_json(info.to_dict()), overwrite=True)
    except BaseException:
        _shut_down(_processes([pid for pid in pids if pid != master_pid]),
                   _processes([master_pid] if master_pid else []), token)
        raise
    return info


def _processes(pids: list[int]) -> list[psutil.Process]:
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            out.append(psutil.Process(pid))
    return out


def _wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait until none of `procs` runs (a zombie counts as gone); those still running."""
    deadline = time.monotonic() + timeout_s
    while True:
        for pid in [pid for pid, proc in _CHILDREN.items() if proc.poll() is not None]:
            del _CHILDREN[pid]      # reaped
        alive = [p for p in procs if _running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def _shut_down(workers: list[psutil.Process], masters: list[psutil.Process], token: str | None) -> int:
    """SIGTERM the master first (so it schedules no replacement executor while workers go), then the
    workers (they stop their executors); SIGKILL whatever is left, executors and their Python
    workers included, and any process still carrying the cluster's `token` (an executor a worker
    launched during the stop, orphaned by then). Only processes proven the kit's own are
    signalled: the recorded daemons (pid and command line, `_live`), their descendants, and the
    carriers of the token; never a process for where it runs (its working directory). Returns how
    many processes there were."""
    def send(procs: list[psutil.Process], sig: int) -> None:
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)

    descendants = []
    for p in workers + masters:
        with contextlib.suppress(psutil.Error):
            # Now: once orphaned, they are hard to find. (Zombies, such as the exited launcher JVM of
            # spark-class, are no longer running and not counted.)
            descendants += [c for c in p.children(recursive=True) if _running(c)]
    for group in (masters, workers):
        send(group, signal.SIGTERM)
        _wait_gone(group, TERM_WAIT_S)
    everything = workers + masters + descendants
    left = _wait_gone(everything, 2.0) + [p for p in carrying(token) if p not in everything]
    send(left, signal.SIGKILL)
    _wait_gone(left, 5.0)
    return len(everything)


def carrying(token: str | None) -> list[psutil.Process]:
    """Running processes whose environment holds CLUSTER_TOKEN_ENV = `token`: started by the
    cluster's daemons (they inherit the mark), never this process or one of its ancestors."""
    if not token:
        return []
    mine = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        mine |= {p.pid for p in psutil.Process().parents()}
    out = []
    for p in psutil.process_iter(["status"]):
        if p.pid in mine or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        with contextlib.suppress(psutil.Error):
            if p.environ().get(CLUSTER_TOKEN_ENV) == token:
                out.append(p)
    return out


def stop_cluster(directory: str | os.PathLike) -> str:
    """Stop the cluster recorded in `directory` and remove cluster.json; says what it did. Stopping
    a stopped cluster (or an empty directory) is not an error."""
    info = read_cluster_info(directory)
    if info is None:
        return f"no cluster is running in {directory}"
    if info.engine == "flink":
        from harness.flink_cluster import stop_flink_cluster

        return stop_flink_cluster(info)
    master, workers = _live(info)
    count = _shut_down([w for w in workers if w], [master] if master else [], info.token)
    (Path(directory) / STATE_FILE).unlink(missing_ok=True)
    if not count:
        return f"the cluster {info.master_url} was not running; removed its {STATE_FILE}"
    return f"stopped the cluster {info.master_url} ({count} processes)"


def cluster_status(directory: str | os.PathLike) -> dict:
    """`state` ("running", "degraded" or "not running"), the recorded processes and whether each
    lives, and what the master reports (workers, cores, memory, applications)."""
    info = read_cluster_info(directory)
    if info is None:
        return {"state": "not running", "directory": str(directory), "detail": f"no {STATE_FILE}"}
    if info.engine == "flink":
        from harness.flink_cluster import flink_cluster_status

        return flink_cluster_status(info)
    master, workers = _live(info)
    doc = master_json(info.webui_url) if master else None
    alive = _alive_workers(doc)
    if not master and not any(workers):
        state, detail = "not running", f"its processes have exited ({STATE_FILE} is stale)"
    elif doc and doc.get("status") == "ALIVE" and all(workers) and len(alive) == len(workers):
        state, detail = "running", ""
    else:
        state, detail = "degraded", f"{len(alive)} of {len(workers)} workers alive" if doc else "no answer from master"
    roles = ["master"] + [f"worker-{i}" for i in range(1, len(workers) + 1)]
    out = {"state": state, "engine": "spark", "directory": str(directory), "detail": detail,
           "master_url": info.master_url, "webui_url": info.webui_url, "started_ms": info.started_ms, "master": None,
           "processes": [{"role": r, "pid": pid, "alive": p is not None, "log": str(log)} for r, pid, p, log
                         in zip(roles, info.pids, [master, *workers], [info.master_log, *info.worker_logs])]}
    if doc is not None:
        apps = [{k: a.get(k) for k in ("id", "name", "cores", "memoryperexecutor", "state")}
                for a in doc.get("activeapps", []) if isinstance(a, dict)]
        out["master"] = {"status": doc.get("status"), "alive_workers": len(alive), "cores": doc.get("cores"),
                         "cores_used": doc.get("coresused"), "memory_mb": doc.get("memory"),
                         "memory_used_mb": doc.get("memoryused"), "applications": apps}
    return out
