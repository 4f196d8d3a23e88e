"""Every microbenchmark query kind on Flink under `cepkit micro`, in the plan families of run.work
(specs/TRANSLATION.md, "Microbenchmarks on Flink"), each query validated with nothing missing,
undue or wrong:
- `engine` (the default): Flink SQL where it says the query, the kit's Java logic
  (cepkit.flink.MicroFlink) for the rest and J3 as a JDBC lookup in Flink's async I/O operator
  (cepkit.flink.MicroLookup), read and answered in the JVM with no Python operator in the job, the
  engine killed after its first checkpoint and restored from it (the Java state: logic objects,
  keyed candidates and their timers, lookups in flight, comes back from the checkpoint); asked for
  two splits, the feed is read as one (the Java logic needs each key's events in feed order) and
  the run says so;
- `engine` through the Python feed and emitter (run.connectors = "python"): the Java queries and
  the JDBC lookup read the feed's ranges exploded into Rows, in feed order;
- `jvm`: the Java logic for every kind that has it;
- `python`: the kit's Python cores and J3's Python lookup in a keyed Python function.
Each run's `started` event and run.json say the family and every query's plan."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from kit.workload.suite import Load
from tests.cepkit_app.test_micro_e2e import every_kind, run_micro

pytestmark = [pytest.mark.flink, pytest.mark.postgres]

JAVA = "Java logic in a KeyedProcessFunction"
LOOKUP = "Java JDBC lookup"


def _every_kind(seconds: int):
    """every_kind(), `seconds` long."""
    return dataclasses.replace(every_kind(), load=Load("constant", 300.0, seconds * 1000))


def _started(wdir) -> list[dict]:
    return [json.loads(line) for line in (wdir / "engine" / "logs" / "engine.stdout.jsonl").read_text().splitlines()
            if '"started"' in line]


def _tasks(wdir) -> set[str]:
    (log,) = (wdir / "engine" / "logs").glob("flink-*.log")
    return {m.group(1) for m in re.finditer(r"Task +\[\] - (.+?) \(\d+/\d+\)#\d+ \([^)]*\) switched from "
                                            r"INITIALIZING to RUNNING", log.read_text())}


def _check_work(wdir, family: str, plans: dict[str, str]) -> dict:
    """The started events and run.json name the family and each query's plan (a prefix of its words)."""
    for event in _started(wdir):
        assert event["work"]["family"] == family
        for qid, plan in plans.items():
            assert event["work"]["queries"][qid].startswith(plan), (qid, event["work"]["queries"][qid])
    run = json.loads((wdir / "engine" / "run.json").read_text())
    assert run["plan"]["work"]["family"] == family
    return run


def test_every_kind_on_the_engine_plans_in_the_jvm_survives_a_killed_engine(tmp_path):
    workload = _every_kind(20)
    proc, run_dir = run_micro(workload, "flink", tmp_path, "run.source_partitions=2", "run.faults=['kill-engine@12s']")
    wdir = run_dir / workload.name
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert row["status"] == "completed" and row["verdict"] == "PASSED"
    java = ("q2s", "q2t", "q2g", "q2sb", "q3", "q5", "q7allall", "q7allone", "q7oneall", "q7oneone")
    run = _check_work(wdir, "engine", {**{q: JAVA for q in java}, "q6db": LOOKUP, "q1": "Flink SQL",
                                       "q4": "Flink SQL", "q6": "Flink SQL"})
    (restart,) = run["restarts"]
    assert restart["outcome"] == "restarted" and restart["restored_from"]
    started = _started(wdir)
    assert len(started) == 2
    for event in started:
        c = event["connectors"]
        assert (c["source"], c["sink"]) == ("jvm", "jvm") and "read the feed as one split" in c["why"], c
    program = (wdir / "program.py").read_text()
    assert "read and answered in the JVM" in program and "Plan family run.work = \"engine\"" in program
    # The Java queries' operators run in both attempts' jobs; no Python operator anywhere.
    tasks = _tasks(wdir)
    for qid in java:
        assert any(t.startswith(f"cepkit {qid} ") and "(JVM logic" in t for t in tasks), (qid, tasks)
        assert any(f"cepkit sink (JVM): {qid}" in t for t in tasks), (qid, tasks)
    assert any(t.startswith("cepkit q6db table_join (JVM JDBC lookup)") for t in tasks), tasks
    python = ("cepkit_feed_trigger", "cepkit feed ->", "cepkit events", "cepkit python")
    assert not [t for t in tasks if any(p in t for p in python) or re.search(r"cepkit sink: ", t)], tasks
    (log,) = (wdir / "engine" / "logs").glob("flink-*.log")
    assert "registering reader for parallel task 1" not in log.read_text()      # one split, one reader
    assert "PASSED" in proc.stderr and "PostgreSQL on 127.0.0.1" in proc.stderr


def test_every_kind_on_the_engine_plans_through_the_python_feed(tmp_path):
    """run.connectors = "python": the Python feed, its ranges exploded into Rows for the SQL and
    Java queries and the JDBC lookup (stamped with TS and its watermark in the JVM)."""
    _, run_dir = run_micro(every_kind(), "flink", tmp_path, "run.connectors='python'")
    wdir = run_dir / "every-kind"
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert row["status"] == "completed" and row["verdict"] == "PASSED"
    _check_work(wdir, "engine", {"q2s": JAVA, "q3": JAVA, "q5": JAVA, "q7oneall": JAVA, "q7oneone": JAVA,
                                 "q1": "Flink SQL", "q6db": LOOKUP})
    (started,) = _started(wdir)
    assert started["connectors"]["source"] == "python"
    tasks = _tasks(wdir)
    assert any(t.startswith("cepkit q5 ") and "(JVM logic" in t for t in tasks), tasks
    assert any("cepkit events" in t for t in tasks), tasks


@pytest.mark.parametrize("family", ["jvm", "python"])
def test_every_kind_in_a_plan_family(family, tmp_path):
    """`jvm`: the Java logic for every kind with a twin (the keyed all-all pattern and the HOP
    windows too); `python`: the Python cores and J3's Python lookup for every stateful kind."""
    _, run_dir = run_micro(every_kind(), "flink", tmp_path, f"run.work={family!r}")
    wdir = run_dir / "every-kind"
    (row,) = json.loads((run_dir / "summary.json").read_text())["workloads"]
    assert row["status"] == "completed" and row["verdict"] == "PASSED"
    stateful = ("q2s", "q3", "q4", "q5", "q7allall", "q7allone", "q7oneall", "q7oneone")
    plan = JAVA if family == "jvm" else "Python core"
    _check_work(wdir, family, {**{q: plan for q in stateful}, "q1": "Flink SQL", "q6": "Flink SQL",
                               "q6db": LOOKUP if family == "jvm" else "Python PostgreSQL lookup"})
    program = (wdir / "program.py").read_text()
    assert "TABLE(HOP(" not in program and "a2.rowtime" not in program     # no HOP window, no interval join
    (started,) = _started(wdir)
    assert started["connectors"]["source"] == ("jvm" if family == "jvm" else "python")
