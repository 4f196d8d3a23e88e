"""How the harness starts each engine's program: one runner module per engine (kit.engines names it).

A runner's `launch(spec, args, program_env)` returns a `Launch`: the command the harness runs
(`run.launch = "harness"`), the by-hand script it writes into the run directory for
`run.launch = "external"`, the program's extra environment, what it applied (class archive,
file system jar), and the directory its JVMs keep their temporary files in (harness/launch.py
`scratch_dir`), which the harness removes when the run ends. Its `sampled_extra(spec,
started_event)` names processes outside the program's own tree whose CPU and memory count for the
run (a Spark cluster's executors). For supervision
(harness/supervision.py) a runner also names `ENGINE_JVM` (the main class of the JVM in the
program's tree that kill-engine kills and supervision watches), `replays_outputs(spec)` (whether
a restored job sends answers again, so the sink must filter them), `prepare_restart(spec, started)`
(clean up after a dead program, e.g. cancel its job still running on a cluster) and
`restart_args(checkpoint, attempt, heard_checkpoint)` (the extra arguments of a restarted
program, and what it restores). For long-run health (harness/health.py) it names
`state_gauge(checkpoint, heard_checkpoint)`: a function giving the engine's state on disk in bytes
(None when it cannot be had). specs/ENGINES.md is the contract.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from kit.engines import ENGINES, engine_name


@dataclass(frozen=True)
class Launch:
    command: list[str]                     # the harness's own start of the program
    script_name: str                       # the by-hand script, beside run.json
    script: str                            # its text
    env: dict[str, str] = field(default_factory=dict)
    applied: dict[str, str | None] = field(default_factory=dict)   # run.json notes: class archive, jars
    scratch: Path | None = None            # the JVMs' temporary files, removed when the run ends


def runner(engine: str) -> ModuleType:
    """The runner module of `engine` (launch, sampled_extra)."""
    return importlib.import_module(ENGINES[engine_name(engine)].runner)
