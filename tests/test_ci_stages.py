""".ci/run's stages and their time budgets: every marker left out of the default run is a stage of
CI (or on purpose not: `slow`), the budgets fit the 60 minutes .ci/run may take, and a stage past
its budget fails (tests/conftest.py, --budget-s)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ON_REQUEST
from tests.helpers import REPO

CI_RUN = REPO / ".ci" / "run"
NOT_IN_CI = {"slow"}      # every quick suite on every engine, long fuzzing: by hand (README)


def stages() -> dict[str, tuple[int, str]]:
    """name -> (budget_s, pytest selection), and "setup", as .ci/run's table says."""
    text = CI_RUN.read_text()
    table = re.search(r"STAGES=\((.*?)\)", text, re.S).group(1)
    out = {}
    for name, budget, selection in re.findall(r'"(\w+)\s+(\d+)\s*([^"]*)"', table):
        out[name] = (int(budget), selection.strip())
    out["setup"] = (int(re.search(r"^SETUP_BUDGET_S=(\d+)$", text, re.M).group(1)), "")
    return out


def test_every_marker_left_out_of_the_default_run_is_a_ci_stage():
    selections = {sel for _, sel in stages().values()}
    assert stages()["default"][1] == ""
    for mark in set(ON_REQUEST) - NOT_IN_CI:
        assert f"-m {mark}" in selections, f"marker {mark} is left out of the default run but .ci/run never runs it"


def test_the_budgets_fit_the_hour_ci_run_may_take():
    assert sum(budget for budget, _ in stages().values()) <= 3600
    assert stages()["default"][0] <= 600       # the README's test command: under 10 minutes


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/kit/test_atomic.py",
                           *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_a_stage_past_its_budget_stops_and_fails():
    over = _pytest("--budget-s=0.001")
    assert over.returncode != 0
    assert "OVER BUDGET, failed" in over.stdout and "over the stage's time budget" in over.stdout
    within = _pytest("--budget-s=300")
    assert within.returncode == 0, within.stdout[-2000:]
    assert "of a 300 s budget" in within.stdout and "OVER BUDGET" not in within.stdout
