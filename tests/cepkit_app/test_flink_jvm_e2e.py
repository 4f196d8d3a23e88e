"""Flink SQL queries read and answered in the JVM (flink_runtime/jvm.py: cepkit.flink.FeedSource and
HarnessSink), end to end under `cepkit micro`: a filter (Q1), a sliding window (Q3), a table join
(J2) and a pattern's interval self-join (Q7, run.work = "operators"), the feed in two splits read by two readers, the
engine's JVM killed mid-run and the program restored from its checkpoint; every query validated
with nothing missing or undue, no Python operator in the job, the run's secret in nothing written.
The workloads with Python queries keep the Python feed (test_micro_e2e.py)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from kit.workload import (Aggregate, Comparison, Filter, Pattern, PatternEvent, QuerySet, Suite, TableJoin,
                          TimeWindowAggregation, write_spec)
from kit.workload.suite import Dataset, Load, Param, Workload
from tests.helpers import cepkit_command, check_secret_kept

pytestmark = pytest.mark.flink


def sql_kinds() -> Workload:
    """Two streams at 300 events/s each for 20 s (the kill at 12 s lands after the first checkpoint,
    at 10 s), 20 IDs, a 20-row table: every query has thousands of answers before and after it."""
    queries = (
        Filter("q1", "S1", ("ID", "A1", "A2"), (Comparison("ID", "le", 10),)),
        TimeWindowAggregation("q3", "S1", 2000, 500, (Aggregate("AVG", "A1", "wavg"), Aggregate("COUNT", None, "wn"),
                                                      Aggregate("MAX", "A2", "wmax")), ("ID",)),
        TableJoin("q6", "S2", "T", "memory", "ID", "ID", ("S2.ID", "S2.A1", "T.T1", "T.T3"),
                  (Comparison("T.T2", "gt", 30.0),)),
        Pattern("q7", PatternEvent("a1", "S1"), PatternEvent("a2", "S2", (Comparison("A1", "gt", 60.0),)), 800,
                "all-all", ("a1.ID", "a1.TS", "a2.A1")),
    )
    return Workload("sql-kinds", "coverage", ("throughput",),
                    Dataset(streams=2, attributes=2, max_id=20, table_rows=20, table_attributes=3, seed=11),
                    Load("constant", 300.0, 20000), QuerySet("independent", queries), (Param("kinds", "sql"),))


def test_sql_queries_through_the_jvm_feed_and_sink_survive_a_killed_engine(tmp_path):
    workload = sql_kinds()
    suite_file = write_spec(Suite("coverage", True, (workload,)), tmp_path / "suite.xml")
    run_dir = tmp_path / "run"
    secret = "5ec0de" * 5 + "9a"
    proc = subprocess.run([*cepkit_command(secret), "micro", "--suite-file", str(suite_file),
                           "--set", "run.engine='flink'", "--set", "run.source_partitions=2",
                           # Flink SQL's own interval join for Q7 (the engine family runs the Java logic).
                           "--set", "run.work='operators'",
                           "--fault", "kill-engine@12s", "--out", str(run_dir)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wdir = run_dir / workload.name
    check_secret_kept(wdir / "engine", secret, run_dir)
    validation = json.loads((wdir / "validation.json").read_text())
    counts = {q["query"]: (q["expected"], q["missing"], q["undue"], q["wrong"]) for q in validation["queries"]}
    assert set(counts) == {"q1", "q3", "q6", "q7"}
    for qid, (expected, missing, undue, wrong) in counts.items():
        assert expected > 500 and (missing, undue, wrong) == (0, 0, 0), (qid, counts[qid])
    run = json.loads((wdir / "engine" / "run.json").read_text())
    (restart,) = run["restarts"]
    assert restart["outcome"] == "restarted" and restart["restored_from"]
    assert run["runtime_jar"] and re.search(r"flink-runtime-[0-9.]+-[0-9a-f]{16}\.jar$", run["runtime_jar"])
    started = [json.loads(line) for line in (wdir / "engine" / "logs" / "engine.stdout.jsonl").read_text().splitlines()
               if '"started"' in line]
    assert len(started) == 2 and all(e["connectors"] == {"source": "jvm", "sink": "jvm", "why": None}
                                     for e in started)
    program = (wdir / "program.py").read_text()
    assert "read and answered in the JVM" in program
    # Both attempts' jobs: the feed's two readers and each query's sink in the JVM, none of the
    # Python feed's operators (its datagen trigger, puller, events and emitters). J2's table comes
    # from pandas through Flink's Arrow source, a JVM source read once.
    (log,) = (wdir / "engine" / "logs").glob("flink-*.log")
    tasks = {m.group(1) for m in re.finditer(r"Task +\[\] - (.+?) \(\d+/\d+\)#\d+ \([^)]*\) switched from "
                                             r"INITIALIZING to RUNNING", log.read_text())}
    assert any(t.startswith("Source: cepkit feed (JVM)") for t in tasks), tasks
    python = ("cepkit_feed_trigger", "cepkit feed ->", "cepkit events", "cepkit python")
    assert not [t for t in tasks if any(p in t for p in python) or re.search(r"cepkit sink: ", t)], tasks
    for qid in counts:
        assert any(f"cepkit sink (JVM): {qid}" in t for t in tasks), (qid, tasks)
    assert "registering reader for parallel task 1" in log.read_text()
