"""Keyed all-all patterns (Q7's shape) end to end, as Spark's stream-stream interval self-join
(run.work = "operators") and as the Java PatternLogic keyed by ID in transformWithState (run.work =
"engine", the default): `cepkit micro` on local Spark, every query's rows checked by the validator
against the reference engine (which knows nothing of joins: specs/SEMANTICS.md section 8's
candidates and consumption)."""

from __future__ import annotations

import json

import pytest

from kit.workload import Comparison, Pattern, PatternEvent, QuerySet
from kit.workload.suite import Dataset, Load, Param, Workload
from tests.cepkit_app.test_micro_e2e import run_micro, started_event
from tests.helpers import program_literals

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


@pytest.mark.parametrize("work, plan, said", [
    ("operators", "interval_join", "Spark stream-stream interval self-join on ID (engine operators)"),
    ("engine", "jvm_logic", "Java PatternLogic in transformWithState, keyed by ID (engine user code, JVM)")])
def test_a_keyed_all_all_pattern_matches_the_reference(work, plan, said, tmp_path):
    _, run_dir = run_micro(keyed_patterns(), "spark", tmp_path, f"run.work={work!r}")
    wdir = run_dir / "keyed-patterns"
    literals = program_literals(wdir / "program.py")
    assert literals["PLANS"] == {"q7": plan, "q7b": plan}
    assert literals["WORK"]["queries"] == {"q7": said, "q7b": "computed once as q7, its rows copied"}
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert row["status"] == "completed" and row["verdict"] == "PASSED"
    assert started_event(run_dir, "keyed-patterns")["work"]["queries"]["q7"] == said
    run = json.loads((wdir / "engine" / "run.json").read_text())
    assert run["plan"]["connectors"]["sink"] == "jvm"      # no answer passes the driver
    # The join's two sides, or the candidates one record each: in RocksDB.
    assert run["resources"]["peak_state_bytes"] > 0
