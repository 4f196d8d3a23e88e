"""Compiling cepkit's Java sources into a jar against an engine's own jars.

Shared by the quiet local file system (harness/local_fs.py) and the Spark runtime jar
(harness/runtime_jar.py), compiled against PySpark's jars (Spark's API, Hadoop's, Arrow's), and the
Flink runtime jar (harness/flink_jar.py), compiled against the jars PyFlink ships (`class_path`).
A jar is named by a hash of (Java, the engine's version, its sources), so a changed source or a
new engine builds a new one; it is written under a temporary name and renamed, so an interrupted
build leaves nothing half-written.

Relocation. cepkit's one Java wire library (runtime_common/java/cepkit/wire) is written against
the plain package names of Jackson and Arrow, which PySpark's jars carry as they are; Flink ships
the same libraries relocated (shaded) under its own packages. So a build may give `relocations`
(package prefix -> relocated prefix): each source's `import` lines are rewritten before javac, on
a copy, the way a shading plugin rewrites the classes: one library, compiled per engine.
"""

from __future__ import annotations

import hashlib
import os
import re
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


def jar_path(stem: str, sources: Sequence[Path], python: str = sys.executable, *, version: str | None = None,
             relocations: Mapping[str, str] | None = None) -> Path | None:
    """Where the jar of these sources for this Java and engine lives (None without Java or the
    engine). `version`: the engine's version (default: `python`'s PySpark's)."""
    java, engine = java_version(), (version if version is not None else pyspark_version(python))
    if not java or not engine:
        return None
    texts = [f"{p.name}\n{p.read_text()}" for p in sorted(sources)]
    moved = [f"{a}={b}" for a, b in sorted((relocations or {}).items())]
    key = hashlib.sha256("\n".join((java, engine, *moved, *texts)).encode()).hexdigest()[:16]
    return cache_dir() / f"{stem}-{engine}-{key}.jar"


def cached_jar(stem: str, sources: Sequence[Path], python: str = sys.executable, force: bool = False,
               resources: Mapping[str, bytes] | None = None, *, version: str | None = None,
               class_path: str | None = None, relocations: Mapping[str, str] | None = None) -> Path | None:
    """The cache's jar of these sources, compiled unless it exists (or with `force`); None without
    Java or the engine. `version`, `class_path`, `relocations`: as `jar_path` and `compile_jar`."""
    path = jar_path(stem, sources, python, version=version, relocations=relocations)
    if path is None:
        return None
    if path.is_file() and not force:
        return path
    return compile_jar(sources, path, python, resources, class_path=class_path, relocations=relocations)


def relocate(text: str, relocations: Mapping[str, str]) -> str:
    """A Java source with its imports of each relocated package rewritten (`import a.b.C;` and
    `import static a.b.C.x;` for a prefix `a.b`); nothing else in the text changes."""
    for old, new in sorted(relocations.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"^(\s*import\s+(?:static\s+)?){re.escape(old)}(?=[.;])", lambda m: m.group(1) + new, text,
                      flags=re.MULTILINE)
    return text


def compile_jar(sources: Sequence[Path], path: Path, python: str = sys.executable,
                resources: Mapping[str, bytes] | None = None, *, class_path: str | None = None,
                relocations: Mapping[str, str] | None = None) -> Path:
    """Compile `sources` (with `resources`: jar entry name -> bytes) into the jar at `path`, against
    `class_path` (default: `python`'s PySpark's jars), each source's imports relocated first."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac not found (install a JDK: openjdk-17-jdk-headless)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cepkit-javac-") as work:
        classes = Path(work) / "classes"
        if relocations:
            copies = []
            for i, src in enumerate(sources):
                copy = Path(work) / "src" / str(i) / src.name
                copy.parent.mkdir(parents=True)
                copy.write_text(relocate(src.read_text(), relocations))
                copies.append(copy)
            sources = copies
        cp = class_path if class_path is not None else os.path.join(pyspark_jars(python), "*")
        proc = subprocess.run([javac, "-nowarn", "--release", "17", "-cp", cp,
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
