"""Pairs end to end on a real engine: quick SF=1 data replayed in real time into the generated
program, every output checked by the validator. Parametrized over the translator registry, so a
new engine is tested by these tests without new test code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kit.shipped import config_path
from kit.workload import StrategySet, read_strategies, write_spec
from querygen.output import write_strategies
from kit.workload import load_aux
from kit.engines import ENGINES

pytestmark = pytest.mark.spark

QUICK = config_path("quick")


def _cepkit(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cepkit_app.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900)


def _check_passed(run_dir, proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["verdict"] == "PASSED"
    streams = {s["stream"]: s for s in summary["streams"]}
    for name in ("Indicator", "MarketOrder"):
        assert streams[name]["missing"] == 0 and streams[name]["undue"] == 0 and streams[name]["wrong"] == 0
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["status"] == "completed"
    return streams


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_quick_sf1_shared_plan_passes_validation(engine, tmp_path):
    run_dir = tmp_path / "run"
    proc = _cepkit("pairs", "-c", str(QUICK), "--set", f"run.engine={engine!r}", "--plan", "shared",
                   "--out", str(run_dir), cwd=tmp_path)
    streams = _check_passed(run_dir, proc)
    assert streams["Indicator"]["expected"] > 50 and streams["MarketOrder"]["expected"] > 0
    assert "pscore:" in proc.stderr and "report:" in proc.stderr
    for name in ("resources.csv", "backlog.csv"):
        assert len((run_dir / "engine" / "metrics" / name).read_text().splitlines()) > 30


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_per_strategy_plan_passes_validation_on_a_smaller_set(engine, tmp_path, quick_pairs):
    """The three strategies with the shortest count windows (so they trade in two minutes), one
    pipeline each, at twice real-time speed (Pairs windows are over tickTS, unchanged by speed)."""
    full = tmp_path / "all.xml"
    write_strategies(load_aux(quick_pairs / "pairs-aux.json"), 42, full)
    spec = read_strategies(full)
    short = sorted(spec.strategies, key=lambda s: (s.period_length * s.num_periods, s.alias))[:3]
    small = tmp_path / "small.xml"
    write_spec(StrategySet(spec.scale_factor, spec.seed, tuple(short)), small)
    run_dir = tmp_path / "run"
    proc = _cepkit("pairs", "-c", str(QUICK), "--set", f"run.engine={engine!r}", "--set", "run.speed=2.0",
                   "--plan", "per-strategy", "--data", str(quick_pairs), "--strategies", str(small),
                   "--out", str(run_dir), cwd=tmp_path)
    streams = _check_passed(run_dir, proc)
    assert streams["Indicator"]["expected"] > 10
    program = (run_dir / "program.py").read_text()
    assert 'PLAN = "per-strategy"' in program and program.count('"st_') >= 3


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_killed_engine_is_restarted_from_its_checkpoint_and_loses_no_answer(engine, tmp_path):
    """SIGKILL of the engine's driver JVM 40 s into quick SF=1: the harness restarts the program
    from its checkpoint, the feed serves again from the committed offset, the sink drops what it
    already holds; every answer comes once, and the recovery is measured."""
    run_dir = tmp_path / "run"
    # A relative --out, as the default runs/... is: the program runs in its run directory.
    proc = _cepkit("pairs", "-c", "quick", "--set", f"run.engine={engine!r}", "--fault", "kill-engine@40s",
                   "--out", "run", cwd=tmp_path)
    _check_passed(run_dir, proc)            # 0 missing, 0 undue, 0 wrong
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    (fault,) = run["faults"]
    assert fault["kind"] == "kill-engine" and fault["at_ms"] and fault["restarted_ms"] > fault["at_ms"]
    assert run["engine_attempts"] == 2
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    (recovery,) = summary["faults"]
    assert 0 < recovery["recovery_ms"] < 120_000 and recovery["peak_latency_ms"] > 0
    assert "fault kill-engine@40s: recovery" in proc.stderr
    assert (run_dir / "engine" / "spark-submit.sh").is_file() and (run_dir / "runtime.zip").is_file()
    assert (run_dir / "engine" / "checkpoint" / "offsets").is_dir()
