"""The engines cepkit can translate workloads for: one line each, one module each.

Tests and commands iterate over ENGINES, so adding an engine is a module plus a line here.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from kit.errors import CepkitError

# engine name -> module implementing translate_pairs(TranslationRequest) -> str
ENGINES: dict[str, str] = {
    "pyspark": "translators.spark",
}

PLANS = ("shared", "per-strategy")


def engine_module(name: str) -> ModuleType:
    if name not in ENGINES:
        raise CepkitError(f"engine {name!r} is not known; known engines: {', '.join(sorted(ENGINES))}")
    return importlib.import_module(ENGINES[name])
