"""A Flink standalone cluster on this machine, started from the Flink distribution PyFlink ships
(`bin/jobmanager.sh` and `bin/taskmanager.sh` of the `pyflink` package in the Flink environment,
`.venv-flink`).

Benchmark runs can point a Flink program at a real cluster (`--master flink://HOST:PORT`: one
JobManager, N TaskManagers, the Python workers in the TaskManagers) instead of the local
mini-cluster inside the program. `start_flink_cluster(spec)` (through harness/cluster.py's
`start_cluster`, which picks the module by `spec.engine`):

- writes the cluster's configuration, `<directory>/conf/config.yaml`: the distribution's own
  settings (its Java 17 module options among them), then every address bound to `spec.host`
  (127.0.0.1 by default: `jobmanager.bind-host`, `taskmanager.bind-host`, `taskmanager.host`,
  `rest.bind-address`, `rest.address`), free ports for the REST API and the JobManager's RPC, the
  memory sizes (JobManager 1 GiB; each TaskManager `spec.memory_per_worker`, 2 GiB by default, for
  a 2-core 24 GiB machine), `spec.cores_per_worker` task slots per TaskManager, the default
  parallelism (every slot), the restart strategy and heartbeats (below), and scratch space
  (`io.tmp.dirs`) inside the directory;
- links the distribution's jars into `<directory>/lib`, plus `opt/flink-python`, which a cluster
  running Python jobs needs on its class path (the distribution leaves it out of `lib`);
- starts the JobManager, waits until its REST API answers, then the TaskManagers, each under a
  keeper (harness/flink_keeper.py) that starts it again when it dies; waits until the REST API's
  `/overview` lists N TaskManagers and records the cluster in `<directory>/cluster.json`
  (engine "flink", master URL `flink://HOST:RESTPORT`).

Losing a TaskManager. Flink restores the job from its latest completed checkpoint by itself, once
it has the slots for it. Standalone Flink has no supervisor to bring a dead TaskManager back, so
the keeper does (1 s after its death; the new TaskManager registered 6 s after the kill on the
2-core machine, 13 s with other engine runs loading it).
The cluster's restart strategy (`fixed-delay`, RESTART_ATTEMPTS attempts, RESTART_DELAY apart)
outlasts that, and heartbeats every HEARTBEAT_INTERVAL let the JobManager tell a dead TaskManager
within two of them (`heartbeat.rpc-failure-threshold`), not Flink's default 50 s timeout. The
alternative, each TaskManager with as many slots as the job's parallelism, leaves the cluster one
TaskManager short after a kill and makes the default parallelism (every slot) twice what the
machine can run; specs/ENGINE_RUN.md ("Clusters") has what was measured. The keeper also brings
back a TaskManager that Flink itself ends: cancelling a job (every run's end) sometimes fails one
fatally (a reference-count error in Beam's bundle factory, exit code 1).

`cluster_status` and `stop_cluster` (harness/cluster.py) hand a Flink cluster.json to
`flink_cluster_status` and `stop_flink_cluster` here. Logs: `jobmanager.log` and
`taskmanager-N.log` (each daemon's console, and its keeper's notes) and Flink's own log files in
`log/`; nothing of the cluster is written outside `directory`.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import psutil

from harness.cluster import (CLUSTER_TOKEN_ENV, _free_ports, _java_env, _launch, _ours, _processes, _refuse_running,
                             _shut_down, _wait)
from harness.cluster_auth import CREDENTIALS_DIR, is_loopback, make_flink_credentials, read_flink_ssl, write_private
from harness.cluster_spec import STATE_FILE, ClusterInfo, ClusterSpec
from harness.fault_injection import TASKMANAGER_JVM, taskmanager_jvms
from kit.atomic import atomic_write, check_parent
from kit.errors import CepkitError
from kit.jsonfile import dumps_json
from kit.tls import rest_base, urlopen

JOBMANAGER_CLASS = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
TASKMANAGER_CLASS = TASKMANAGER_JVM
KEEPER = Path(__file__).with_name("flink_keeper.py")
START_TIMEOUT_S = 150.0
JOBMANAGER_MEMORY = "1024m"
RESTART_ATTEMPTS = 10
RESTART_DELAY = "2 s"
HEARTBEAT_INTERVAL = "2 s"
HEARTBEAT_TIMEOUT = "20 s"
# The distribution's configuration files besides config.yaml (log4j and logback settings, the
# console one for daemons started in the foreground), copied into the cluster's conf/.
_CONF_FILES = ("*.properties", "*.xml")
# Read in the Flink environment's interpreter: where pyflink is and its config.yaml, flattened
# (PyFlink itself reads it with ruamel.yaml).
_DISTRIBUTION = r"""
import importlib.util, json, os
home = list(importlib.util.find_spec("pyflink").submodule_search_locations)[0]
path = os.path.join(home, "conf", "config.yaml")
def flat(doc, prefix=""):
    out = {}
    for key, value in (doc or {}).items():
        name = f"{prefix}.{key}" if prefix else str(key)
        out.update(flat(value, name) if isinstance(value, dict) else {name: value})
    return out
conf = {}
if os.path.isfile(path):
    from ruamel.yaml import YAML
    with open(path) as f:
        conf = flat(YAML(typ="safe").load(f))
print(json.dumps({"home": home, "config": conf}, default=str))
"""


@functools.lru_cache(maxsize=None)
def flink_home(python: str) -> Path:
    """The Flink distribution PyFlink ships in `python`'s environment (the `pyflink` package
    directory, with bin/, lib/, opt/, conf/)."""
    found = sorted(glob.glob(str(Path(python).parent.parent / "lib" / "python3*" / "site-packages" / "pyflink")))
    if found and (Path(found[-1]) / "bin" / "flink").is_file():
        return Path(found[-1])
    return Path(distribution(python)[0])


@functools.lru_cache(maxsize=None)
def distribution(python: str) -> tuple[str, dict]:
    """(the pyflink directory, its config.yaml's settings flattened) of `python`'s environment."""
    try:
        done = subprocess.run([python, "-I", "-c", _DISTRIBUTION], capture_output=True, text=True, timeout=120)
        doc = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        raise CepkitError(f"cannot read the Flink distribution of {python}: {e}") from None
    if not isinstance(doc, dict):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CepkitError(f"cannot read the Flink distribution of {python}: {last}")
    return doc["home"], doc["config"]


def cluster_settings(spec: ClusterSpec, directory: Path, rest_port: int, rpc_port: int, python: str) -> dict:
    """The cluster's own Flink settings (what config.yaml sets over the distribution's)."""
    host = spec.host
    return {
        "jobmanager.bind-host": host, "jobmanager.rpc.address": host, "jobmanager.rpc.port": rpc_port,
        "jobmanager.memory.process.size": JOBMANAGER_MEMORY,
        "taskmanager.bind-host": host, "taskmanager.host": host,
        "taskmanager.numberOfTaskSlots": spec.cores_per_worker,
        "taskmanager.memory.process.size": f"{spec.worker_memory_mib}m",
        "rest.address": host, "rest.bind-address": host, "rest.port": rest_port,
        # No jar upload and run through the web UI (jobs are submitted by the client, POST /jobs).
        "web.submit.enable": False,
        "parallelism.default": spec.workers * spec.cores_per_worker,
        "cluster.evenly-spread-out-slots": True,
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": RESTART_ATTEMPTS,
        "restart-strategy.fixed-delay.delay": RESTART_DELAY,
        "heartbeat.interval": HEARTBEAT_INTERVAL, "heartbeat.timeout": HEARTBEAT_TIMEOUT,
        "io.tmp.dirs": str(directory / "tmp"),
        # The REST API's metrics refreshed every second (benchmarks/flink_breakdown.py samples them).
        "metrics.fetcher.update-interval": "1 s",
        # The Python workers' interpreter: the Flink environment's (a job may set its own).
        "python.executable": python, "python.client.executable": python,
    }


def _yaml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value))
    return json.dumps(str(value))        # a JSON string is a YAML double-quoted scalar


def render_config(base: dict, own: dict) -> str:
    """config.yaml: one flattened `key: value` line per setting, the distribution's (`base`) first,
    the cluster's own (`own`) over them."""
    lines = ["# A Flink standalone cluster of cepkit (harness/flink_cluster.py): the distribution's settings,",
             "# then the cluster's own. Written by `cepkit cluster start --engine flink`."]
    lines += [f"{key}: {_yaml_value(value)}" for key, value in {**base, **own}.items()]
    return "\n".join(lines) + "\n"


def overview(rest_url: str, timeout_s: float = 3.0, credentials: Path | None = None) -> dict | None:
    """The JobManager's `/overview` (taskmanagers, slots-total, slots-available, jobs-running,
    flink-version), or None when it does not answer (`credentials`: a cluster's client
    certificate, harness/cluster_auth.py)."""
    return _get(rest_url, "/overview", timeout_s, credentials)


def credentials_of(info: ClusterInfo) -> Path | None:
    """The client credentials of a cluster that requires mutual TLS (its REST URL is https)."""
    return info.directory / CREDENTIALS_DIR if info.webui_url.startswith("https:") else None


def _get(rest_url: str, path: str, timeout_s: float = 3.0, credentials: Path | None = None) -> dict | None:
    try:
        with urlopen(f"{rest_url}{path}", timeout=timeout_s,
                     directory=str(credentials) if credentials else None) as r:
            doc = json.loads(r.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _link_jars(home: Path, lib: Path) -> None:
    """lib/: a link to each of the distribution's jars, and to opt/flink-python (the Python
    operators' classes, which a job's Python functions need on the TaskManagers)."""
    lib.mkdir(parents=True, exist_ok=True)
    jars = sorted(home.glob("lib/*.jar")) + sorted(home.glob("opt/flink-python*.jar"))
    if not any(j.name.startswith("flink-dist") for j in jars) or not any(j.name.startswith("flink-python")
                                                                        for j in jars):
        raise CepkitError(f"{home}: not a Flink distribution with lib/flink-dist*.jar and opt/flink-python*.jar")
    for old in lib.iterdir():
        if old.is_symlink():
            old.unlink()
    for jar in jars:
        (lib / jar.name).symlink_to(jar)


def _write_conf(home: Path, conf: Path, text: str, private: bool = False) -> None:
    """conf/: the distribution's log settings and `text` as config.yaml (`private`: it holds the
    keystore's password, so it is created 0600)."""
    conf.mkdir(parents=True, exist_ok=True)
    for pattern in _CONF_FILES:
        for src in sorted((home / "conf").glob(pattern)):
            atomic_write(conf / src.name, src.read_bytes(), overwrite=True)
    if private:
        (conf / "config.yaml").unlink(missing_ok=True)
        write_private(conf / "config.yaml", text)
    else:
        atomic_write(conf / "config.yaml", text, overwrite=True)


def _daemon_env(directory: Path) -> dict[str, str]:
    """The daemons' environment: this cluster's conf, lib, logs and pid files; no PYTHONPATH (a
    job's Python code reaches the TaskManagers through the job, `python.files`, as on any cluster)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"FLINK_CONF_DIR": str(directory / "conf"), "FLINK_LIB_DIR": str(directory / "lib"),
                "FLINK_LOG_DIR": str(directory / "log"), "FLINK_PID_DIR": str(directory / "log")})
    return _java_env(env)


def _registered(log: Path) -> bool:
    try:
        return "Successful registration at resource manager" in log.read_text(errors="replace")
    except OSError:
        return False


def _all_registered(doc: dict | None, workers: int) -> bool:
    """Every TaskManager registered with its slots: the JobManager's overview counts a TaskManager
    a moment before its slots (CI saw 2 TaskManagers and 1 slot), and a run started then would get
    half the cluster."""
    return bool(doc) and doc.get("taskmanagers", 0) >= workers and doc.get("slots-total", 0) >= workers


def start_flink_cluster(spec: ClusterSpec, *, timeout_s: float = START_TIMEOUT_S) -> ClusterInfo:
    """Start the JobManager, then the TaskManagers; return once every TaskManager is registered."""
    from harness.environments import engine_python

    directory = spec.directory.absolute()
    check_parent(directory / STATE_FILE)
    _refuse_running(directory)
    python = engine_python("flink")
    home_text, base = distribution(python)
    home = Path(home_text)
    directory.mkdir(parents=True, exist_ok=True)
    for sub in ("log", "tmp"):
        (directory / sub).mkdir(exist_ok=True)
    chosen = iter(_free_ports(spec.host, 2))
    rest_port = spec.master_port or next(chosen)
    rpc_port = next(p for p in chosen if p != rest_port)
    own = cluster_settings(spec, directory, rest_port, rpc_port, python)
    creds = None
    if not is_loopback(spec.host):
        # Beyond loopback: internal and REST SSL with mutual authentication (harness/cluster_auth.py).
        creds = make_flink_credentials(directory, [spec.host])
        own.update(read_flink_ssl(creds))
    _write_conf(home, directory / "conf", render_config(base, own), private=creds is not None)
    _link_jars(home, directory / "lib")
    token = secrets.token_hex(16)
    env = {**_daemon_env(directory), CLUSTER_TOKEN_ENV: token}
    master_url, rest_url = f"flink://{spec.host}:{rest_port}", rest_base(spec.host, rest_port, creds and str(creds))
    jm_log = directory / "jobmanager.log"
    tm_logs = [directory / f"taskmanager-{i}.log" for i in range(1, spec.workers + 1)]
    started_ms = int(time.time() * 1000)
    deadline = time.monotonic() + timeout_s
    pids: dict[int, Path] = {}
    jm_pid = None
    try:
        jm_pid = _launch([str(home / "bin" / "jobmanager.sh"), "start-foreground"], env, jm_log, directory)
        pids[jm_pid] = jm_log
        # TaskManagers wait for the JobManager: one that finds none backs off, up to 30 s.
        _wait(pids, lambda: overview(rest_url, credentials=creds) is not None, "Flink JobManager", lambda: jm_log,
              deadline)
        for i, log in enumerate(tm_logs, start=1):
            pids[_launch([sys.executable, "-I", str(KEEPER), str(directory), f"taskmanager-{i}", "--",
                          str(home / "bin" / "taskmanager.sh"), "start-foreground"], env, log, directory)] = log
        _wait(pids, lambda: _all_registered(overview(rest_url, credentials=creds), spec.workers),
              "Flink TaskManagers", lambda: next((log for log in tm_logs if not _registered(log)), jm_log), deadline)
        info = ClusterInfo(directory, master_url, rest_url, spec.host, jm_pid, tuple(pids)[1:], jm_log, tm_logs,
                           started_ms, "flink", token)
        atomic_write(directory / STATE_FILE, dumps_json(info.to_dict()), overwrite=True)
    except BaseException:
        keepers = _processes([pid for pid in pids if pid != jm_pid])
        _shut_down(keepers + taskmanager_jvms(master_url), _processes([jm_pid] if jm_pid else []), token)
        raise
    return info


def live_flink(info: ClusterInfo) -> tuple[psutil.Process | None, list[psutil.Process | None]]:
    """The recorded JobManager and TaskManager keepers that still run, each only if its command line
    still names this cluster (a reused pid is never signalled)."""
    directory = str(info.directory.absolute())
    master = _ours(info.master_pid, JOBMANAGER_CLASS, str(Path(directory) / "conf"))
    return master, [_ours(pid, str(KEEPER), directory) for pid in info.worker_pids]


def _restarts(log: Path) -> int:
    """How often a TaskManager's keeper started it again (its notes in the TaskManager's log)."""
    try:
        lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    except OSError:
        return 0
    return sum(1 for line in lines if "cepkit flink_keeper: " in line and "starting it again in" in line)


def _keeper_child(keeper: psutil.Process | None) -> psutil.Process | None:
    """The TaskManager JVM a keeper runs now."""
    if keeper is None:
        return None
    with contextlib.suppress(psutil.Error):
        for child in keeper.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if TASKMANAGER_CLASS in child.cmdline():
                    return child
    return None


def stop_flink_cluster(info: ClusterInfo) -> str:
    """Stop the JobManager, the keepers and their TaskManagers (and the TaskManagers' Python
    workers), any TaskManager of this cluster a keeper no longer holds, and remove cluster.json."""
    master, keepers = live_flink(info)
    workers = [k for k in keepers if k]
    workers += [p for p in taskmanager_jvms(info.master_url) if p not in workers]
    count = _shut_down(workers, [master] if master else [], info.token)
    (info.directory / STATE_FILE).unlink(missing_ok=True)
    if not count:
        return f"the cluster {info.master_url} was not running; removed its {STATE_FILE}"
    return f"stopped the cluster {info.master_url} ({count} processes)"


def flink_cluster_status(info: ClusterInfo) -> dict:
    """`state` ("running", "degraded" or "not running"), the recorded processes (each TaskManager's
    keeper, the JVM it runs now and how often it started one again) and what the JobManager reports
    (TaskManagers, slots, jobs)."""
    master, keepers = live_flink(info)
    jvms = [_keeper_child(k) for k in keepers]
    doc = overview(info.webui_url, credentials=credentials_of(info)) if master else None
    registered = int((doc or {}).get("taskmanagers", 0))
    if not master and not any(keepers):
        state, detail = "not running", f"its processes have exited ({STATE_FILE} is stale)"
    elif all(keepers) and all(jvms) and registered == len(keepers) and _all_registered(doc, len(keepers)):
        state, detail = "running", ""
    else:
        state = "degraded"
        detail = f"{registered} of {len(keepers)} TaskManagers registered" if doc else "no answer from the JobManager"
    roles = ["jobmanager"] + [f"taskmanager-{i}" for i in range(1, len(keepers) + 1)]
    out = {"state": state, "engine": "flink", "directory": str(info.directory), "detail": detail,
           "master_url": info.master_url, "webui_url": info.webui_url, "started_ms": info.started_ms,
           "jobmanager": None,
           "processes": [{"role": r, "pid": pid, "alive": p is not None, "log": str(log),
                          "jvm_pid": None if i == 0 or jvms[i - 1] is None else jvms[i - 1].pid,
                          "restarts": 0 if i == 0 else _restarts(log)}
                         for i, (r, pid, p, log) in enumerate(zip(roles, info.pids, [master, *keepers],
                                                                  [info.master_log, *info.worker_logs]))]}
    if doc is not None:
        jobs = (_get(info.webui_url, "/jobs/overview", credentials=credentials_of(info)) or {}).get("jobs", [])
        out["jobmanager"] = {
            "taskmanagers": registered, "slots_total": doc.get("slots-total"),
            "slots_available": doc.get("slots-available"), "flink_version": doc.get("flink-version"),
            "jobs": [{"id": j.get("jid"), "name": j.get("name"), "state": j.get("state")}
                     for j in jobs if isinstance(j, dict) and j.get("state") not in ("FINISHED", "CANCELED", "FAILED")]}
    return out
