"""What a standalone cluster of this machine is asked to be (`ClusterSpec`) and what a started one is
(`ClusterInfo`, recorded in `<directory>/cluster.json`, kind "cepkit.cluster"): a Spark one (a master
and workers) or a Flink one (a JobManager and TaskManagers), as `engine` says. harness/cluster.py
starts, inspects and stops it (harness/flink_cluster.py the Flink one).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kit.config import memory_mib
from kit.errors import CepkitError, at
from kit.jsonfile import read_document

KIND, SCHEMA_VERSION, STATE_FILE = "cepkit.cluster", 1, "cluster.json"
# The engines a cluster can be started for, and their master URLs' schemes (a cluster.json without
# `engine` is a Spark one: files written before Flink clusters existed).
CLUSTER_ENGINES = ("spark", "flink")
SCHEMES = {"spark": "spark://", "flink": "flink://"}
# A Flink TaskManager cannot start in less (JVM metaspace and overhead, framework and network memory).
FLINK_MIN_MEMORY_MIB = 1024


def _whole(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@dataclass(frozen=True)
class ClusterSpec:
    """What to start. Ports 0: free ports picked at start; memory: a size such as 2g or 512m.
    Spark: a master (master_port its RPC port, webui_port its web UI) and `workers` workers of
    `cores_per_worker` cores and `memory_per_worker` each. Flink: a JobManager (master_port its REST
    port, which serves the web UI too: webui_port stays 0) and `workers` TaskManagers of
    `cores_per_worker` task slots and `memory_per_worker` process memory each."""

    directory: Path
    host: str = "127.0.0.1"
    master_port: int = 0
    webui_port: int = 0
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "2g"
    engine: str = "spark"

    def __post_init__(self) -> None:
        def bad(field: str, message: str) -> CepkitError:
            return CepkitError(f"cluster spec: {field}: {message}")

        if not isinstance(self.directory, (str, os.PathLike)) or not str(self.directory):
            raise bad("directory", f"must be a path, got {self.directory!r}")
        object.__setattr__(self, "directory", Path(self.directory))
        # One interface only: never the wildcard (IPv6 would need brackets in spark:// URLs).
        if not isinstance(self.host, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", self.host) or \
                self.host in ("0.0.0.0", "0"):
            raise bad("host", f"must be one interface's IPv4 address or host name, got {self.host!r}")
        for field in ("master_port", "webui_port"):
            if not _whole(getattr(self, field), 0, 65535):
                raise bad(field, f"must be a port 1-65535, or 0 for a free one, got {getattr(self, field)!r}")
        if self.master_port and self.master_port == self.webui_port:
            raise bad("webui_port", f"must differ from master_port ({self.master_port})")
        for field, high in (("workers", 64), ("cores_per_worker", 1024)):
            if not _whole(getattr(self, field), 1, high):
                raise bad(field, f"must be a whole number from 1 to {high}, got {getattr(self, field)!r}")
        mib = memory_mib(self.memory_per_worker)
        if mib is None or mib < 1:
            raise bad("memory_per_worker", f"must be a size such as 2g or 512m (at least 1m), "
                                           f"got {self.memory_per_worker!r}")
        if self.engine not in CLUSTER_ENGINES:
            raise bad("engine", f"must be one of {', '.join(CLUSTER_ENGINES)}, got {self.engine!r}")
        if self.engine == "flink":
            if mib < FLINK_MIN_MEMORY_MIB:
                raise bad("memory_per_worker", f"a Flink TaskManager needs at least {FLINK_MIN_MEMORY_MIB}m, "
                                               f"got {self.memory_per_worker!r}")
            if self.webui_port:
                raise bad("webui_port", "a Flink JobManager serves its web UI on its REST port (master_port): "
                                        f"leave it 0, got {self.webui_port!r}")

    @property
    def worker_memory_mib(self) -> int:
        return memory_mib(self.memory_per_worker)


@dataclass(frozen=True)
class ClusterInfo:
    """A started cluster, as recorded in `<directory>/cluster.json`."""

    directory: Path
    master_url: str
    webui_url: str
    host: str
    master_pid: int
    worker_pids: tuple[int, ...]
    master_log: Path
    worker_logs: tuple[Path, ...]
    started_ms: int
    engine: str = "spark"
    # A random mark put in the environment of every daemon the kit starts (CLUSTER_TOKEN_ENV), which
    # the processes they start inherit: `stop` sweeps up the processes that carry it, and only
    # those, beside the recorded daemons (None: a cluster.json of an older kit, no sweep).
    token: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", Path(self.directory))
        object.__setattr__(self, "master_log", Path(self.master_log))
        object.__setattr__(self, "worker_pids", tuple(self.worker_pids))
        object.__setattr__(self, "worker_logs", tuple(Path(p) for p in self.worker_logs))
        if self.engine not in CLUSTER_ENGINES:
            raise CepkitError(f"cluster info: engine: not valid: {self.engine!r}")
        scheme = re.escape(SCHEMES[self.engine])
        for field, ok in (("master_url", re.fullmatch(scheme + r"[^:/]+:[0-9]+", str(self.master_url))),
                          ("webui_url", re.fullmatch(r"https?://[^:/]+:[0-9]+", str(self.webui_url))),
                          ("pids", self.worker_pids and all(_whole(p, 1, 2**31) for p in self.pids)),
                          ("worker_logs", len(self.worker_logs) == len(self.worker_pids)),
                          ("started_ms", _whole(self.started_ms, 0, 2**63)),
                          ("token", self.token is None or (isinstance(self.token, str)
                                                           and re.fullmatch(r"[0-9a-f]{32}", self.token)))):
            if not ok:
                raise CepkitError(f"cluster info: {field}: not valid: {getattr(self, field, None)!r}")

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.master_pid, *self.worker_pids)

    @property
    def master_port(self) -> int:
        return int(self.master_url.rsplit(":", 1)[1])

    def to_dict(self) -> dict:
        return {"kind": KIND, "schema_version": SCHEMA_VERSION, "engine": self.engine, "master_url": self.master_url,
                "webui_url": self.webui_url, "host": self.host,
                "pids": {"master": self.master_pid, "workers": list(self.worker_pids)},
                "logs": {"master": str(self.master_log), "workers": [str(p) for p in self.worker_logs]},
                "started_ms": self.started_ms, **({"token": self.token} if self.token else {})}

    @classmethod
    def from_dict(cls, doc: dict, directory: Path, source: Path | None = None) -> "ClusterInfo":
        if doc.get("kind") != KIND or doc.get("schema_version") != SCHEMA_VERSION:
            raise at(source, None, f"not a {KIND} file of schema_version {SCHEMA_VERSION}")
        try:
            return cls(directory, doc["master_url"], doc["webui_url"], doc["host"], doc["pids"]["master"],
                       doc["pids"]["workers"], doc["logs"]["master"], doc["logs"]["workers"], doc["started_ms"],
                       doc.get("engine", "spark"), doc.get("token"))
        except (KeyError, TypeError) as e:
            raise at(source, None, f"missing or malformed field {e}") from None
        except CepkitError as e:
            raise at(source, None, str(e)) from None


def read_cluster_info(directory: str | os.PathLike) -> ClusterInfo | None:
    """The cluster recorded in `directory`, or None when there is no cluster.json."""
    path = Path(directory) / STATE_FILE
    if not path.exists():
        return None
    return ClusterInfo.from_dict(read_document(path, KIND, SCHEMA_VERSION, what="a cluster file"), Path(directory), path)
