"""What one engine run is asked to do (`EngineRunSpec`), what the monitor sees each second
(`RunSnapshot`) and how the run ended (`EngineRunResult`): the typed interface of
harness/engine_run.py, written to run.json (specs/ENGINE_RUN.md).
"""

from __future__ import annotations

import dataclasses
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from harness.config import DriverConfig
from kit.config import CONNECTORS, LAUNCHES, TRIGGERS
from kit.engines import engine_name
from kit.errors import CepkitError
from kit.faults import Fault, check_faults
from kit.outputlog import FORMATS
from kit.records import RecordSchema

STATUSES = ("completed", "unsustainable", "failed")


def _bad(name: str, message: str) -> CepkitError:
    return CepkitError(f"engine run: {name}: {message}")


@dataclass(frozen=True)
class EngineRunSpec:
    """One run of one engine program. `driver.hold` is forced on: the driver begins releasing
    once the program's query is up; and the driver keeps unread events up to twice q^b. `output_schemas` lists the output streams the run must
    deliver (an empty one still gets a file); values are pyarrow schemas or kit.records schemas.
    `backlog_limit_events` is q^b: the run stops as "unsustainable" once the driver's backlog has
    stayed above it for `backlog_grace_s`."""

    program: Path
    run_dir: Path
    driver: DriverConfig
    engine: str = "spark"                      # kit.engines: which runner starts the program
    master: str = "local[*]"
    spark_conf: tuple[tuple[str, str], ...] = ()
    shuffle_partitions: int = 2
    trigger_ms: int = 0
    trigger: str = "micro-batch"               # or "realtime": Spark's real-time mode (kit.config.TRIGGERS)
    realtime_batch_ms: int = 5000              # real-time mode: each batch's length
    connectors: str = "jvm"                    # or "python": the kit's Python source and sink (kit.config.CONNECTORS)
    source_partitions: int = 0          # 0: the program's choice (no --source-partitions)
    max_rows_per_batch: int = 0         # Spark micro-batches: most events per batch (0: no cap)
    output_format: str = "parquet"
    output_schemas: Mapping[str, pa.Schema] | None = None
    roll_rows: int = 1_000_000
    backlog_limit_events: int | None = None
    backlog_grace_s: float = 5.0
    startup_timeout_s: float = 180.0
    drain_timeout_s: float = 120.0
    python: str = sys.executable
    env: tuple[tuple[str, str], ...] = ()      # extra environment of the program (recorded, in the scripts)
    # Extra environment that holds a secret (J3's CEPKIT_PG_DSN with its password): the program's
    # environment only; run.json and spec.json list the names, never the values; not in the scripts.
    secret_env: tuple[tuple[str, str], ...] = ()
    jvm_class_archive: bool = True             # map harness/jvm_archive.py's archive when it exists
    quiet_local_fs: bool = True                # harness/local_fs.py's file system when its jar exists
    # The top-level packages the program imports (the engine's runtime, kit.engines): found where
    # this interpreter finds them and put on the program's PYTHONPATH.
    runtime_packages: tuple[str, ...] = ()
    # The feed and the sink listen on `driver.host`; the program reaches them at `advertised_host`
    # (None: the bind address, or this machine's name when binding every interface).
    advertised_host: str | None = None
    checkpoint_url: str = ""                   # "": in the run directory (launch.checkpoint_location)
    launch: str = "harness"                    # "external": you start engine/spark-submit.sh
    faults: tuple[Fault, ...] = ()             # kit/faults.py, in time order
    max_restarts: int = 3                      # restarts of a dead program before the run fails
    # The interpreter of the engine's Python workers on a cluster's hosts (None: `python`).
    worker_python: str | None = None
    fault_command: tuple[str, ...] = ()        # strikes a worker host (kit.faults.HOST_FAULTS)
    # A cluster's client credentials (harness/cluster_auth.py; "": none): the path only, never its content.
    cluster_credentials: str = ""

    @property
    def advertised(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return socket.getfqdn() if self.driver.host in ("0.0.0.0", "::") else self.driver.host

    def __post_init__(self) -> None:
        object.__setattr__(self, "program", Path(self.program))
        object.__setattr__(self, "run_dir", Path(self.run_dir))
        try:
            object.__setattr__(self, "engine", engine_name(self.engine))
        except CepkitError as e:
            raise _bad("engine", str(e)) from None
        if not isinstance(self.driver, DriverConfig):
            raise _bad("driver", f"must be a DriverConfig, got {type(self.driver).__name__}")
        conf = self.spark_conf.items() if isinstance(self.spark_conf, Mapping) else self.spark_conf
        pairs = tuple((str(k), str(v)) for k, v in conf)
        object.__setattr__(self, "spark_conf", pairs)
        if self.output_format not in FORMATS:
            raise _bad("output_format", f"must be one of {', '.join(FORMATS)}, got {self.output_format!r}")
        if self.output_schemas is not None:
            schemas = {}
            for name, schema in dict(self.output_schemas).items():
                if isinstance(schema, RecordSchema):
                    schema = schema.arrow_schema()
                if not isinstance(schema, pa.Schema):
                    raise _bad(f"output_schemas.{name}", f"must be a pyarrow or kit.records schema, got {schema!r}")
                schemas[name] = schema
            object.__setattr__(self, "output_schemas", schemas)
        if self.trigger not in TRIGGERS:
            raise _bad("trigger", f"must be one of {', '.join(TRIGGERS)}, got {self.trigger!r}")
        if self.connectors not in CONNECTORS:
            raise _bad("connectors", f"must be one of {', '.join(CONNECTORS)}, got {self.connectors!r}")
        if self.trigger == "realtime" and self.engine != "spark":
            raise _bad("trigger", f"\"realtime\" is Spark's real-time mode; engine {self.engine!r} has none")
        for name, low in (("shuffle_partitions", 1), ("trigger_ms", 0), ("source_partitions", 0), ("roll_rows", 1),
                          ("max_rows_per_batch", 0),
                          ("realtime_batch_ms", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise _bad(name, f"must be an integer >= {low}, got {value!r}")
        if self.backlog_limit_events is not None and (isinstance(self.backlog_limit_events, bool) or not isinstance(
                self.backlog_limit_events, int) or self.backlog_limit_events < 0):
            raise _bad("backlog_limit_events", f"must be an integer >= 0 or None, got {self.backlog_limit_events!r}")
        # Events the engine has not read stay in the driver up to twice q^b: a run that far behind
        # ends as unsustainable, not on a read of an evicted offset. Kept in the spec, so that
        # run.json shows the driver settings actually used.
        keep = max(self.driver.keep_unread_events, 2 * (self.backlog_limit_events or 0))
        object.__setattr__(self, "driver", dataclasses.replace(self.driver, hold=True, keep_unread_events=keep))
        for name in ("backlog_grace_s", "startup_timeout_s", "drain_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise _bad(name, f"must be a number >= 0, got {value!r}")
        if not self.master:
            raise _bad("master", "must not be empty")
        if self.launch not in LAUNCHES:
            raise _bad("launch", f"must be one of {', '.join(LAUNCHES)}, got {self.launch!r}")
        faults = tuple(sorted(self.faults, key=lambda f: f.at_s))
        if not all(isinstance(f, Fault) for f in faults):
            raise _bad("faults", "must be kit.faults.Fault values")
        try:
            check_faults(faults, self.master, self.launch, self.fault_command)
        except CepkitError as e:
            raise _bad("faults", str(e)) from None
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise _bad("max_restarts", f"must be an integer >= 0, got {self.max_restarts!r}")
        object.__setattr__(self, "faults", faults)
        object.__setattr__(self, "fault_command", tuple(str(w) for w in self.fault_command))
        if self.worker_python is not None and not str(self.worker_python):
            raise _bad("worker_python", "must not be empty")
        if self.cluster_credentials:
            from harness.cluster_auth import check_credentials

            object.__setattr__(self, "cluster_credentials", str(check_credentials(self.cluster_credentials,
                                                                                  self.engine)))

    def to_dict(self) -> dict:
        return {"engine": self.engine, "program": str(self.program), "run_dir": str(self.run_dir), "driver": self.driver.to_dict(),
                "master": self.master, "spark_conf": dict(self.spark_conf),
                "shuffle_partitions": self.shuffle_partitions, "trigger_ms": self.trigger_ms,
                "trigger": self.trigger, "realtime_batch_ms": self.realtime_batch_ms, "connectors": self.connectors,
                "source_partitions": self.source_partitions, "max_rows_per_batch": self.max_rows_per_batch,
                "output_format": self.output_format,
                "output_streams": list(self.output_schemas or {}), "roll_rows": self.roll_rows,
                "backlog_limit_events": self.backlog_limit_events, "backlog_grace_s": self.backlog_grace_s,
                "startup_timeout_s": self.startup_timeout_s, "drain_timeout_s": self.drain_timeout_s,
                "python": self.python, "env": dict(self.env), "secret_env": sorted(k for k, _ in self.secret_env), "jvm_class_archive": self.jvm_class_archive,
                "quiet_local_fs": self.quiet_local_fs,
                "runtime_packages": list(self.runtime_packages), "advertised_host": self.advertised,
                "checkpoint_url": self.checkpoint_url, "launch": self.launch,
                "faults": [f.text for f in self.faults], "worker_python": self.worker_python,
                "fault_command": list(self.fault_command),
                "cluster_credentials": self.cluster_credentials}


@dataclass(frozen=True)
class RunSnapshot:
    """What the monitor saw at one tick (passed to `on_progress` once a second)."""

    elapsed_s: float            # since the driver began (negative lead time excluded)
    sim_ms: int                 # simulated ms since the run start (wall ms for rate pacing); < 0 in the lead-in
    released: int
    pulled: int
    backlog: int
    total_events: int
    rate_eps: float             # events released per second over the last tick
    outputs: dict[str, int]     # rows per output stream so far
    latency_p99_ms: int | None  # event-time latency (arrivalTS - inputTS) so far
    cpu_percent: float | None   # the program's process tree, percent of one core
    rss_bytes: int | None


@dataclass(frozen=True)
class EngineRunResult:
    status: str                 # completed | unsustainable | failed
    message: str                # one line
    run_dir: Path
    output_log: Path | None     # run_dir/outputs/output-log.json, when written
    events_total: int | None
    events_released: int | None
    events_pulled: int | None
    outputs: dict[str, int]
    peak_rss_bytes: int | None          # the program's process tree, start-up included
    mean_cpu_percent: float | None      # percent of one core, from the driver's begin to the end
    latency_p50_ms: int | None
    latency_p99_ms: int | None
    duration_s: float
    # Spark's stateful operators over all batches: the largest sum of their state-store memory
    # (stateOperators.memoryUsedBytes) and of their state rows; None without stateful operators.
    peak_state_bytes: int | None = None
    peak_state_rows: int | None = None
    # Every death of the engine program (harness/supervision.py Restart.to_dict()), in order.
    restarts: tuple[dict, ...] = ()
    # Connections refused for want of the run's secret, by server: {"feed": n, "sink": n}.
    refused_connections: Mapping[str, int] = dataclasses.field(default_factory=lambda: {"feed": 0, "sink": 0})
    # Where events entered and answers left the engine, as the program said when it started
    # ({"source": "jvm" | "python", "sink": "jvm" | "driver-collect" | "python", "why": ...}).
    connectors: Mapping[str, object] | None = None
    # Where the per-event work ran, as the program said when it started: {"family": run.work,
    # "queries": {query id or "pairs": its plan in words}} (specs/TRANSLATION.md, "Plan families").
    work: Mapping[str, object] | None = None
    # What bounded the run (harness/bound.py Verdict.to_dict(), with the CPU per part), or None
    # when nothing was sampled.
    bound: Mapping[str, object] | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "completed"
