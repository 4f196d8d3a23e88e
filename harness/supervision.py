"""Supervision of the engine program: every death is seen, explained as far as it can be, and
answered with a restart from the checkpoint, up to `run.max_restarts` (specs/ENGINE_RUN.md,
"Supervision").

A death is the program exiting before it printed `finished` (a crash, `failed`, a signal, a
`stopped` after someone else's SIGTERM), or the engine's JVM vanishing under a program that lives
on (the program's next call into it fails; one that hangs instead is ended after
`EXIT_AFTER_DEATH_S`). The harness's own kills (harness/fault_injection.py) are deaths like any
other, with the fault as their known cause. Each death becomes a `Restart` record in run.json; the
output log lists the deaths the harness did not cause as faults of kind `engine-died`, so the
validator measures the recovery from every one (validator/recovery.py).
"""

from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass

import psutil

# A program whose engine JVM died normally exits within seconds (its next call into the JVM
# fails); one still alive after this long is ended by the harness, so a restart never waits forever.
EXIT_AFTER_DEATH_S = 30.0


@dataclass
class Restart:
    """One death of the engine program and what the harness did about it."""

    attempt: int                    # the attempt that died (1: the first start)
    died_ms: int                    # wall-clock epoch ms: the kill, or when the death was seen
    cause: str                      # in words, as far as it is known
    exit_code: int | None = None    # the program's (negative: the signal that ended it)
    last_error: str = ""            # the most telling line of the engine log
    fault: str | None = None        # the injected fault that caused it, if one did
    restarted_ms: int | None = None  # when the restarted program's query was up again
    restored_from: str | None = None  # what the restarted program restored (a checkpoint)
    outcome: str = ""               # "restarted", or why not

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def exit_text(rc: int | None) -> str:
    """`exit code 1`, `killed by SIGKILL`, ..."""
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"


def death_cause(rc: int | None, events: dict, jvm_gone: tuple[int, str] | None, last_error: str,
                jvm_error: str | None = None) -> str:
    """The cause of a death in words: what the harness saw, a fatal JVM error its log holds (which
    the program's own word, after the JVM is gone, does not say), the program's word, its log."""
    parts = []
    if jvm_error:
        parts.append(f"the engine JVM failed: {jvm_error}")
    if jvm_gone is not None:
        parts.append(f"its engine JVM ({jvm_gone[1]}, pid {jvm_gone[0]}) vanished")
    if rc is not None:
        parts.append(f"the program ended ({exit_text(rc)})")
    if "stopped" in events:
        parts.append("it was stopped by a signal from outside the harness")
    failed = (events.get("failed") or {}).get("message")
    if failed:
        parts.append(f"it reported: {failed}")
    elif last_error and last_error != "no output":
        parts.append(f"its log ends: {last_error}")
    return "; ".join(parts) or "unknown"


class JvmWatch:
    """The engine JVM in the program's process tree, once seen, and whether it is still there."""

    def __init__(self):
        self.pid: int | None = None
        self.name = ""
        self._proc: psutil.Process | None = None

    def see(self, jvm: psutil.Process | None) -> None:
        if jvm is not None and jvm.pid != self.pid:
            self.pid, self.name, self._proc = jvm.pid, jvm.name(), jvm

    def gone(self) -> tuple[int, str] | None:
        """(pid, name) of the seen JVM if it is no longer running."""
        if self._proc is None:
            return None
        try:
            alive = self._proc.is_running() and self._proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            alive = False
        return None if alive else (self.pid, self.name)
