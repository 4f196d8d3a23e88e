"""Keyed all-all patterns (Q7's shape) as Spark's stream-stream interval self-join, end to end:
`cepkit micro` on local Spark with run.patterns = "join", every query's rows checked by
the validator against the reference engine (which knows nothing of joins: specs/SEMANTICS.md
section 8's candidates and consumption)."""

from __future__ import annotations

import json

import pytest

from kit.workload import Comparison, Pattern, PatternEvent, QuerySet
from kit.workload.suite import Dataset, Load, Param, Workload
from tests.cepkit_app.test_micro_e2e import run_micro

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def keyed_patterns() -> Workload:
    """Q7 over one stream (an event may be a1 and a2, never its own partner) with a short window
    and few keys, so that ties on TS, pairs within one micro-batch and pairs across many batches
    all occur; plus an identical copy (planned once, copied to its stream)."""
    def q7(qid: str) -> Pattern:
        return Pattern(qid, PatternEvent("a1", "S1"), PatternEvent("a2", "S1", (Comparison("A1", "gt", 80.0),)),
                       700, "all-all", ("a1.ID", "a1.A1", "a1.TS", "a2.A1"), key="ID")

    return Workload("keyed-patterns", "coverage", ("throughput",),
                    Dataset(streams=1, attributes=1, max_id=15, table_rows=0, table_attributes=1, seed=3),
                    Load("constant", 500.0, 6000), QuerySet("identical", (q7("q7"), q7("q7b"))),
                    (Param("within_ms", "700"),))


def test_a_keyed_all_all_pattern_as_an_interval_join_matches_the_reference(tmp_path):
    _, run_dir = run_micro(keyed_patterns(), "spark", tmp_path, 'run.work="operators"')
    wdir = run_dir / "keyed-patterns"
    program = (wdir / "program.py").read_text()
    assert "'kind': 'join_pattern'" in program and "A stream-stream interval self-join" in program
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert row["status"] == "completed" and row["verdict"] == "PASSED"
    run = json.loads((wdir / "engine" / "run.json").read_text())
    assert run["resources"]["peak_state_bytes"] > 0        # the join's two sides, in RocksDB
