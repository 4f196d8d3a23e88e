"""How the harness starts each engine's program: one runner module per engine (kit.engines names it).

A runner's `launch(spec, args, program_env)` returns a `Launch`: the command the harness runs
(`run.launch = "harness"`), the by-hand script it writes into the run directory for
`run.launch = "external"`, the program's extra environment, and what it applied (class archive,
file system jar). Its `sampled_extra(spec, started_event)` names processes outside the program's
own tree whose CPU and memory count for the run (a Spark cluster's executors). specs/ENGINES.md
is the contract.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

from kit.engines import ENGINES, engine_name


@dataclass(frozen=True)
class Launch:
    command: list[str]                     # the harness's own start of the program
    script_name: str                       # the by-hand script, beside run.json
    script: str                            # its text
    env: dict[str, str] = field(default_factory=dict)
    applied: dict[str, str | None] = field(default_factory=dict)   # run.json notes: class archive, jars


def runner(engine: str) -> ModuleType:
    """The runner module of `engine` (launch, sampled_extra)."""
    return importlib.import_module(ENGINES[engine_name(engine)].runner)
