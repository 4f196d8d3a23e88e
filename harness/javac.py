"""Compiling cepkit's Java sources into a jar against PySpark's own jars (Spark's API, Hadoop's, Arrow's).

Shared by the quiet local file system (harness/local_fs.py) and the Spark runtime jar
(harness/runtime_jar.py). A jar is named by a hash of (Java, PySpark, its sources), so a changed
source or a new PySpark builds a new one; it is written under a temporary name and renamed, so an
interrupted build leaves nothing half-written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.jvm_archive import cache_dir, java_version, pyspark_version


def pyspark_jars(python: str = sys.executable) -> str:
    """The directory of PySpark's jars, as `python` finds PySpark."""
    out = subprocess.run([python, "-c", "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "
                          "'jars'))"], capture_output=True, text=True, timeout=60)
    jars = out.stdout.strip()
    if out.returncode != 0 or not os.path.isdir(jars):
        raise RuntimeError("PySpark's jars not found")
    return jars


def jar_path(stem: str, sources: Sequence[Path], python: str = sys.executable) -> Path | None:
    """Where the jar of these sources for this Java and PySpark lives (None without Java or PySpark)."""
    java, pyspark = java_version(), pyspark_version(python)
    if not java or not pyspark:
        return None
    texts = [f"{p.name}\n{p.read_text()}" for p in sorted(sources)]
    key = hashlib.sha256("\n".join((java, pyspark, *texts)).encode()).hexdigest()[:16]
    return cache_dir() / f"{stem}-{pyspark}-{key}.jar"


def cached_jar(stem: str, sources: Sequence[Path], python: str = sys.executable, force: bool = False,
               resources: Mapping[str, bytes] | None = None) -> Path | None:
    """The cache's jar of these sources, compiled unless it exists (or with `force`); None without
    Java or PySpark."""
    path = jar_path(stem, sources, python)
    if path is None:
        return None
    if path.is_file() and not force:
        return path
    return compile_jar(sources, path, python, resources)


def compile_jar(sources: Sequence[Path], path: Path, python: str = sys.executable,
                resources: Mapping[str, bytes] | None = None) -> Path:
    """Compile `sources` (with `resources`: jar entry name -> bytes) into the jar at `path`."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac not found (install a JDK: openjdk-17-jdk-headless)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cepkit-javac-") as work:
        classes = Path(work) / "classes"
        proc = subprocess.run([javac, "-nowarn", "--release", "17", "-cp", os.path.join(pyspark_jars(python), "*"),
                               "-d", str(classes), *map(str, sources)], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            errors = [ln for ln in (proc.stderr or proc.stdout or "no output").splitlines() if ": error:" in ln]
            raise RuntimeError(f"javac failed: {(errors or (proc.stderr or proc.stdout or 'no output').splitlines())[0]}")
        tmp = Path(work) / "out.jar"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as jar:
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
            for name, data in sorted((resources or {}).items()):
                jar.writestr(name, data)
        fd, staged = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
        os.close(fd)
        shutil.copyfile(tmp, staged)
        os.replace(staged, path)
    return path


def on_class_path(spark_conf: tuple[tuple[str, str], ...], env: Mapping[str, str], path: Path
                  ) -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
    """The run's settings and program environment with a jar on the class path of Spark's driver
    and executors on this machine. The driver gets it *appended* to its class path
    (SPARK_DIST_CLASSPATH, which Spark's launcher puts last), so the JVM class archive
    (harness/jvm_archive.py), whose class path must be a prefix of the runtime one, stays usable;
    executors get it through their extra class path (kept ahead of one the user set). `env`: the
    variables already added for the program (another jar's)."""
    conf = dict(spark_conf)
    key = "spark.executor.extraClassPath"
    conf[key] = f"{path}{os.pathsep}{conf[key]}" if conf.get(key) else str(path)
    dist = env.get("SPARK_DIST_CLASSPATH", os.environ.get("SPARK_DIST_CLASSPATH"))
    return tuple(conf.items()), {**env, "SPARK_DIST_CLASSPATH": f"{dist}{os.pathsep}{path}" if dist else str(path)}
