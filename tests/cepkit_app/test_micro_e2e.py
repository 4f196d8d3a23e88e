"""Microbenchmarks end to end on a real engine: every query kind in one workload, run by
`cepkit micro` on local Spark (in the plan families engine, python and driver) and on Flink (`-m flink`),
each query's output checked by the validator (6 s of load, one program; `e2e`). They left the default
test run, whose smoke run is Pairs', when CI took 616 s of its 10 minutes (2026-11-28): each is a
minute, 30 s of it Spark starting 17 queries' plans."""

from __future__ import annotations

import json
import subprocess

import pytest

from kit.workload import (Aggregate, Comparison, CountWindowAggregation, Filter, Pattern, PatternEvent, QuerySet,
                          Suite, TableJoin, TimeWindowAggregation, TwoLevelAggregation, WindowJoin, write_spec)
from kit.workload.suite import Dataset, Load, Param, Workload
from tests.helpers import cepkit_command, check_secret_kept

pytestmark = pytest.mark.postgres   # every test joins a PostgreSQL table

AGGS = ("SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN", "COUNT")


def _aggs(prefix: str, functions=AGGS):
    return tuple(Aggregate(f, None if f == "COUNT" else "A1", f"{prefix}{f.lower()}") for f in functions)


def every_kind() -> Workload:
    """Two streams at 300 events/s each for 6 s, 20 IDs, a 20-row table (in Spark's memory for q6,
    in a PostgreSQL server the harness starts for q6db): enough rows for every query, small enough
    to validate in a second. The patterns have a key (ID), so their keys run in several groups;
    three queries are duplicates of others, so the shared plan is checked too."""
    queries = (
        Filter("q1", "S1", ("ID", "A1", "A2"), (Comparison("ID", "le", 10),)),
        Filter("q1s2", "S2", ("ID", "A2"), (Comparison("A2", "gt", 50.0),)),    # one pass with q1
        CountWindowAggregation("q2s", "S1", 60, 1, _aggs("s"), ("ID",)),
        CountWindowAggregation("q2t", "S2", 100, 100, _aggs("t"), ("ID",)),
        CountWindowAggregation("q2g", "S2", 50, 7, _aggs("g", ("MAX", "MEDIAN"))),
        TimeWindowAggregation("q3", "S1", 2000, 500, _aggs("w", ("AVG", "MEDIAN", "COUNT")), ("ID",)),
        TwoLevelAggregation("q4", "S1", 2000, 500, _aggs("p", ("AVG", "MAX", "STDEV", "COUNT"))),
        WindowJoin("q5", "S1", "S2", 40, "ID", "ID", ("S1.ID", "S1.A1", "S2.A2", "S2.TS")),
        TableJoin("q6", "S2", "T", "memory", "ID", "ID", ("S2.ID", "S2.A1", "T.T1", "T.T3"),
                  (Comparison("T.T2", "gt", 30.0),)),
        TableJoin("q6db", "S1", "T", "database", "ID", "ID", ("S1.ID", "S1.TS", "T.T2"),
                  (Comparison("S1.A1", "lt", 50.0), Comparison("T.T1", "ge", 20.0))),
        *(Pattern(f"q7{c.replace('-', '')}", PatternEvent("a1", "S1"),
                  PatternEvent("a2", "S2", (Comparison("A1", "gt", 60.0),)), 800, c,
                  ("a1.ID", "a1.TS", "a2.A1")) for c in ("all-all", "all-one", "one-all", "one-one")),
        # Identical to q1, q2s and q7allall but for their ids: computed once, copied to each stream.
        Filter("q1b", "S1", ("ID", "A1", "A2"), (Comparison("ID", "le", 10),)),
        CountWindowAggregation("q2sb", "S1", 60, 1, _aggs("s"), ("ID",)),
        Pattern("q7allallb", PatternEvent("a1", "S1"), PatternEvent("a2", "S2", (Comparison("A1", "gt", 60.0),)),
                800, "all-all", ("a1.ID", "a1.TS", "a2.A1")),
    )
    return Workload("every-kind", "coverage", ("throughput",),
                    Dataset(streams=2, attributes=2, max_id=20, table_rows=20, table_attributes=3, seed=11),
                    Load("constant", 300.0, 6000), QuerySet("independent", queries), (Param("kinds", "all"),))


def run_micro(workload: Workload, engine: str, tmp_path, *settings: str):
    """`cepkit micro` on a one-workload suite, every query checked to have expected rows and none
    missing, undue or wrong, and the run's secret in nothing it wrote; returns the finished process
    and the run directory."""
    suite_file = write_spec(Suite("coverage", True, (workload,)), tmp_path / "suite.xml")
    run_dir = tmp_path / "run"
    sets = [arg for setting in (f"run.engine={engine!r}", *settings) for arg in ("--set", setting)]
    secret = "a11ce5" * 5 + "0b"
    proc = subprocess.run([*cepkit_command(secret), "micro", "--suite-file", str(suite_file), *sets,
                           "--out", str(run_dir)], capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    check_secret_kept(run_dir / workload.name / "engine", secret, run_dir)
    assert secret not in proc.stdout + proc.stderr
    validation = json.loads((run_dir / workload.name / "validation.json").read_text())
    counts = {q["query"]: (q["expected"], q["missing"], q["undue"], q["wrong"]) for q in validation["queries"]}
    assert set(counts) == {q.id for q in workload.queries}
    for qid, (expected, missing, undue, wrong) in counts.items():
        assert expected > 0, f"{qid} has no expected rows: the test data does not exercise it"
        assert (missing, undue, wrong) == (0, 0, 0), qid
    return proc, run_dir


def started_event(run_dir, workload: str) -> dict:
    """The engine program's `started` event (its connectors and `work`: each query's plan)."""
    lines = (run_dir / workload / "engine" / "logs" / "engine.stdout.jsonl").read_text().splitlines()
    return next(e for e in map(json.loads, lines) if e.get("event") == "started")


@pytest.mark.parametrize("work", [pytest.param("engine", marks=[pytest.mark.spark, pytest.mark.e2e]),
                                  pytest.param("python", marks=[pytest.mark.spark, pytest.mark.e2e]),
                                  pytest.param("driver", marks=[pytest.mark.spark, pytest.mark.e2e])])
def test_every_query_kind_matches_the_reference_on_spark(work, tmp_path):
    """The plan families (run.work, specs/TRANSLATION.md): engine (the default: Spark's operators for
    filters and table joins, the Java logic in transformWithState for Q2, Q3, Q4, J1 and every
    pattern), python (the kit's Python cores in transformWithStateInPandas) and driver (the cores on
    Spark's driver, opt-in)."""
    # The default family through the JVM source and the JVM writer with the engine killed mid-run
    # (its restart re-reads from the checkpoint, and the sink's replay filter drops what the re-run
    # batch sends again: nothing missing, nothing undue).
    faults = ("run.faults=['kill-engine@3s']",) if work == "engine" else ()
    proc, run_dir = run_micro(every_kind(), "spark", tmp_path, f"run.work={work!r}", *faults)
    summary = json.loads((run_dir / "summary.json").read_text())
    (row,) = summary["workloads"]
    assert row["status"] == "completed" and row["verdict"] == "PASSED"
    run = json.loads((run_dir / "every-kind" / "engine" / "run.json").read_text())
    assert run["status"] == "completed" and run["resources"]["peak_rss_bytes"] > 0
    assert "PASSED" in proc.stderr and "summary:" in proc.stderr
    assert "PostgreSQL on 127.0.0.1" in proc.stderr
    assert (run_dir / "every-kind" / "postgres" / "server.log").stat().st_size > 0
    states = run_dir / "every-kind" / "engine" / "checkpoint" / "driver-cores"
    assert states.is_dir() == (work == "driver")
    # Events come through the JVM source; answers leave from the executors through the JVM writer
    # unless cores run on the driver, whose batch stage needs every answer collected there.
    connectors = run["plan"]["connectors"]
    assert connectors["source"] == "jvm"
    assert connectors["sink"] == ("driver-collect" if work == "driver" else "jvm"), connectors
    # The program names each query's plan and where its work runs.
    started = started_event(run_dir, "every-kind")
    plans = started["work"]["queries"]
    assert started["work"]["family"] == work and set(plans) == {q.id for q in every_kind().queries}
    stateful = ("q2s", "q2t", "q2g", "q3", "q4", "q5", "q7allall", "q7allone", "q7oneall", "q7oneone")
    where = {"engine": "(engine user code, JVM)", "python": "(kit Python in the executors)",
             "driver": "(kit Python on the driver)"}[work]
    assert all(plans[qid].endswith(where) for qid in stateful), plans
    if work == "engine":
        assert plans["q7allall"] == "Java PatternLogic in transformWithState, keyed by ID (engine user code, JVM)"
        assert plans["q2s"].startswith("Java CountWindowLogic") and plans["q5"].startswith("Java WindowJoinLogic")
        assert plans["q1"].endswith("(engine operators)") and plans["q7allallb"] == "computed once as q7allall, " \
            "its rows copied"
    if work == "driver":
        # The driver-collect plan times addBatch's halves: the collect (with the driver's cores) and the sink.
        stdout = [json.loads(line) for line in
                  (run_dir / "every-kind" / "engine" / "logs" / "engine.stdout.jsonl").read_text().splitlines()]
        timed = [e for e in stdout if e.get("event") == "batch" and e.get("foreach_batch")]
        assert timed and all(b["foreach_batch"]["collect"] + b["foreach_batch"]["sink"]
                             <= b["durations_ms"]["addBatch"] + 1 for b in timed)
    if faults:
        (fault,) = run["faults"]
        assert fault["kind"] == "kill-engine" and fault["restarted_ms"], fault
    # Windows, window joins and patterns keep state, in Spark's state store or on the driver, reported alike.
    assert run["resources"]["peak_state_bytes"] > 0


@pytest.mark.flink
def test_every_query_kind_matches_the_reference_on_flink(tmp_path):
    """The same workload in one Flink job (run.work = "engine"): the SQL queries (filters, the
    two-level window, the memory join) over one events table beside the Java logic's (count
    windows, the MEDIAN window, the window join, every pattern) and J3's lookup, each query's rows
    to its own stream (test_flink_micro_plans_e2e.py runs the other families; test_flink_jvm_e2e.py
    the operators family's SQL interval join)."""
    proc, run_dir = run_micro(every_kind(), "flink", tmp_path)
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert row["status"] == "completed" and row["verdict"] == "PASSED"
    program = (run_dir / "every-kind" / "program.py").read_text()
    for qid in ("q1", "q1b", "q4", "q6"):
        assert f"SELECT '{qid}' AS `stream`" in program
    assert "TABLE(HOP(" in program and "'q7oneall': 'jvm'" in program and "'q7allall': 'jvm'" in program
    assert "PostgreSQL on 127.0.0.1" in proc.stderr


def database_joins() -> Workload:
    """J3 only: two queries on a 50-row table in PostgreSQL, one filtering on a table column."""
    queries = (
        TableJoin("j3", "S1", "T", "database", "ID", "ID", ("S1.ID", "S1.A1", "T.ID", "T.T1", "T.T2")),
        TableJoin("j3f", "S1", "T", "database", "ID", "ID", ("S1.ID", "S1.TS", "T.T2"),
                  (Comparison("T.T1", "ge", 40.0),)),
    )
    return Workload("database-joins", "coverage", ("throughput",),
                    Dataset(streams=1, attributes=2, max_id=60, table_rows=50, table_attributes=2, seed=5),
                    Load("constant", 300.0, 5000), QuerySet("independent", queries), (Param("plan", "jdbc"),))


@pytest.mark.spark
@pytest.mark.e2e
def test_the_jdbc_plan_of_j3_matches_the_reference_on_spark(tmp_path):
    """J3 through Spark's own JDBC source and Debian's JDBC driver (a PySpark plan), against a
    real PostgreSQL."""
    _, run_dir = run_micro(database_joins(), "spark", tmp_path, 'run.database_join="jdbc"')
    wdir = run_dir / "database-joins"
    assert "'j3': 'jdbc_join'" in (wdir / "program.py").read_text()
    command = " ".join(json.loads((wdir / "engine" / "logs" / "command.json").read_text()))
    assert "spark.jars=/usr/share/java/postgresql" in command
    # A table join keeps no state (a stream-static join): none is reported.
    run = json.loads((wdir / "engine" / "run.json").read_text())
    assert not run["resources"]["peak_state_bytes"], run["resources"]["peak_state_bytes"]
