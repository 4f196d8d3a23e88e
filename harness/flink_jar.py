"""cepkit's Flink runtime jar: the JVM feed source, harness sink and plans of the Flink programs
(flink_runtime/java/cepkit/flink, with the Java libraries of runtime_common/java/cepkit: the wire
and the query logic both engines share).

A Flink SQL micro query reads its events through `cepkit.flink.FeedSource` and sends its answers
through `cepkit.flink.HarnessSink` (flink_runtime/jvm.py), with no Python operator on their way;
the Pairs JVM plan (`cepkit.flink.PairsFlink`) runs between them.
They are compiled once per (Java, Flink, sources) by `python -m harness.flink_jar` (scripts/setup.sh
runs it where it makes the Flink environment; it needs `javac`) into cepkit's cache, against the
jars PyFlink ships (`lib/*.jar` and `opt/flink-python`), with the wire library's and our imports of
Jackson and Arrow relocated to the copies Flink ships (harness/javac.py). A Flink run the harness
starts gets the jar's path in its environment (`CEPKIT_FLINK_RUNTIME_JAR`); the program adds it to
its job (`pipeline.jars`: a cluster's TaskManagers get it through the blob server, so workers need
no cepkit). Without it, a program that needs it fails at once, saying how to build it. The run
records the jar it used (run.json: `runtime_jar`).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.javac import cached_jar, jar_path as _jar_path
from harness.jvm_archive import java_version, setup_step

ROOT = Path(__file__).resolve().parent.parent
# Files read, never imported (harness does not import engine runtimes).
SOURCES = ROOT / "flink_runtime" / "java"
WIRE_SOURCES = ROOT / "runtime_common" / "java"
STEM = "flink-runtime"
# The environment variable that hands the jar's path to the program (flink_runtime/jvm.py reads it).
JAR_ENV = "CEPKIT_FLINK_RUNTIME_JAR"
# Flink ships Jackson in flink-dist and Arrow in opt/flink-python, both relocated.
RELOCATIONS = {
    "com.fasterxml.jackson": "org.apache.flink.shaded.jackson2.com.fasterxml.jackson",
    "org.apache.arrow": "org.apache.flink.api.python.shaded.org.apache.arrow",
}


def sources() -> list[Path]:
    return sorted([*SOURCES.rglob("*.java"), *WIRE_SOURCES.rglob("*.java")])


def flink_python() -> str | None:
    """The Flink environment's interpreter (.venv-flink, or CEPKIT_FLINK_PYTHON), None when missing."""
    var = os.environ.get("CEPKIT_FLINK_PYTHON")
    python = Path(var) if var else ROOT / ".venv-flink" / "bin" / "python"
    return str(python) if python.is_file() else None


def pyflink_home(python: str) -> Path | None:
    """The pyflink package directory of `python`'s environment (its lib/ and opt/ jars)."""
    found = sorted(glob.glob(str(Path(python).parent.parent / "lib" / "python3*" / "site-packages" / "pyflink")))
    if found and list(Path(found[-1]).glob("lib/flink-dist-*.jar")):
        return Path(found[-1])
    try:
        out = subprocess.run([python, "-c", "import os, pyflink; print(os.path.dirname(pyflink.__file__))"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    home = Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None
    return home if home is not None and list(home.glob("lib/flink-dist-*.jar")) else None


def flink_version(home: Path) -> str:
    """Flink's version, from its flink-dist jar's name (lib/flink-dist-2.3.0.jar -> 2.3.0)."""
    (dist,) = sorted(home.glob("lib/flink-dist-*.jar"))[-1:]
    return dist.name[len("flink-dist-"):-len(".jar")]


def class_path(home: Path) -> str:
    """PyFlink's lib/*.jar and opt/flink-python*.jar: what the program's and the TaskManagers' JVMs have."""
    jars = sorted(home.glob("lib/*.jar")) + sorted(home.glob("opt/flink-python*.jar"))
    return os.pathsep.join(map(str, jars))


def jar_path(python: str | None = None) -> Path | None:
    """Where the jar for this Java, Flink and these sources lives (None without Java or PyFlink)."""
    python = python or flink_python()
    home = pyflink_home(python) if python else None
    if home is None or not java_version():
        return None
    return _jar_path(STEM, sources(), version=flink_version(home), relocations=RELOCATIONS)


def build_jar(python: str | None = None, force: bool = False) -> Path | None:
    """Compile the jar unless it exists; its path (None without Java or PyFlink)."""
    python = python or flink_python()
    home = pyflink_home(python) if python else None
    if home is None:
        return None
    return cached_jar(STEM, sources(), force=force, version=flink_version(home), class_path=class_path(home),
                      relocations=RELOCATIONS)


def runtime_jar_env(env: Mapping[str, str], python: str) -> tuple[dict[str, str], str | None]:
    """The program's environment with the jar's path (JAR_ENV), and the path; unchanged (and None)
    when the jar is missing. The program ships it to a cluster itself (pipeline.jars)."""
    path = jar_path(python)
    if path is None or not path.is_file():
        return dict(env), None
    return {**env, JAR_ENV: str(path)}, str(path)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    python = next((a.split("=", 1)[1] for a in args if a.startswith("--python=")), None) or flink_python()
    if python is None or pyflink_home(python) is None or not java_version():
        print("cepkit: warning: no Java or no Flink environment (.venv-flink), so no Flink runtime jar",
              file=sys.stderr)
        return 1
    return setup_step(lambda force: build_jar(python, force), [a for a in args if a == "--force"],
                      "Flink runtime jar", "Flink SQL queries cannot run (their feed and sink are in it)")


if __name__ == "__main__":
    raise SystemExit(main())
