"""The wheel works anywhere: built from this checkout, installed into a fresh venv outside the
repository, and run from another directory, it finds its templates, schemas, shipped suites and
configs as package data (no path assumes the repository's layout).

The fresh venv gets the wheel alone (`--no-deps`); the third-party libraries it declares come from
the test's own environment through a path entry (not its .pth files, so this checkout's editable
install stays out), which keeps the test at seconds instead of half a minute of copying pyspark.
`pip check` in the fresh venv then proves the wheel's declared requirements are what it runs with.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.install


def _run(cmd, cwd, timeout=600) -> subprocess.CompletedProcess:
    # No PYTHONPATH and a directory with nothing of ours: only the installed wheel can answer.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: {proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the venv's cepkit command, a working directory outside the repository)."""
    root = tmp_path_factory.mktemp("wheel")
    # -v: the build backend's own output, where setuptools reports packaging mistakes.
    build = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", root / "dist", REPO], cwd=root)
    noise = re.findall(r".*(?:Warning:|absent from the `packages`|as data is deprecated).*", build.stdout + build.stderr)
    assert not noise, noise
    wheel, = (root / "dist").glob("cepkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "specs/"))]
    assert "harness/java/QuietLocalFileSystem.java" in names     # harness/local_fs.py compiles it
    assert "spark_runtime/java/cepkit/spark/FeedSource.java" in names     # and harness/runtime_jar.py these
    assert "runtime_common/java/cepkit/wire/FrameClient.java" in names    # (with the one wire library)
    assert "flink_runtime/java/cepkit/flink/FeedSource.java" in names     # and harness/flink_jar.py these
    assert "validator/templates/sweep.html.j2" in names
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", root / "venv"], cwd=root)
    venv_bin = root / "venv" / "bin"
    _run([venv_bin / "python", "-m", "pip", "install", "-q", "--no-deps", wheel], cwd=root)
    purelib = _run([venv_bin / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=root).stdout.strip()
    Path(purelib, "zz-test-libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([venv_bin / "python", "-m", "pip", "check"], cwd=root)
    work = root / "elsewhere"
    work.mkdir()
    return venv_bin, work


def test_the_installed_package_is_not_this_checkout(installed):
    venv_bin, work = installed
    where = _run([venv_bin / "python", "-c", "import kit, spark_runtime, cepkit_app; "
                  "print(kit.__file__, spark_runtime.__file__, cepkit_app.__file__)"], cwd=work).stdout
    assert str(REPO) not in where and where.count("site-packages") == 3


def test_commands_run_from_another_directory(installed):
    venv_bin, work = installed
    cepkit = venv_bin / "cepkit"
    assert "datagen" in _run([cepkit, "--help"], cwd=work).stdout
    data = Path(_run([cepkit, "datagen", "pairs", "--quick", "--out", work / "data"], cwd=work).stdout.strip())
    assert (data / "manifest.json").is_file() and (data / "pairs-aux.json").is_file()
    checked = _run([cepkit, "querygen", "check", "filtering-quick", "patterns"], cwd=work).stdout.split()
    assert [Path(p).name for p in checked] == ["filtering-quick.xml", "patterns.xml"]
    assert all("site-packages" in p for p in checked)
    strategies = work / "strategies.xml"
    _run([cepkit, "querygen", "pairs", "--aux", data, "--out", strategies], cwd=work)
    program = Path(_run([cepkit, "translate", "pairs", "--strategies", strategies, "--out", work / "p.py"],
                        cwd=work).stdout.strip())
    assert "from spark_runtime.pairs_plan import SPARK_CONF, PairsProgram" in program.read_text()
    micro = _run([cepkit, "translate", "micro", "--spec", "joins-quick", "--workload",
                  "joins-j1-window-size-s100", "--out", work / "m.py"], cwd=work).stdout.strip()
    assert "from spark_runtime.micro_plan import" in Path(micro).read_text()
    assert "quick = true" in _run([cepkit, "config", "show", "-c", "quick"], cwd=work).stdout
    # The generated programs import with the installed runtime (pyspark, no JVM started).
    _run([venv_bin / "python", "-c", "import runpy; runpy.run_path('p.py'); runpy.run_path('m.py')"], cwd=work)
