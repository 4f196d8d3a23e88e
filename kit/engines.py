"""The engines cepkit can benchmark: one entry each, naming the modules that serve it.

An engine is a translator module (`translate_pairs`, `translate_micro`: a neutral spec in, a
program's text out; translators/registry.py imports it) and the runtime packages its generated
programs import (the harness puts them on the program's path; they are what is shipped to the
engine's workers). Adding an engine is a translator module, a runtime package and one line here;
tests are parametrized over ENGINES. Names only: kit imports none of these modules.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    name: str
    translator: str                       # module path of the translator
    runtime_packages: tuple[str, ...]     # top-level packages a generated program imports
    description: str


ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("pyspark", "translators.spark", ("spark_runtime", "kit"),
           "Apache Spark Structured Streaming through PySpark"),
)}
ENGINE_NAMES = tuple(ENGINES)
