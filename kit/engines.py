"""The engines cepkit can benchmark: one entry each, naming the modules that serve it.

An engine is (specs/ENGINES.md):
- a translator module (`translate_pairs`, `translate_micro`: a neutral spec in, a program's text
  out; translators/registry.py imports it);
- the runtime packages its generated programs import (the harness puts them on the program's
  path; they are what is shipped to the engine's workers);
- a runner module in the harness (`harness/runners/`): the command that starts a program against
  the harness's feed and sink, the by-hand script, and which of its processes are sampled;
- the Python environment its programs run in: `main` (the interpreter that runs cepkit) or the
  name of a separate virtual environment beside the checkout (`.venv-flink`), made by
  `scripts/setup.sh --engine NAME` on first use, when the engine's packages clash with the main
  environment's (PyFlink pins pandas, pyarrow and py4j apart from PySpark).

Adding an engine is a translator module, a runtime package, a runner module and one line here;
tests are parametrized over ENGINES. Names only: kit imports none of these modules.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.errors import CepkitError


@dataclass(frozen=True)
class Engine:
    name: str
    translator: str                       # module path of the translator
    runner: str                           # module path of the harness's runner
    runtime_packages: tuple[str, ...]     # top-level packages a generated program imports
    libraries: tuple[str, ...]            # third-party packages a program and its runtime may import
    environment: str                      # "main", or the directory name of the engine's own venv
    description: str


ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("spark", "translators.spark", "harness.runners.spark", ("spark_runtime", "runtime_common", "kit"),
           ("pyspark", "pandas", "pyarrow", "numpy", "psycopg"), "main",
           "Apache Spark Structured Streaming through PySpark"),
    Engine("flink", "translators.flink", "harness.runners.flink", ("flink_runtime", "runtime_common", "kit"),
           ("pyflink", "pandas", "pyarrow", "numpy", "psycopg"), ".venv-flink",
           "Apache Flink (DataStream and SQL) through PyFlink, on its local mini-cluster"),
)}
ENGINE_NAMES = tuple(ENGINES)
# Earlier names still accepted in configs and on the command line.
ALIASES = {"pyspark": "spark"}


def engine_name(name: str) -> str:
    """The registry name of `name` (an alias is resolved); CepkitError for an unknown engine."""
    name = ALIASES.get(name, name)
    if name not in ENGINES:
        raise CepkitError(f"engine {name!r} is not known; known engines: {', '.join(ENGINE_NAMES)}")
    return name


def engine_list(text: str) -> tuple[str, ...]:
    """`spark,flink` -> ("spark", "flink"): registry names, each once, in the order given."""
    names = [engine_name(part.strip()) for part in str(text).split(",") if part.strip()]
    if not names:
        raise CepkitError("engine: expected one or more engine names separated by commas")
    return tuple(dict.fromkeys(names))
