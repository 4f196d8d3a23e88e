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
    # Output to files, not pipes: the test polls the run directory while the run goes on.
    out, err = (open(tmp_path / name, "w") for name in ("stdout.txt", "stderr.txt"))
    with out, err:
        return subprocess.Popen([sys.executable, "-m", "cepkit_app.cli", "pairs", "-c", str(SHORT_PAIRS), *args,
                                 "--out", str(tmp_path / "run")], cwd=tmp_path, stdout=out, stderr=err, text=True)


def _watch_scratch(proc: subprocess.Popen, scratch, timeout_s: float) -> set[str]:
    """The names seen in the engine's temporary directory (`tmp/` in the run) until `proc` ends."""
    seen, deadline = set(), time.monotonic() + timeout_s
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the run did not end in time")
        try:
            seen.update(p.name for p in scratch.iterdir())
        except OSError:
            pass
        time.sleep(0.5)
    return seen


@pytest.mark.parametrize("engine", engine_params())
def test_an_engine_that_keeps_dying_fails_within_its_budget_with_a_validated_partial_report(engine, tmp_path):
    t0 = time.monotonic()
    proc = _start(tmp_path, "--engine", engine, "--fault", "kill-engine@8s", "--fault", "kill-engine@20s",
                  "--set", "run.max_restarts=1")
    run_dir = tmp_path / "run"
    seen = _watch_scratch(proc, run_dir / "engine" / "tmp", timeout_s=900)
    out, err = ((tmp_path / name).read_text() for name in ("stdout.txt", "stderr.txt"))
    took_s = time.monotonic() - t0
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
    # The killed JVMs' temporary files went to the run's tmp/ (Spark's spark-*/blockmgr-*, Flink's
    # mini-cluster directories and extracted jars), which is gone with the run: none left in /tmp.
    assert any(n.startswith(("spark-", "blockmgr-", "flink-", "minicluster")) for n in seen), sorted(seen)
    assert not (run_dir / "engine" / "tmp").exists()
