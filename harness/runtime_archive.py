"""The engine's runtime as one zip file, for engines that ship Python code to their workers.

A generated program imports only its engine's runtime packages (kit.engines: for PySpark,
`spark_runtime` and `kit`). Zipped together they are what `spark-submit --py-files` (or
`SparkContext.addPyFile`) hands to executors that have no cepkit installed: pure Python, found
where this interpreter finds the packages (a wheel or a checkout). The zip is written atomically and
never over an existing file; its entries have fixed times, so the same code gives the same bytes.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import zipfile
from pathlib import Path

from kit.atomic import atomic_write
from kit.errors import CepkitError

_FIXED_TIME = (2020, 1, 1, 0, 0, 0)


def package_dir(name: str) -> Path:
    """Where this interpreter finds the top-level package `name` (without importing it)."""
    found = importlib.util.find_spec(name)
    if found is None or not found.submodule_search_locations:
        raise CepkitError(f"package {name!r} is not installed in this Python ({sys.executable})")
    return Path(list(found.submodule_search_locations)[0])


def runtime_archive_bytes(packages) -> bytes:
    """The zip of the engine's runtime packages (`kit.engines.Engine.runtime_packages`): every .py
    file, under its package path."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in packages:
            root = package_dir(name)
            for path in sorted(root.rglob("*.py")):
                info = zipfile.ZipInfo(str(Path(name) / path.relative_to(root)), _FIXED_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def write_runtime_archive(packages, path: Path) -> Path:
    return atomic_write(Path(path), runtime_archive_bytes(packages))
