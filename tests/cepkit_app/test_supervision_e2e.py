"""Supervision on real engines (harness/supervision.py): an engine that keeps dying ends the run
`failed` within its restart budget, and what it put out is still validated. (An engine JVM killed
from outside the harness, restarted with the run still PASSED, is the second death of
tests/cepkit_app/test_pairs_e2e.py's killed-engine run.) Parametrized over the engine registry."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.helpers import SHORT_PAIRS, engine_params


def _start(tmp_path, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cepkit_app.cli", "pairs", "-c", str(SHORT_PAIRS), *args,
                             "--out", str(tmp_path / "run")], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("engine", engine_params())
def test_an_engine_that_keeps_dying_fails_within_its_budget_with_a_validated_partial_report(engine, tmp_path):
    t0 = time.monotonic()
    proc = _start(tmp_path, "--engine", engine, "--fault", "kill-engine@8s", "--fault", "kill-engine@20s",
                  "--set", "run.max_restarts=1")
    out, err = proc.communicate(timeout=900)
    took_s = time.monotonic() - t0
    run_dir = tmp_path / "run"
    assert proc.returncode == 1, err[-3000:]
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["status"] == "failed" and "more than run.max_restarts = 1" in run["reason"]
    first, second = run["restarts"]
    assert first["outcome"] == "restarted" and second["outcome"].startswith("not restarted")
    # Ended at the second death: well before the replay's ~30 s of load and the drain would end it.
    assert run["timings"]["ended_ms"] - second["died_ms"] < 60_000 and took_s < 600
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["verdict"] == "FAILED"
    assert sum(s["missing"] for s in summary["streams"]) > 0
    assert all(s["undue"] == 0 and s["wrong"] == 0 for s in summary["streams"])
    assert "engine run: failed" in out + err and "validation: FAILED" in out + err
