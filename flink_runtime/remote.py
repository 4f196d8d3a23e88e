"""A Flink standalone cluster as the program's master: `--master flink://HOST:PORT`, the REST
address of its JobManager (what `cepkit cluster start --engine flink` prints).

`remote_master` reads the address; `cluster_slots` asks the JobManager's REST API for the cluster's
task slots (`/overview`, `slots-total`, or the cluster's configured default parallelism when that
is more), the job's parallelism unless the program's `parallelism.default` is set;
`remote_settings` are the Flink settings that send the job there (`execution.target: remote`,
`rest.address`, `rest.port`) and ship the runtime to the TaskManagers' Python workers
(`python.files`: the harness's `--py-files runtime.zip`); `remote_environment` makes the execution
environment that submits to the cluster. PyFlink's own `get_execution_environment` runs a local
mini-cluster whatever the target unless the program was started by `flink run`; a program started
either way submits to the cluster its `--master` names.
"""

from __future__ import annotations

import json
import os

from kit.errors import CepkitError
from kit.tls import credentials_dir, rest_base, urlopen

MASTER_PREFIX = "flink://"      # kit.faults.FLINK_MASTER_PREFIX (flink_runtime may not import kit.faults)


def is_remote(master: str) -> bool:
    return master.startswith(MASTER_PREFIX)


def remote_master(master: str) -> tuple[str, int]:
    """flink://HOST:PORT -> (HOST, PORT); a one-line CepkitError otherwise."""
    host, sep, port = master[len(MASTER_PREFIX):].rpartition(":") if is_remote(master) else ("", "", "")
    if not sep or not host or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CepkitError(f"--master: a Flink cluster is {MASTER_PREFIX}HOST:PORT (its JobManager's REST "
                          f"address), got {master!r}")
    return host, int(port)


def _configured_parallelism(base_url: str) -> int:
    """The JobManager's `parallelism.default` (`/jobmanager/config`, a list of {key, value}); 0
    when it cannot be told."""
    try:
        with urlopen(base_url + "/jobmanager/config", timeout=5.0) as r:
            doc = json.loads(r.read().decode("utf-8"))
        entries = [e for e in doc if isinstance(e, dict)]
        value = next((str(e.get("value")) for e in entries if e.get("key") == "parallelism.default"), "")
    except (OSError, ValueError, TypeError):
        return 0
    return int(value) if value.strip().isdigit() else 0


def cluster_slots(master: str) -> int:
    """Every task slot of the cluster, asked of its JobManager: the slots its TaskManagers offer now
    (`/overview`, `slots-total`), or its configured default parallelism when that is more (a
    cluster of `cepkit cluster start --engine flink` sets it to all its slots: a TaskManager its
    keeper is bringing back is waited for, not run without)."""
    from flink_runtime.rest import RestError, get_json

    host, port = remote_master(master)
    base = rest_base(host, port)
    try:
        slots = get_json(base, "/overview").get("slots-total")
    except RestError as e:
        raise CepkitError(f"--master {master}: no Flink JobManager answers there ({e})") from None
    offered = slots if isinstance(slots, int) and not isinstance(slots, bool) else 0
    best = max(offered, _configured_parallelism(base))
    if best < 1:
        raise CepkitError(f"--master {master}: the Flink cluster has no task slots (slots-total {slots!r}): "
                          f"are its TaskManagers up?")
    return best


def parallelism_setting(settings: dict) -> int | None:
    """`parallelism.default` of the program's settings, when given; a one-line CepkitError when
    it is not a whole number >= 1."""
    value = settings.get("parallelism.default")
    if value is None:
        return None
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise CepkitError(f"--conf parallelism.default: must be a whole number >= 1, got {value!r}")
    return int(text)


def remote_settings(master: str, py_files: str | None) -> dict[str, str]:
    """The settings that submit the job to the cluster and ship the runtime zip to its Python workers."""
    host, port = remote_master(master)
    out = {"execution.target": "remote", "rest.address": host, "rest.port": str(port)}
    if credentials_dir():
        # A cluster that requires mutual TLS: its SSL settings (the keystore's password among them)
        # from the 0600 file, into the client's configuration in this process: never a command line.
        out.update(_ssl_settings(credentials_dir()))
    if py_files:
        out["python.files"] = os.path.abspath(py_files)
    return out


def _ssl_settings(directory: str) -> dict[str, str]:
    """flink-ssl.yaml's settings (harness/cluster_auth.py writes it; flat `key: value` lines)."""
    out = {}
    try:
        text = open(os.path.join(directory, "flink-ssl.yaml"), encoding="utf-8").read()
    except OSError as e:
        raise CepkitError(f"{os.path.join(directory, 'flink-ssl.yaml')}: {e.strerror or e}") from None
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def remote_environment(configuration):
    """A StreamExecutionEnvironment whose executor follows `configuration`'s `execution.target`
    (Java's constructor; `getExecutionEnvironment` would make a local one)."""
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    j_env_class = get_gateway().jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment
    return StreamExecutionEnvironment(j_env_class(configuration._j_configuration))
