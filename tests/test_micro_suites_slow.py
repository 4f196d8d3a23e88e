"""Every quick microbenchmark suite, as `cepkit micro --suite NAME --quick` runs it, on local Spark:
each workload's queries must match the reference answers. About 20 minutes on 2 cores, so it is
marked slow and left out of the default run (`pytest -m slow` runs it); tests/test_micro_e2e.py
covers every query kind in one workload in the default run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kit.cli.micro_cmd import SUITE_NAMES
from translators.registry import ENGINES


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("suite", SUITE_NAMES)
def test_quick_suite_passes_on_the_engine(engine, suite, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "kit.cli", "micro", "--suite", suite, "--quick",
                           "--set", f"run.engine={engine!r}", "--out", str(run_dir)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["workloads"] and all(w["verdict"] == "PASSED" for w in summary["workloads"])
    assert (run_dir / "report.html").stat().st_size > 10_000
