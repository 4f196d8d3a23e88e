"""Spark's real-time mode end to end (`run.trigger = "realtime"`, specs/TRANSLATION.md): the JVM feed
source and the JVM sink writer against the real harness, on every query kind the mode admits
(filters, a filter's identical copy, the in-memory table join, a time window on the JVM's paned
plan, count windows, window joins and patterns on the Java logic) and on Pairs' keyed plan in the
JVM, validated by the reference."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pyarrow.parquet as pq
import pytest

from kit.workload import (Aggregate, Comparison, CountWindowAggregation, Filter, Pattern, PatternEvent, QuerySet,
                          TableJoin, TimeWindowAggregation, TwoLevelAggregation, WindowJoin)
from kit.workload.suite import Dataset, Load, Param, Workload
from tests.cepkit_app.test_micro_e2e import run_micro
from tests.helpers import SHORT_PAIRS, cepkit_command

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def admitted_kind(kind: str) -> Workload:
    """Two streams at 300 events/s each for 6 s, 20 IDs, a 20-row table in Spark's memory: Q1 on S1
    (with its identical copy, planned once and copied to both streams) beside a distinct filter on
    S2 (all filters are one branch over the source), J2 on S2 with a condition on the table, or Q3
    per ID on S1 (2-s windows sliding by 500 ms, MEDIAN and STDEV among its aggregates; with its
    identical copy), or Q4 per ID on S2 (3-s windows of 1-s panes), both on the JVM's paned plan
    (cepkit.spark.WindowRealTime), or ("logic") a count window, a window join and Q7 under every
    consumption policy (keyed by ID, one-one without a key) in one JVM operator of the Java logic
    (cepkit.spark.LogicPlan).
    Real-time mode refuses a union of branches over one source (specs/TRANSLATION.md)."""
    if kind == "Q1":
        queries = (Filter("q1", "S1", ("ID", "A1", "A2"), (Comparison("ID", "le", 10),)),
                   Filter("q1b", "S1", ("ID", "A1", "A2"), (Comparison("ID", "le", 10),)),
                   Filter("q1c", "S2", ("ID", "A2"), (Comparison("A2", "gt", 50.0),)))
    elif kind == "Q3":
        aggs = (Aggregate("AVG", "A1", "avgA1"), Aggregate("STDEV", "A2", "sdA2"), Aggregate("MEDIAN", "A1", "medA1"),
                Aggregate("COUNT", None, "n"))
        queries = (TimeWindowAggregation("q3", "S1", 2000, 500, aggs, ("ID",)),
                   TimeWindowAggregation("q3b", "S1", 2000, 500, aggs, ("ID",)))
    elif kind == "Q4":
        aggs = (Aggregate("SUM", "A2", "sumA2"), Aggregate("STDEV", "A1", "sdA1"), Aggregate("MAX", "A1", "maxA1"))
        queries = (TwoLevelAggregation("q4", "S2", 3000, 1000, aggs, ("ID",)),)
    elif kind == "logic":
        aggs = (Aggregate("SUM", "A1", "sumA1"), Aggregate("MEDIAN", "A2", "medA2"), Aggregate("STDEV", "A1", "sdA1"))
        queries = (CountWindowAggregation("q2", "S1", 40, 3, aggs, ("ID",)),
                   WindowJoin("q5", "S1", "S2", 30, "ID", "ID", ("S1.ID", "S1.A1", "S2.A2")),
                   *(Pattern(f"q7{c.replace('-', '')}", PatternEvent("a1", "S1"),
                             PatternEvent("a2", "S2", (Comparison("A1", "gt", 60.0),)), 800, c,
                             ("a1.ID", "a1.TS", "a2.A1"), key=None if c == "one-one" else "ID")
                     for c in ("all-all", "all-one", "one-all", "one-one")))
    else:
        queries = (TableJoin("j2", "S2", "T", "memory", "ID", "ID", ("S2.ID", "S2.A1", "T.T1", "T.T3"),
                             (Comparison("T.T2", "gt", 30.0),)),)
    return Workload(f"realtime-{kind.lower()}", "coverage", ("throughput",),
                    Dataset(streams=2, attributes=2, max_id=20, table_rows=20, table_attributes=3, seed=11),
                    Load("constant", 300.0, 6000), QuerySet("independent", queries), (Param("trigger", "realtime"),))


@pytest.mark.parametrize("kind", ["Q1", "J2", "Q3", "Q4", "logic"])
def test_admitted_kinds_match_the_reference_in_real_time_mode(kind, tmp_path):
    workload = admitted_kind(kind)
    proc, run_dir = run_micro(workload, "spark", tmp_path, 'run.trigger="realtime"', "run.realtime_batch_ms=3000")
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert (row["status"], row["verdict"]) == ("completed", "PASSED")
    engine = run_dir / workload.name / "engine"
    run = json.loads((engine / "run.json").read_text())
    assert run["status"] == "completed"
    assert run["runtime_jar"] and "spark-runtime-" in run["runtime_jar"]
    assert (run["spec"]["trigger"], run["spec"]["realtime_batch_ms"]) == ("realtime", 3000)
    command = json.loads((engine / "logs" / "command.json").read_text())
    assert command[command.index("--trigger") + 1] == "realtime"
    # Filters and the in-memory join keep no state; the time window's pane records and the Java
    # logic's windows and candidates are in Spark's state store.
    assert bool(run["resources"]["peak_state_bytes"]) == (kind in ("Q3", "Q4", "logic"))
    # Started once the first batch (no event released yet) had ended: its boundary, the costly
    # one, falls before the load (specs/ENGINE_RUN.md, "Spark's real-time mode").
    events = [json.loads(line) for line in (engine / "logs" / "engine.stdout.jsonl").read_text().splitlines()]
    started = next(e for e in events if e["event"] == "started")
    first_batch = next(e for e in events if e["event"] == "batch")
    assert (first_batch["batch_id"], first_batch["input_rows"]) == (0, 0)
    assert first_batch["ended_ms"] <= started["harness_ts_ms"]


def test_quick_pairs_passes_in_real_time_mode_through_a_killed_engine(tmp_path):
    """The keyed plan in the JVM (cepkit.spark.PairsRealTime): quick SF=1 at the tests' short
    profile, the query run in real-time mode, its engine JVM killed 12 s into the replay: the
    restarted program re-runs the uncommitted batch, the sink drops the answers the dead batch
    had sent (by content: harness/replay_filter.py), and every Indicator and MarketOrder of the
    reference comes once."""
    run_dir = tmp_path / "run"
    proc = subprocess.run([*cepkit_command(), "pairs", "-c", str(SHORT_PAIRS), "--set", 'run.trigger="realtime"',
                           "--fault", "kill-engine@12s", "--out", str(run_dir)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["verdict"] == "PASSED"
    streams = {s["stream"]: s for s in summary["streams"]}
    for name in ("Indicator", "MarketOrder"):
        assert streams[name]["expected"] > 0
        assert (streams[name]["missing"], streams[name]["undue"], streams[name]["wrong"]) == (0, 0, 0), name
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["status"] == "completed" and run["spec"]["trigger"] == "realtime"
    assert run["engine"]["started"]["trigger"] == "realtime"
    assert run["resources"]["peak_state_bytes"] > 0         # the buckets' state, in Spark's state store
    (restart,) = run["restarts"]
    assert restart["fault"] == "kill-engine@12s" and restart["outcome"] == "restarted"
    assert run["engine_attempts"] == 2
    command = json.loads((run_dir / "engine" / "logs" / "command.json").read_text())
    assert "--attempt" not in command           # the first attempt's; the restart adds --attempt 2
    events = [json.loads(line) for line in (run_dir / "engine" / "logs" / "engine.stdout.jsonl").read_text().splitlines()]
    # What the dead batch had sent (since the last committed batch ended) the re-run sent again,
    # and the sink dropped it: none of it is in the output twice (the validator found no undue row).
    cut = max(e["trigger_ts_ms"] for e in events if e["event"] == "checkpoint" and e["trigger_ts_ms"] < restart["died_ms"])
    arrivals = np.concatenate([pq.read_table(f, columns=["arrivalTS"]).column(0).to_numpy()
                               for f in (run_dir / "engine" / "outputs").glob("*.parquet")])
    sent_by_dead_batch = int(((arrivals >= cut) & (arrivals <= restart["died_ms"])).sum())
    assert (run["sink"]["replayed_rows_dropped"] > 0) == (sent_by_dead_batch > 0), sent_by_dead_batch
