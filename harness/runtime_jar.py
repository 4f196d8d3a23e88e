"""cepkit's Spark runtime jar: the engine runtime's Java classes (spark_runtime/java/), for Spark's real-time mode.

Real-time mode admits no Python data source and no Python sink, so a program in that mode reads
the feed with `cepkit.spark.FeedSource` (format `cepkit_feed`) and writes with
`cepkit.spark.SinkWriter` (spark_runtime/realtime.py). They are compiled once per (Java, PySpark,
sources) by `python -m harness.runtime_jar` (scripts/setup.sh runs it; it needs `javac`) into
cepkit's cache, with the source registered under its short name. A real-time run the harness
launches on this machine gets the jar on its driver's and executors' class path
(`runtime_jar_settings`); without it, the program fails at once, saying how to build it. The run
records the jar it used (run.json: `runtime_jar`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from harness.javac import cached_jar, jar_path as _jar_path, on_class_path
from harness.jvm_archive import setup_step
from harness.local_fs import applies_to_host

# The engine runtime's Java sources (files read, never imported: harness does not import engine
# runtimes), and cepkit's one Java wire library, shared with the Flink runtime's jar.
SOURCES = Path(__file__).resolve().parent.parent / "spark_runtime" / "java"
WIRE_SOURCES = Path(__file__).resolve().parent.parent / "runtime_common" / "java"
SERVICES = {"META-INF/services/org.apache.spark.sql.sources.DataSourceRegister": b"cepkit.spark.FeedSource\n"}


def sources() -> list[Path]:
    return sorted([*SOURCES.rglob("*.java"), *WIRE_SOURCES.rglob("*.java")])


def jar_path(python: str = sys.executable) -> Path | None:
    """Where the jar for this Java, PySpark and these sources lives (None without Java or PySpark)."""
    return _jar_path("spark-runtime", sources(), python)


def build_jar(python: str = sys.executable, force: bool = False) -> Path | None:
    """Compile the jar unless it exists; its path (None without Java or PySpark)."""
    return cached_jar("spark-runtime", sources(), python, force, SERVICES)


def runtime_jar_settings(spark_conf: tuple[tuple[str, str], ...], env: Mapping[str, str], master: str,
                         python: str = sys.executable
                         ) -> tuple[tuple[tuple[str, str], ...], dict[str, str], str | None]:
    """The run's settings and program environment with the jar on the class path, and its path;
    unchanged (and None) when the jar is missing or the engine's JVMs run on other machines."""
    path = jar_path(python)
    if path is None or not path.is_file() or not applies_to_host(master):
        return spark_conf, dict(env), None
    conf, env = on_class_path(spark_conf, env, path)
    return conf, env, str(path)


def main(argv: list[str] | None = None) -> int:
    return setup_step(build_jar, argv, "Spark runtime jar",
                      "Spark's real-time mode is unavailable")


if __name__ == "__main__":
    raise SystemExit(main())
