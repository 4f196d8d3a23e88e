"""Hadoop's local file system without a child process per file, for engine checkpoints on this host.

PySpark ships Hadoop without its native library, so Hadoop's local file system sets the
permissions of every file it creates by running `chmod` in a child process (and, through
FileContext, reads link status with `readlink`). A streaming query writes several checkpoint files
per micro-batch (the offset and commit logs, a state changelog per state partition): measured on
these 2-core machines, the spawns from the engine's JVM cost ~80-100 ms of every Pairs batch and
20 processes a second (specs/ENGINE_RUN.md, "Spark settings"). `QuietLocalFileSystem`
(harness/java/) is Hadoop's own class with `setPermission` done through java.nio; it changes no
file's content, name or permission, only how the permission is set.

The jar is compiled once per (Java, PySpark) by `python -m harness.local_fs` (scripts/setup.sh
runs it; it needs `javac`, from a JDK) into cepkit's cache. A run uses it only when it exists and
the engine's JVMs run on this machine (a local master, or a standalone cluster on 127.0.0.1 /
localhost, which `cepkit cluster` starts): the jar is put on the driver's and executors' class
path and registered as the `file:` file system (`local_fs_settings`). Without it, runs work as before, only slower. The
run records the jar it used (run.json: `local_fs_jar`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.javac import cached_jar, jar_path as _jar_path, on_class_path
from harness.jvm_archive import setup_step

SOURCE = Path(__file__).parent / "java" / "QuietLocalFileSystem.java"
CLASS_NAME = "cepkit.spark.QuietLocalFileSystem"
FS_KEY = "spark.hadoop.fs.file.impl"
_THIS_HOST = ("spark://127.0.0.1:", "spark://localhost:")


def jar_path(python: str = sys.executable) -> Path | None:
    """Where the jar for this Java, PySpark and source lives (None without Java or PySpark)."""
    return _jar_path("local-fs", [SOURCE], python)


def build_jar(python: str = sys.executable, force: bool = False) -> Path | None:
    """Compile the jar unless it exists; its path (None without Java or PySpark)."""
    return cached_jar("local-fs", [SOURCE], python, force)


def applies_to_host(master: str) -> bool:
    """The engine's JVMs run on this machine: a local master, or a standalone cluster on 127.0.0.1 /
    localhost (which `cepkit cluster` starts)."""
    return master.startswith("local") or master.startswith(_THIS_HOST)


def applies(master: str, conf: dict) -> bool:
    """The jar serves JVMs on this host that the user did not give a file system of their own."""
    return applies_to_host(master) and FS_KEY not in conf


def local_fs_settings(spark_conf: tuple[tuple[str, str], ...], master: str, python: str = sys.executable
                      ) -> tuple[tuple[tuple[str, str], ...], dict[str, str], str | None]:
    """The run's Spark settings and program environment for the quiet file system, and the jar's
    path; unchanged settings, no variables and None when the jar is missing or does not apply
    (the jar goes on the class path as harness/javac.py's `on_class_path` says)."""
    conf = dict(spark_conf)
    path = jar_path(python)
    if path is None or not path.is_file() or not applies(master, conf):
        return spark_conf, {}, None
    conf[FS_KEY] = CLASS_NAME
    conf, env = on_class_path(tuple(conf.items()), {}, path)
    return conf, env, str(path)


def main(argv: list[str] | None = None) -> int:
    return setup_step(build_jar, argv, "quiet local file system for Spark",
                      "engine runs spawn a process per checkpoint file")


if __name__ == "__main__":
    raise SystemExit(main())
