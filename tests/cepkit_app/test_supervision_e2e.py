"""Supervision on real engines (harness/supervision.py): an engine JVM killed from outside the
harness (found here by process tree, as an operator or the OOM killer would pick it) is restarted
and the run still PASSES; an engine that keeps dying ends the run `failed` within its restart
budget, and what it put out is still validated. Parametrized over the engine registry."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.helpers import SHORT_PAIRS, engine_params


def _start(tmp_path, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cepkit_app.cli", "pairs", "-c", str(SHORT_PAIRS), *args,
                             "--out", str(tmp_path / "run")], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _started(run_dir, timeout_s: float = 300) -> None:
    """Until the engine program has said `started` (its stdout events, engine/logs)."""
    events = run_dir / "engine" / "logs" / "engine.stdout.jsonl"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if events.is_file() and '"event": "started"' in events.read_text():
            return
        time.sleep(0.5)
    raise AssertionError("the engine program did not start")


def _java_below(pid: int) -> psutil.Process:
    """The one JVM among `pid`'s descendants (the engine's: Spark's driver, PyFlink's gateway)."""
    jvms = [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "java"]
    assert len(jvms) == 1, [" ".join(p.cmdline())[:120] for p in jvms]
    return jvms[0]


@pytest.mark.parametrize("engine", engine_params())
def test_an_engine_jvm_killed_from_outside_is_restarted_and_the_run_passes(engine, tmp_path):
    proc = _start(tmp_path, "--engine", engine)
    run_dir = tmp_path / "run"
    try:
        _started(run_dir)
        time.sleep(15)                      # into the replay, with answers out and a checkpoint taken
        victim = _java_below(proc.pid)
        victim.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=900)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["verdict"] == "PASSED"
    for s in summary["streams"]:
        assert s["missing"] == 0 and s["undue"] == 0 and s["wrong"] == 0
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["status"] == "completed" and run["faults"] == [] and run["engine_attempts"] == 2
    (restart,) = run["restarts"]
    assert restart["fault"] is None and restart["outcome"] == "restarted"
    assert f"pid {victim.pid}) vanished" in restart["cause"]
    (recovery,) = summary["faults"]         # the death is measured like an injected fault
    assert recovery["kind"] == "engine-died" and 0 < recovery["recovery_ms"] < 120_000
    assert "engine program attempt 1 died" in err and "fault engine-died@" in err


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
