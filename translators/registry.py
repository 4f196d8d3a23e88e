"""The translator of each engine of kit.engines.ENGINES, imported on demand.

Tests and commands iterate over ENGINES, so adding an engine is a module plus a line there.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from kit.engines import ENGINES
from kit.errors import CepkitError


def engine_module(name: str) -> ModuleType:
    """The translator module of engine `name` (translate_pairs, translate_micro)."""
    if name not in ENGINES:
        raise CepkitError(f"engine {name!r} is not known; known engines: {', '.join(sorted(ENGINES))}")
    return importlib.import_module(ENGINES[name].translator)
