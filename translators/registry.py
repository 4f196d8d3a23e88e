"""The translator of each engine of kit.engines.ENGINES, imported on demand.

Tests and commands iterate over ENGINES, so adding an engine is a module plus a line there.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from kit.engines import ENGINES, engine_name


def engine_module(name: str) -> ModuleType:
    """The translator module of engine `name` (translate_pairs, translate_micro)."""
    return importlib.import_module(ENGINES[engine_name(name)].translator)
