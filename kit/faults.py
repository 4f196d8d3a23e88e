"""Faults a run injects into the engine on purpose: what to kill and when.

`kill-engine@40s` SIGKILLs the engine's driver JVM 40 s after the run starts (the driver's first
release) on either engine (Spark's driver JVM, Flink's JobManager JVM: the mini-cluster's, or the
program's client JVM on a cluster); the harness then restarts the program from its checkpoint.
`kill-executor@40s` SIGKILLs one executor JVM of a Spark cluster (Spark reruns its tasks);
`kill-taskmanager@40s` one TaskManager JVM of a Flink cluster (Flink restores the job from its
latest completed checkpoint). Host faults strike a whole worker host of a cluster on other
machines, through `run.fault_command` (the harness cannot reach them itself): `cut-link@40s` cuts
a worker host's network link for a while, `kill-worker@40s` kills every engine process on a worker
host (scripts/netns-cluster.sh does both for its network-namespace hosts). Times are seconds of wall clock from
the run start, `s` optional. specs/ENGINE_RUN.md ("Faults") and specs/VALIDATION.md ("Recovery")
say what happens and what is measured.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kit.errors import CepkitError

# Faults on a whole worker host, injected by the run's `fault_command` (its last argument the kind).
HOST_FAULTS = ("cut-link", "kill-worker")
FAULT_KINDS = ("kill-engine", "kill-executor", "kill-taskmanager") + HOST_FAULTS
# What the output log may record besides injected faults: an engine program that died by itself
# (or was killed from outside the harness) and was restarted by the harness's supervision.
DEATH = "engine-died"
LOGGED_KINDS = FAULT_KINDS + (DEATH,)
# A Flink standalone cluster's master: its JobManager's REST address (`cepkit cluster start
# --engine flink` prints it).
FLINK_MASTER_PREFIX = "flink://"
_SYNTAX = re.compile(r"(?P<kind>[a-z-]+)@(?P<at>[0-9]+(?:\.[0-9]+)?)s?")


@dataclass(frozen=True)
class Fault:
    kind: str
    at_s: float

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise CepkitError(f"fault {self.kind!r}: must be one of {', '.join(FAULT_KINDS)}")
        if not (isinstance(self.at_s, (int, float)) and math.isfinite(self.at_s) and 0 < self.at_s <= 86_400):
            raise CepkitError(f"fault {self.kind}: the time must be > 0 and <= 86400 s, got {self.at_s!r}")

    @property
    def text(self) -> str:
        return f"{self.kind}@{self.at_s:g}s"

    @classmethod
    def parse(cls, text: str) -> "Fault":
        """`kill-engine@40s` (or `@40`, `@12.5s`)."""
        m = _SYNTAX.fullmatch(str(text).strip())
        if m is None:
            raise CepkitError(f"fault {text!r}: expected KIND@SECONDS, e.g. kill-engine@40s "
                              f"(kinds: {', '.join(FAULT_KINDS)})")
        return cls(m["kind"], float(m["at"]))


def parse_faults(items) -> tuple[Fault, ...]:
    """Faults in time order."""
    return tuple(sorted((Fault.parse(t) for t in items), key=lambda f: f.at_s))


def check_faults(faults: tuple[Fault, ...], master: str, launch: str, fault_command=()) -> None:
    """What a run's faults need: the harness starting the program (it restarts what it started),
    a cluster master for an executor kill, and a command for a host fault."""
    if faults and launch != "harness":
        raise CepkitError('need launch = "harness" (the harness restarts the program it started)')
    if any(f.kind == "kill-executor" for f in faults) and not master.startswith("spark://"):
        raise CepkitError(f"kill-executor needs a cluster master (spark://HOST:PORT), not {master!r}")
    if any(f.kind == "kill-taskmanager" for f in faults) and not master.startswith(FLINK_MASTER_PREFIX):
        raise CepkitError(f"kill-taskmanager needs a Flink cluster master ({FLINK_MASTER_PREFIX}HOST:PORT), "
                          f"not {master!r}")
    host = sorted({f.kind for f in faults if f.kind in HOST_FAULTS})
    if host and not fault_command:
        raise CepkitError(f"{' and '.join(host)} need run.fault_command: the command that strikes a worker "
                          f"host of your cluster (e.g. scripts/netns-cluster.sh fault DIR)")
