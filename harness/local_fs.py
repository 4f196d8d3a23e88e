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

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from harness.jvm_archive import cache_dir, java_version, pyspark_version, setup_step

SOURCE = Path(__file__).parent / "java" / "QuietLocalFileSystem.java"
CLASS_NAME = "cepkit.spark.QuietLocalFileSystem"
FS_KEY = "spark.hadoop.fs.file.impl"
_THIS_HOST = ("spark://127.0.0.1:", "spark://localhost:")


def jar_path(python: str = sys.executable) -> Path | None:
    """Where the jar for this Java, PySpark and source lives (None without Java or PySpark)."""
    java, pyspark = java_version(), pyspark_version(python)
    if not java or not pyspark:
        return None
    key = hashlib.sha256("\n".join((java, pyspark, SOURCE.read_text())).encode()).hexdigest()[:16]
    return cache_dir() / f"local-fs-{pyspark}-{key}.jar"


def _pyspark_jars(python: str) -> str:
    out = subprocess.run([python, "-c", "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "
                          "'jars'))"], capture_output=True, text=True, timeout=60)
    jars = out.stdout.strip()
    if out.returncode != 0 or not os.path.isdir(jars):
        raise RuntimeError("PySpark's jars not found")
    return jars


def build_jar(python: str = sys.executable, force: bool = False) -> Path | None:
    """Compile the jar unless it exists; its path (None without Java or PySpark). Written under a
    temporary name and renamed, so an interrupted build leaves nothing half-written."""
    path = jar_path(python)
    if path is None:
        return None
    if path.is_file() and not force:
        return path
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac not found (install a JDK: openjdk-17-jdk-headless)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cepkit-local-fs-") as work:
        classes = Path(work) / "classes"
        proc = subprocess.run([javac, "-nowarn", "--release", "17", "-cp", os.path.join(_pyspark_jars(python), "*"),
                               "-d", str(classes), str(SOURCE)], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1]
            raise RuntimeError(f"javac failed: {tail}")
        tmp = Path(work) / "out.jar"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as jar:
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        fd, staged = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
        os.close(fd)
        shutil.copyfile(tmp, staged)
        os.replace(staged, path)
    return path


def applies(master: str, conf: dict) -> bool:
    """The jar serves JVMs on this host that the user did not give a file system of their own."""
    return (master.startswith("local") or master.startswith(_THIS_HOST)) and FS_KEY not in conf


def local_fs_settings(spark_conf: tuple[tuple[str, str], ...], master: str, python: str = sys.executable
                      ) -> tuple[tuple[tuple[str, str], ...], dict[str, str], str | None]:
    """The run's Spark settings and program environment for the quiet file system, and the jar's
    path; unchanged settings, no variables and None when the jar is missing or does not apply.

    The driver gets the jar *appended* to its class path (SPARK_DIST_CLASSPATH, which Spark's
    launcher puts last), so the JVM class archive (harness/jvm_archive.py), whose class path must
    be a prefix of the runtime one, stays usable; executors get it through their extra class path
    (kept ahead of one the user set)."""
    conf = dict(spark_conf)
    path = jar_path(python)
    if path is None or not path.is_file() or not applies(master, conf):
        return spark_conf, {}, None
    conf[FS_KEY] = CLASS_NAME
    key = "spark.executor.extraClassPath"
    conf[key] = f"{path}{os.pathsep}{conf[key]}" if conf.get(key) else str(path)
    dist = os.environ.get("SPARK_DIST_CLASSPATH")
    return tuple(conf.items()), {"SPARK_DIST_CLASSPATH": f"{dist}{os.pathsep}{path}" if dist else str(path)}, str(path)


def main(argv: list[str] | None = None) -> int:
    return setup_step(build_jar, argv, "quiet local file system for Spark",
                      "engine runs spawn a process per checkpoint file")


if __name__ == "__main__":
    raise SystemExit(main())
