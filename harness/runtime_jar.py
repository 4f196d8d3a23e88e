"""cepkit's Spark runtime jar: the engine runtime's Java classes (spark_runtime/java/ and the wire library).

A program reads the feed with `cepkit.spark.FeedSource` (format `cepkit_feed`) and writes from the
executors with `cepkit.spark.SinkWriter` (spark_runtime/realtime.py): always in real-time mode,
which admits no Python data source and no Python sink, and in micro-batches unless the plan hands
its ranges to Python or the run asks for the kit's Python connectors (run.connectors). They are compiled once per (Java, PySpark,
sources) by `python -m harness.runtime_jar` (scripts/setup.sh runs it; it needs `javac`) into
cepkit's cache, with the source registered under its short name. Every run the harness launches
(its JVM plans need the classes whatever the connectors) gets the jar on its driver's class path
and its executors' (on other hosts through `spark.jars`: `runtime_jar_settings`); without it, a
real-time program fails at once, saying how to build it, and a micro-batch one falls back to the
Python connectors and says so. The run
records the jar it used (run.json: `runtime_jar`).
"""

from __future__ import annotations

import os
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
    unchanged (and None) when the jar is missing. The driver (on this machine) gets it on its class
    path; executors on this machine through their extra class path, executors on other hosts
    through `spark.jars` (they fetch it from the driver: the worker hosts need no cepkit)."""
    path = jar_path(python)
    if path is None or not path.is_file():
        return spark_conf, dict(env), None
    if applies_to_host(master):
        conf, env = on_class_path(spark_conf, env, path)
        return conf, env, str(path)
    conf = dict(spark_conf)
    conf["spark.jars"] = f"{conf['spark.jars']},{path}" if conf.get("spark.jars") else str(path)
    dist = env.get("SPARK_DIST_CLASSPATH", os.environ.get("SPARK_DIST_CLASSPATH"))
    return tuple(conf.items()), {**env, "SPARK_DIST_CLASSPATH": f"{dist}{os.pathsep}{path}" if dist else str(path)}, \
        str(path)


def main(argv: list[str] | None = None) -> int:
    return setup_step(build_jar, argv, "Spark runtime jar",
                      "Spark's real-time mode is unavailable")


if __name__ == "__main__":
    raise SystemExit(main())
