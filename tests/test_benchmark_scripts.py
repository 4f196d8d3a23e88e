"""Every script of benchmarks/ starts as a user runs it (`python benchmarks/NAME.py`, from any
directory, no sys.path edits): its imports resolve and `--help` answers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

SCRIPTS = sorted(p for p in (REPO / "benchmarks").glob("*.py") if p.name != "benchmarks_common.py")


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_a_benchmark_script_starts(script, tmp_path):
    proc = subprocess.run([sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
    assert "sys.path" not in script.read_text()
