"""Faults as a user writes them (`--fault kill-engine@40s`, `run.faults`): parsed, ordered, checked."""

from __future__ import annotations

import pytest

from kit.config import load_config
from kit.errors import CepkitError
from kit.faults import Fault, parse_faults


def test_faults_parse_and_sort():
    faults = parse_faults(["kill-executor@60s", "kill-engine@12.5", "kill-engine@40s"])
    assert [f.text for f in faults] == ["kill-engine@12.5s", "kill-engine@40s", "kill-executor@60s"]
    assert faults[0] == Fault("kill-engine", 12.5)


@pytest.mark.parametrize("text, message", [
    ("kill-engine", "expected KIND@SECONDS"),
    ("kill-engine@-3s", "expected KIND@SECONDS"),
    ("kill-everything@40s", "must be one of kill-engine, kill-executor, kill-taskmanager"),
    ("kill-engine@0s", "must be > 0"),
    ("kill-engine@1e9", "expected KIND@SECONDS"),
])
def test_bad_faults_are_one_line(text, message):
    with pytest.raises(CepkitError, match=message):
        parse_faults([text])


def test_config_checks_faults_against_the_master_and_the_launch():
    assert load_config(None, ['run.faults=["kill-engine@40s"]']).run.faults == ("kill-engine@40s",)
    with pytest.raises(CepkitError, match=r"run.faults: kill-executor needs a cluster master"):
        load_config(None, ['run.faults=["kill-executor@40s"]'])
    cfg = load_config(None, ['run.faults=["kill-executor@40s"]', 'run.master="spark://127.0.0.1:7077"'])
    assert cfg.run.faults == ("kill-executor@40s",)
    with pytest.raises(CepkitError, match=r"run.faults: need launch = \"harness\""):
        load_config(None, ['run.faults=["kill-engine@40s"]', 'run.launch="external"'])
