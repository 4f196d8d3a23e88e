"""The Flink runner: the program under the Flink environment's interpreter (`.venv-flink`).

With `local[N]` the program starts PyFlink's gateway JVM with Flink's local mini-cluster inside it
and Flink's Python workers as its children: the program's process tree is the whole engine. With
`flink://HOST:PORT` (a standalone cluster, `cepkit cluster start --engine flink`) the program
submits its job to that cluster's JobManager; the cluster's TaskManager JVMs (and their Python
workers) are sampled with it, as a Spark cluster's executors are.

By hand: engine/flink-run.sh. For a local master, the same command with its environment; for a
cluster, the distribution's `flink run -m HOST:PORT -py program.py -pyfs runtime.zip` with the
program's own arguments (the client runs the program under the same interpreter, which submits to
the cluster its `--master` names).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

from harness.flink_restore import newest_checkpoint
from harness.health import dir_usage
from harness.launch import by_hand_script, scratch_dir, secret_file
from harness.run_spec import EngineRunSpec
from harness.runners import Launch
from kit.errors import CepkitError
from kit.faults import FLINK_MASTER_PREFIX
from kit.tls import urlopen

SCRIPT = "flink-run.sh"
_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)\])?")
_CLUSTER = re.compile(re.escape(FLINK_MASTER_PREFIX) + r"(?P<host>[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})")


def cluster_address(master: str) -> tuple[str, int] | None:
    """(HOST, PORT) of a `flink://HOST:PORT` master, None for a local one; a one-line CepkitError
    for anything else."""
    if _LOCAL.fullmatch(master):
        return None
    m = _CLUSTER.fullmatch(master)
    if m is None or not 0 < int(m["port"]) < 65536:
        raise CepkitError(f"run.master: the Flink engine runs Flink's local mini-cluster (local[N]) or a Flink "
                          f"standalone cluster ({FLINK_MASTER_PREFIX}HOST:PORT, its JobManager's REST address), "
                          f"got {master!r}")
    return m["host"], int(m["port"])


def flink_run_command(spec: EngineRunSpec, program_args: list[str], address: tuple[str, int]) -> list[str]:
    """The program through the distribution's `flink run`: the client runs it under the Flink
    environment's interpreter with the runtime zip on its path (`-pyfs`); the program's own
    arguments follow unchanged (its `--master` and `--py-files` send the job and the zip on)."""
    from harness.flink_cluster import flink_home

    py_files = program_args[program_args.index("--py-files") + 1] if "--py-files" in program_args else None
    cmd = [str(flink_home(spec.python) / "bin" / "flink"), "run", "-m", f"{address[0]}:{address[1]}",
           "-pyclientexec", spec.python, "-pyexec", spec.worker_python or spec.python]
    if py_files is not None:
        cmd += ["-pyfs", py_files]
    return cmd + ["-py", str(spec.program.resolve()), *program_args]


def launch(spec: EngineRunSpec, args: list[str], env: dict[str, str]) -> Launch:
    from harness.flink_jar import runtime_jar_env

    address = cluster_address(spec.master)
    # The JVM feed and sink of the SQL queries (harness/flink_jar.py): the program adds the jar to its
    # job, which ships it to a cluster's TaskManagers; the by-hand script names it too.
    jar, used = runtime_jar_env({}, spec.python)
    env = {**env, **jar}
    own = [*args, "--master", spec.master]
    if spec.worker_python:                       # the TaskManagers' Python workers' interpreter
        own += ["--conf", f"python.executable={spec.worker_python}"]
    for key, value in spec.spark_conf:
        if not key.startswith("spark."):         # the run's Spark settings do not apply to Flink
            own += ["--conf", f"{key}={value}"]
    command = [spec.python, str(spec.program.resolve()), *own]
    # Flink's own log (the gateway JVM: the mini-cluster, or the cluster client) beside the
    # program's, per run, instead of one file inside the environment's pyflink package for every run.
    logs = {"FLINK_LOG_DIR": str((spec.run_dir / "logs").absolute())}
    # The gateway JVM's temporary files (Flink's io.tmp.dirs defaults to them: the mini-cluster's,
    # the extracted planner and RPC jars) in the run's scratch directory, when the harness starts
    # the program (a by-hand script may run elsewhere); PyFlink's gateway launcher puts JVM_ARGS on
    # the java command line (the user's own JVM_ARGS after ours: one of theirs wins). TMPDIR: the
    # Python processes' too.
    scratch = scratch_dir(spec)
    jvm = {} if scratch is None else {
        "JVM_ARGS": " ".join(filter(None, [f"-Djava.io.tmpdir={scratch}", os.environ.get("JVM_ARGS")])),
        "TMPDIR": str(scratch)}
    if address is None:
        script = by_hand_script(["# This run's Flink program, by hand (specs/ENGINES.md). Run it while a harness feeds and",
                          "# collects on the ports below, e.g. `cepkit pairs --engine flink --launch external`."],
                         env, command, secret_file(spec))
    else:
        # The runtime reaches the client through -pyfs and the TaskManagers through python.files,
        # so no PYTHONPATH is set (as in spark-submit.sh).
        exports = {**{k: v for k, v in env.items() if k != "PYTHONPATH"}, **logs}
        script = by_hand_script(["# This run's Flink program through the Flink distribution's `flink run`, on the cluster",
                          f"# {spec.master} (specs/ENGINE_RUN.md, \"Clusters\"). Run it while a harness feeds and",
                          "# collects on the ports below, e.g. `cepkit pairs --engine flink --launch external`."],
                         exports, flink_run_command(spec, own, address), secret_file(spec))
    return Launch(command, SCRIPT, script, {**logs, **jvm, **jar}, {"runtime_jar": used} if used else {}, scratch)


def sampled_extra(spec: EngineRunSpec, started: dict) -> list[int]:
    """A Flink cluster's TaskManager JVMs on this machine (their Python workers are their children),
    sampled with the program."""
    from harness.fault_injection import taskmanager_jvms

    return [p.pid for p in taskmanager_jvms(spec.master)] if spec.master.startswith(FLINK_MASTER_PREFIX) else []


# The program's JVM: PyFlink's gateway, which holds the local mini-cluster (a cluster's client).
ENGINE_JVM = "org.apache.flink.client.python.PythonGatewayServer"


def replays_outputs(spec: EngineRunSpec) -> bool:
    """A restored job sends again the answers of the events after its checkpoint: the sink filters them."""
    return True


def restart_args(checkpoint: str, attempt: int, heard_checkpoint: dict | None) -> tuple[list[str], str | None]:
    """`--attempt N --restore CHECKPOINT` (harness/flink_restore.py) and what is restored, in words."""
    from harness.flink_restore import local_dir, newest_checkpoint

    path, _ = newest_checkpoint(local_dir(checkpoint), heard_checkpoint)
    if path is None:
        return ["--attempt", str(attempt)], None
    return ["--attempt", str(attempt), "--restore", str(path)], str(path)


def prepare_restart(spec: EngineRunSpec, started: dict) -> str | None:
    """Before a restart on a Flink cluster: the dead program's job runs on there (only the client
    died), keeps sending answers and checkpointing (dropping the checkpoint the restart would
    restore): cancel it through the JobManager's REST API and wait until it is over (its newest
    checkpoint is kept: RETAIN_ON_CANCELLATION). Returns what was done, in words."""
    import json
    import time
    import urllib.request

    rest, job = started.get("rest_url"), started.get("query_id")
    if not spec.master.startswith(FLINK_MASTER_PREFIX) or not rest or not job:
        return None
    creds = spec.cluster_credentials or None
    try:
        urlopen(urllib.request.Request(f"{rest}/jobs/{job}?mode=cancel", method="PATCH"), timeout=5, directory=creds)
    except OSError as e:
        return f"could not cancel the dead program's job {job}: {e}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urlopen(f"{rest}/jobs/{job}", timeout=5, directory=creds) as r:
                state = json.loads(r.read().decode("utf-8")).get("state")
        except (OSError, ValueError):
            state = None
        if state in ("CANCELED", "FAILED", "FINISHED"):
            return f"cancelled the dead program's job {job} on the cluster"
        time.sleep(0.2)
    return f"the dead program's job {job} was still running 30 s after its cancel"


def state_gauge(checkpoint: Path | None, heard: Callable[[], dict | None]) -> Callable[[], int | None]:
    """Flink's state on disk (metrics/health.csv `state_bytes`): the newest completed checkpoint
    (`chk-N`) the program reported, else the newest on disk (harness/flink_restore.py), else the
    size the program reported (a checkpoint on storage this machine does not list)."""
    def size() -> int | None:
        event = heard() or {}
        if event.get("path"):
            usage = dir_usage(event["path"])
            if usage:
                return usage[0]
        if checkpoint is not None:
            try:
                newest, _ = newest_checkpoint(checkpoint, None)
            except OSError:             # Flink deleted a checkpoint as we listed them
                newest = None
            usage = dir_usage(newest) if newest is not None else None
            if usage:
                return usage[0]
        reported = event.get("size")
        return reported if isinstance(reported, int) and not isinstance(reported, bool) else None
    return size
