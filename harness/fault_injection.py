"""Faults injected into a running engine on purpose, and what became of each (kit/faults.py).

`kill-engine`: SIGKILL of the engine's JVM in the program's process tree (Spark's `SparkSubmit`
driver JVM, Flink's PyFlink gateway JVM, which holds the local mini-cluster: the runner names its
class). The program then fails and exits; the harness restarts it from its checkpoint
(harness/engine_run.py, harness/supervision.py), the feed serves again from the last committed
offset and the sink drops what it already holds (Spark's re-run batches by id, a restored Flink
job's replayed answers by harness/replay_filter.py). `kill-executor`: SIGKILL of one executor JVM of the run's
application on this machine (a standalone cluster's `CoarseGrainedExecutorBackend`); Spark reruns
the lost tasks. Host faults (`cut-link`, `kill-worker`) strike a worker host the harness cannot
reach itself: the run's fault command is started with the kind as its last argument (its output in
`logs/fault-N.log`) and left to do its work (a cut link stays cut for a while, then the command
mends it); the harness waits for it at the run's end. Each fault is recorded with the wall-clock
time of the kill (of the command's start); the validator measures the recovery from the output log
(specs/VALIDATION.md, "Recovery").
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import time
from dataclasses import dataclass

from pathlib import Path

import psutil

from harness.resources import now_ms
from kit.faults import FLINK_MASTER_PREFIX, HOST_FAULTS, Fault

EXECUTOR_JVM = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
# How long the run's end waits for a host fault's command still at work (a link cut mends itself).
HOST_FAULT_WAIT_S = 120.0
TASKMANAGER_JVM = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"


@dataclass
class FaultRecord:
    fault: str                      # e.g. "kill-engine@40s"
    kind: str
    planned_s: float                # seconds after the run start
    at_ms: int | None = None        # wall-clock epoch ms of the kill
    pid: int | None = None
    target: str = ""                # what was killed
    restarted_ms: int | None = None  # kill-engine: when the restarted program's query was up again
    note: str = ""                  # why nothing was killed, when nothing was

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def engine_jvm(processes: list[psutil.Process], main_class: str) -> psutil.Process | None:
    """The engine's JVM (running `main_class`, the runner's ENGINE_JVM) among the program's processes."""
    return next((p for p in processes if main_class in _cmdline(p)), None)


def executor_jvms(app_id: str | None) -> list[psutil.Process]:
    """The executor JVMs of application `app_id` on this machine (any application's when None)."""
    out = []
    for p in psutil.process_iter():
        line = _cmdline(p)
        if EXECUTOR_JVM in line and (app_id is None or app_id in line):
            out.append(p)
    return sorted(out, key=lambda p: p.pid)


def _flat_settings(config_dir: str, keys: tuple[str, ...]) -> dict[str, str]:
    """`keys` as a flat Flink config.yaml sets them (`key: value` lines, what `cepkit cluster start
    --engine flink` writes); a missing or unreadable file sets none."""
    found = {}
    try:
        text = (Path(config_dir) / "config.yaml").read_text(errors="replace")
    except OSError:
        return found
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in keys:
            value = value.strip()
            found[key.strip()] = value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value
    return found


def taskmanager_jvms(master: str | None) -> list[psutil.Process]:
    """The TaskManager JVMs on this machine of the Flink cluster whose JobManager's REST address is
    `master` (`flink://HOST:PORT`): those whose config directory (`--configDir`) sets that
    `rest.address` and `rest.port`. None: every TaskManager JVM."""
    want = None
    if master is not None:
        host, _, port = master.removeprefix(FLINK_MASTER_PREFIX).rpartition(":")
        want = {"rest.address": host, "rest.port": port}
    out = []
    for p in psutil.process_iter():
        try:
            argv = p.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if TASKMANAGER_JVM not in argv:
            continue
        config_dir = argv[argv.index("--configDir") + 1] if "--configDir" in argv[:-1] else None
        if want is None or (config_dir and _flat_settings(config_dir, tuple(want)) == want):
            out.append(p)
    return sorted(out, key=lambda p: p.pid)


def program_master(processes: list[psutil.Process]) -> str | None:
    """The `--master` of the engine program among `processes` (its command line says it)."""
    for p in processes:
        try:
            argv = p.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if "--master" in argv[:-1]:
            return argv[argv.index("--master") + 1]
    return None


def find_program(program) -> int | None:
    """The pid of a process running `program` (a path) on this machine, e.g. one started by hand
    with spark-submit: the oldest such process."""
    name = str(program)
    found = [p for p in psutil.process_iter() if name in _cmdline(p)]
    return min(found, key=lambda p: p.create_time()).pid if found else None


class FaultInjector:
    """The run's faults: which are due, the kills, and the restarts they call for."""

    def __init__(self, faults: tuple[Fault, ...], engine_class: str, command: tuple[str, ...] = (),
                 log_dir: Path | None = None):
        self.pending = list(faults)
        self.engine_class = engine_class
        self.command, self.log_dir = tuple(command), log_dir
        self.records: list[FaultRecord] = []
        self._commands: list[tuple[FaultRecord, subprocess.Popen]] = []

    def _strike_host(self, fault: Fault, record: FaultRecord) -> FaultRecord:
        """Start the fault command for `fault`; it runs on while the harness goes on."""
        n = len(self._commands) + 1
        log = (self.log_dir or Path(".")) / f"fault-{n}.log"
        argv = [*self.command, fault.kind]
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "w", encoding="utf-8") as out:
                record.at_ms = now_ms()
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        except OSError as e:
            record.at_ms, record.note = None, f"the fault command {argv[0]} could not start: {e.strerror or e}"
        else:
            record.pid, record.target = proc.pid, f"{fault.kind} by {' '.join(argv)} (output in {log})"
            self._commands.append((record, proc))
        self.records.append(record)
        return record

    def wait_commands(self, timeout_s: float = HOST_FAULT_WAIT_S) -> list[FaultRecord]:
        """Wait for the host faults' commands still at work; end those that outlast `timeout_s`.
        The records of commands that failed or had to be ended, each with a note saying so."""
        noted, deadline = [], time.monotonic() + timeout_s
        for record, proc in self._commands:
            try:
                rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                record.note = f"its command was still at work {timeout_s:g} s after the run's end and was ended"
                noted.append(record)
                continue
            if rc != 0:
                record.note = f"its command exited with code {rc}; see {record.target}"
                noted.append(record)
        self._commands = []
        return noted

    def due(self, elapsed_s: float) -> list[Fault]:
        out = [f for f in self.pending if f.at_s <= elapsed_s]
        self.pending = [f for f in self.pending if f.at_s > elapsed_s]
        return out

    def inject(self, fault: Fault, program_processes: list[psutil.Process], app_id: str | None) -> FaultRecord:
        record = FaultRecord(fault.text, fault.kind, fault.at_s)
        if fault.kind in HOST_FAULTS:
            return self._strike_host(fault, record)
        if fault.kind == "kill-engine":
            targets = [p for p in [engine_jvm(program_processes, self.engine_class)] if p is not None]
        elif fault.kind == "kill-taskmanager":       # one TaskManager of the run's Flink cluster
            master = program_master(program_processes)
            targets = taskmanager_jvms(master)[:1] if master and master.startswith(FLINK_MASTER_PREFIX) else []
        else:
            targets = executor_jvms(app_id)[:1]
        if not targets:
            record.note = "no target process found"
        else:
            victim = targets[0]
            record.pid, record.target = victim.pid, victim.name()
            record.at_ms = now_ms()
            try:
                victim.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                record.note = "the target exited before the kill"
        self.records.append(record)
        return record

    def close(self) -> list[FaultRecord]:
        """The run is over: faults still pending were never injected; they are recorded as such.
        Host faults' commands still at work are waited for (their failures noted on their records)."""
        noted = self.wait_commands()
        left = [FaultRecord(f.text, f.kind, f.at_s, note="not injected: the run ended before its time")
                for f in self.pending]
        self.pending = []
        self.records += left
        return noted + left

    def log_entries(self) -> list[dict]:
        """The faults as the output log records them (specs/OUTPUT_LOG.md)."""
        return [{"fault": r.fault, "kind": r.kind, "at_ms": r.at_ms} for r in self.records if r.at_ms is not None]
