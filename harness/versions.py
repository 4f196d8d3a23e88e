"""What a run ran on: software versions (versions.json) and the machine (machine.json).

Nothing here imports pyspark or starts a JVM: the PySpark version comes from the installed
package's metadata and Java's from `java -version`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys

import psutil

import kit


def _package(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def java_version() -> str | None:
    """The first line of `java -version` (it prints to stderr), or None without a java."""
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") \
        else None
    java = java or shutil.which("java")
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0].strip() if lines else None


ENGINE_PACKAGES = ("pyspark", "apache-flink", "pyarrow", "pandas", "numpy")
_ASK = ("import importlib.metadata as m, json, platform\n"
        "def v(n):\n    try:\n        return m.version(n)\n    except m.PackageNotFoundError:\n        return None\n"
        "print(json.dumps({'python': platform.python_version(), **{n: v(n) for n in %r}}))")


def _engine_interpreter(python: str) -> dict:
    """Python's and the engine packages' versions as another interpreter (an engine's own
    environment) sees them; {} when it cannot say."""
    try:
        out = subprocess.run([python, "-c", _ASK % (ENGINE_PACKAGES,)], capture_output=True, text=True, timeout=60)
        return json.loads(out.stdout) if out.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}


def versions(python: str | None = None) -> dict:
    """Versions of cepkit, Python, the engines' packages (PySpark, PyFlink), pyarrow, pandas,
    numpy, psutil and Java.

    `python` is the interpreter the engine program ran with, if not this one: an engine with an
    environment of its own (Flink) reports what that environment holds."""
    ours = {"python": platform.python_version(), **{name: _package(name) for name in ENGINE_PACKAGES}}
    if python and os.path.abspath(python) != os.path.abspath(sys.executable):   # venvs link one binary
        ours = {**ours, **_engine_interpreter(python)}
    return {"cepkit": kit.__version__, **ours, "python_executable": python or sys.executable,
            "psutil": _package("psutil"), "java": java_version(), "platform": platform.platform()}


def machine() -> dict:
    """CPU count, memory, load and host of this machine, at the time of the call."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"hostname": platform.node(), "kernel": platform.release(), "machine": platform.machine(),
            "system": platform.system(), "cpu_count": os.cpu_count(),
            "cpu_count_physical": psutil.cpu_count(logical=False),
            "memory_total_bytes": psutil.virtual_memory().total,
            "memory_available_bytes": psutil.virtual_memory().available, "load_average": load}
