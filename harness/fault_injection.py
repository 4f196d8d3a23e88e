"""Faults injected into a running engine on purpose, and what became of each (kit/faults.py).

`kill-engine`: SIGKILL of the engine's driver JVM (the `SparkSubmit` JVM in the program's process
tree). The program then fails and exits; the harness restarts it from its checkpoint
(harness/engine_run.py), the feed serves again from the last committed offset and the sink drops
rows of batches it already holds. `kill-executor`: SIGKILL of one executor JVM of the run's
application on this machine (a standalone cluster's `CoarseGrainedExecutorBackend`); Spark reruns
the lost tasks. Each fault is recorded with the wall-clock time of the kill; the validator measures
the recovery from the output log (specs/VALIDATION.md, "Recovery").
"""

from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass

import psutil

from harness.resources import now_ms
from kit.faults import Fault

ENGINE_JVM = "org.apache.spark.deploy.SparkSubmit"
EXECUTOR_JVM = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
# A program whose JVM was killed normally exits within seconds (its next call into the JVM fails);
# one still alive after this long is ended by the harness, so the restart never waits forever.
EXIT_AFTER_KILL_S = 30.0


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


def engine_jvm(processes: list[psutil.Process]) -> psutil.Process | None:
    """The engine's driver JVM among the program's processes."""
    return next((p for p in processes if ENGINE_JVM in _cmdline(p)), None)


def executor_jvms(app_id: str | None) -> list[psutil.Process]:
    """The executor JVMs of application `app_id` on this machine (any application's when None)."""
    out = []
    for p in psutil.process_iter():
        line = _cmdline(p)
        if EXECUTOR_JVM in line and (app_id is None or app_id in line):
            out.append(p)
    return sorted(out, key=lambda p: p.pid)


def find_program(program) -> int | None:
    """The pid of a process running `program` (a path) on this machine, e.g. one started by hand
    with spark-submit: the oldest such process."""
    name = str(program)
    found = [p for p in psutil.process_iter() if name in _cmdline(p)]
    return min(found, key=lambda p: p.create_time()).pid if found else None


class FaultInjector:
    """The run's faults: which are due, the kills, and the restarts they call for."""

    def __init__(self, faults: tuple[Fault, ...]):
        self.pending = list(faults)
        self.records: list[FaultRecord] = []

    def due(self, elapsed_s: float) -> list[Fault]:
        out = [f for f in self.pending if f.at_s <= elapsed_s]
        self.pending = [f for f in self.pending if f.at_s > elapsed_s]
        return out

    def inject(self, fault: Fault, program_processes: list[psutil.Process], app_id: str | None) -> FaultRecord:
        record = FaultRecord(fault.text, fault.kind, fault.at_s)
        if fault.kind == "kill-engine":
            targets = [p for p in [engine_jvm(program_processes)] if p is not None]
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
        """The run is over: faults still pending were never injected; they are recorded as such."""
        left = [FaultRecord(f.text, f.kind, f.at_s, note="not injected: the run ended before its time")
                for f in self.pending]
        self.pending = []
        self.records += left
        return left

    @property
    def awaiting_restart(self) -> FaultRecord | None:
        """The engine kill whose program has not been restarted yet."""
        return next((r for r in self.records if r.kind == "kill-engine" and r.at_ms is not None
                     and r.restarted_ms is None), None)

    def log_entries(self) -> list[dict]:
        """The faults as the output log records them (specs/OUTPUT_LOG.md)."""
        return [{"fault": r.fault, "kind": r.kind, "at_ms": r.at_ms} for r in self.records if r.at_ms is not None]
