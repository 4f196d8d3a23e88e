"""The microbenchmark cores: plain Python files that generated programs include verbatim.

Each file in `templates/micro_cores/` is an importable module (so it can be tested on its own)
whose code after the line `# ---- core ----` is copied into a generated program. That part may
use only what the program imports at its top (CORE_IMPORTS) and must not use
`from __future__` (it would not be at the top of the program).

A core class has `__init__(q)` (q: a query literal, translators/micro_literal.py),
`initial_state() -> dict` and `process(state, events) -> list[tuple]`: `events` is one
micro-batch's events of the query's input streams as a pandas DataFrame sorted by `offset`
(columns ID, A1..AN, TS, stream, offset, ingestTS), `state` the JSON-round-tripped dict of the
previous call (updated in place), and the result the output rows in `q["fields"]` order.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CORE_DIR = Path(__file__).resolve().parent / "templates" / "micro_cores"
MARKER = "# ---- core ----"
CORE_IMPORTS = ("import bisect", "import collections", "import heapq", "import json", "import math",
                "import numpy as np", "import pandas as pd")


def core_path(name: str) -> Path:
    return CORE_DIR / f"{name}.py"


def core_source(name: str) -> str:
    """The part of a core file that goes into a generated program."""
    text = core_path(name).read_text()
    head, marker, body = text.partition(MARKER + "\n")
    if not marker:
        raise ValueError(f"{core_path(name)}: no line {MARKER!r}")
    return body.strip("\n") + "\n"


def load_core(name: str) -> ModuleType:
    """Import a core file as a module (for tests)."""
    spec = importlib.util.spec_from_file_location(f"cepkit_micro_core_{name}", core_path(name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
