"""The quick microbenchmark suites, as `cepkit micro --suite NAME --quick` runs them, on each engine.

Every query kind gets one workload of its quick suite (the first that uses it, `representatives()`),
run on the engine and validated: 0 missing, 0 undue, 0 wrong for each query, and on Spark state kept
exactly by the stateful kinds. J3 runs against a real PostgreSQL the harness starts. These are on
request with the whole suites (`pytest -m slow`; `-m "slow and flink"` for Flink's alone): CI's
engine stages cover every query kind on each engine in one run instead (tests/cepkit_app/
test_micro_e2e.py, every_kind: each placement on Spark, every Flink plan of a pattern), and every
quick workload of every suite is translated for both engines in the default run
(tests/translators/). Whole suites, every workload, take about 20 minutes on 2 cores.
Parametrized over the engine registry, so a new engine is tested without new code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kit.shipped import SUITE_NAMES, suite_path
from kit.workload import read_suite
from tests.helpers import engine_params

KIND_SUITES = ("filtering", "count-windows", "time-windows", "joins", "patterns")


def representatives() -> list[tuple[str, str, str]]:
    """(kind, suite, workload): the first quick workload of the kind suites that uses each kind."""
    seen: dict[str, tuple[str, str, str]] = {}
    for suite_name in KIND_SUITES:
        for w in read_suite(suite_path(suite_name, quick=True)).workloads:
            for q in w.queries:
                seen.setdefault(q.thesis_name, (q.thesis_name, suite_name, w.name))
    return sorted(seen.values())


def run_quick(engine: str, suite: str, workloads: tuple[str, ...], tmp_path) -> dict:
    run_dir = tmp_path / "run"
    picks = [arg for w in workloads for arg in ("--workload", w)]
    proc = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "micro", "--suite", suite, "--quick", *picks,
                           "--set", f"run.engine={engine!r}", "--out", str(run_dir)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (run_dir / "report.html").stat().st_size > 10_000
    return {"summary": summary, "run_dir": run_dir, "stderr": proc.stderr}


def test_every_query_kind_has_a_quick_workload():
    assert [k for k, _, _ in representatives()] == ["J2", "J3", "Q1", "Q2", "Q3", "Q4", "Q5", "Q7"]


def _kind_params():
    """One param per kind; J3's also needs PostgreSQL."""
    return [pytest.param(k, s, w, id=k, marks=[pytest.mark.postgres] if k == "J3" else [])
            for k, s, w in representatives()]


# Flink plans patterns by consumption policy (specs/TRANSLATION.md): the first pattern workload
# (all-all) is SQL's interval join; these two run the Java logic (one-all and one-one).
FLINK_EXTRA = [pytest.param("Q7", "patterns", w, id=f"Q7-{w.rsplit('-', 2)[-2]}-{w.rsplit('-', 1)[-1]}",
                            marks=[pytest.mark.flink, pytest.mark.slow])
               for w in ("patterns-consumption-one-all", "patterns-consumption-one-one")]


@pytest.mark.slow
@pytest.mark.parametrize("engine", engine_params(default_run=None))
@pytest.mark.parametrize("kind, suite, workload", _kind_params())
def test_quick_workload_of_each_query_kind_matches_the_reference(engine, kind, suite, workload, tmp_path):
    check_quick_workload(engine, kind, suite, workload, tmp_path)


@pytest.mark.parametrize("kind, suite, workload", FLINK_EXTRA)
def test_each_flink_plan_of_a_pattern_matches_the_reference(kind, suite, workload, tmp_path):
    check_quick_workload("flink", kind, suite, workload, tmp_path)


def check_quick_workload(engine, kind, suite, workload, tmp_path):
    out = run_quick(engine, suite, (workload,), tmp_path)
    (row,) = out["summary"]["workloads"]
    assert (row["workload"], row["status"], row["verdict"]) == (workload, "completed", "PASSED")
    validation = json.loads((out["run_dir"] / workload / "validation.json").read_text())
    assert validation["queries"]
    for q in validation["queries"]:
        assert q["expected"] > 0, f"{q['query']}: the quick workload has no expected rows"
        assert (q["missing"], q["undue"], q["wrong"]) == (0, 0, 0), q["query"]
    if kind == "J3":
        assert "PostgreSQL on 127.0.0.1" in out["stderr"]
    if engine != "spark":
        return
    # Windows, window joins and patterns keep state (in Spark's state store, or on the driver, reported alike);
    # filters and table joins do not.
    stateful = kind in ("Q2", "Q3", "Q4", "Q5", "Q7")
    run = json.loads((out["run_dir"] / workload / "engine" / "run.json").read_text())
    state_bytes = run["resources"]["peak_state_bytes"]     # a count window's state is a few KiB: 0.0 MiB
    assert (state_bytes is not None and state_bytes > 0) == stateful, state_bytes


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("engine", engine_params(default_run=None))
@pytest.mark.parametrize("suite", SUITE_NAMES)
def test_quick_suite_passes_on_the_engine(engine, suite, tmp_path):
    out = run_quick(engine, suite, (), tmp_path)
    assert out["summary"]["workloads"] and all(w["verdict"] == "PASSED" for w in out["summary"]["workloads"])
