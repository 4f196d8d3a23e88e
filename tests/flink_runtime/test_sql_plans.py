"""Every Flink SQL query the translator writes for a shipped suite (full and quick) passes Flink's
own SQL validator and planner, with its result's columns fit for the sink, and every stateful
query builds its Java-logic plan (cepkit.flink.MicroFlink) over the feed's columns, before any run
needs it.

The full suites hold parameters no quick run reaches (Q7 at a 600-s interval, whose first
translation Flink refused: "Interval field value 600 exceeds precision of SECOND(2) field"), and a
search step that fails at start-up costs a whole run to find out. Here each query is planned
against the feed's event table as the runtime builds it (flink_runtime/tables.py: rowtime and its
watermark, one view per stream, the join table T), in one JVM, without running a job.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.environments import checkout_root, engine_python
from kit.shipped import SUITE_NAMES, suite_path
from kit.workload import read_suite
from translators.flink_micro import flink_plan, query_sql
from translators.micro_literal import query_literal

pytestmark = pytest.mark.flink

PLANNER = r'''
import json, sys, types
import pandas as pd
from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.table import StreamTableEnvironment
from flink_runtime.tables import events_table, logical_columns
from kit.records import join_table, micro_event

items = json.load(sys.stdin)
env = StreamExecutionEnvironment.get_execution_environment()
tables = StreamTableEnvironment.create(env)
schema = micro_event(20)
flink_types = {"int": Types.INT(), "long": Types.LONG(), "double": Types.DOUBLE(), "string": Types.STRING()}
fields = ([(f.name, flink_types[f.type]) for f in schema.fields]
          + [("offset", Types.LONG()), ("ingestTS", Types.LONG()), ("stream", Types.STRING())])
row = Row(*[0 if t in (Types.INT(), Types.LONG()) else "S1" if t == Types.STRING() else 1.0 for _, t in fields])
rows = env.from_collection([row], type_info=Types.ROW_NAMED([n for n, _ in fields], [t for _, t in fields]))
tables.create_temporary_view("events", events_table(types.SimpleNamespace(tables=tables), rows, fields))
for name in sorted({s for item in items for s in item["inputs"]}):
    tables.create_temporary_view(name, tables.sql_query(f"SELECT * FROM events WHERE `stream` = '{name}'"))
table = join_table(20)
tables.create_temporary_view("T", tables.from_pandas(pd.DataFrame({n: [1 if n == "ID" else 1.0] for n in table.names})))
refused = []
for item in items:
    try:
        result = tables.sql_query(item["sql"])
        logical_columns(result)
        result.explain()
    except Exception as e:
        lines = [l.strip() for l in str(e).splitlines() if "Exception: " in l] or str(e).splitlines()[:1]
        refused.append(f"{item['name']}: {lines[-1][:300]}")        # the innermost cause
print(json.dumps({"planned": len(items), "refused": refused}))
'''


def _sql_queries() -> list[dict]:
    items = []
    for name in SUITE_NAMES:
        for quick in (False, True):
            for w in read_suite(suite_path(name, quick=quick)).workloads:
                for q in map(query_literal, w.queries):
                    if flink_plan(q, "operators")[0] == "sql":       # every SQL any family plans
                        items.append({"name": f"{name}{'-quick' if quick else ''}/{w.name}/{q['id']}",
                                      "sql": query_sql(q), "inputs": list(q["inputs"])})
    return items


# The check can fail: an interval literal Flink refuses, planned beside the shipped queries.
REFUSED = {"name": "refused-on-purpose", "sql": "SELECT ID FROM S1 WHERE rowtime < rowtime + INTERVAL '600' SECOND",
           "inputs": ["S1"]}


def test_every_shipped_sql_query_is_planned_by_flink():
    items = _sql_queries()
    assert any("w600s" in item["name"] for item in items)      # the query that first failed is among them
    proc = subprocess.run([engine_python("flink"), "-c", PLANNER], input=json.dumps([*items, REFUSED]),
                          capture_output=True, text=True, timeout=600, cwd=checkout_root(),
                          env={"PYTHONPATH": str(checkout_root())})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["planned"] == len(items) + 1
    assert len(out["refused"]) == 1 and out["refused"][0].startswith("refused-on-purpose: ")
    assert "precision" in out["refused"][0]


JAVA_PLANNER = r'''
import json, sys
from pyflink.common import Row, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway
from kit.records import micro_event

spec = json.load(sys.stdin)
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.add_jars("file://" + spec["jar"])
schema = micro_event(20)
flink_types = {"int": Types.INT(), "long": Types.LONG(), "double": Types.DOUBLE(), "string": Types.STRING()}
fields = ([(f.name, flink_types[f.type]) for f in schema.fields]
          + [("offset", Types.LONG()), ("ingestTS", Types.LONG()), ("stream", Types.STRING())])
row = Row(*[0 if t in (Types.INT(), Types.LONG()) else "S1" if t == Types.STRING() else 1.0 for _, t in fields])
rows = env.from_collection([row], type_info=Types.ROW_NAMED([n for n, _ in fields], [t for _, t in fields]))
micro = get_gateway().jvm.cepkit.flink.MicroFlink
refused, built = [], 0
for i, item in enumerate(spec["items"]):
    try:
        query = json.dumps({**item["query"], "id": f"q{i}"})
        j_out = micro.plan(rows._j_data_stream, query, i, 2)
        names = list(j_out.getType().getFieldNames())
        assert names == ["stream", *item["query"]["fields"], "ingestTS"], names
        DataStream(j_out).map(lambda r: 0, output_type=Types.INT())
        built += 1
    except Exception as e:
        lines = [l.strip() for l in str(e).splitlines() if "Exception: " in l] or str(e).splitlines()[:1]
        refused.append(f"{item['name']}: {lines[0][:300]}")
plan = json.loads(env.get_execution_plan())
print(json.dumps({"built": built, "refused": refused, "nodes": len(plan["nodes"])}))
'''


def test_every_shipped_stateful_query_builds_its_java_plan_in_flink():
    """Every shipped query of a stateful kind (count and time windows, window joins, patterns) is
    built as its Java-logic plan (`run.work = "jvm"`: cepkit.flink.MicroFlink over the feed's
    columns, its output Rows the stream, its fields and ingestTS), in one JVM, without running a
    job; a literal the Java logic refuses is reported."""
    from harness.flink_jar import build_jar

    items = []
    for name in SUITE_NAMES:
        for quick in (False, True):
            for w in read_suite(suite_path(name, quick=quick)).workloads:
                for q in map(query_literal, w.queries):
                    if flink_plan(q, "jvm")[0] == "jvm" and q["kind"] != "table_join":
                        items.append({"name": f"{name}{'-quick' if quick else ''}/{w.name}/{q['id']}", "query": q})
    assert {item["query"]["kind"] for item in items} == {"count_window", "time_window", "window_join", "pattern"}
    # The check can fail: a count window aggregating a field the feed's events do not have.
    q2 = next(item["query"] for item in items if item["query"]["kind"] == "count_window"
              and item["query"]["aggregates"][0][1])
    bad = {"name": "refused-on-purpose",
           "query": {**q2, "aggregates": [[q2["aggregates"][0][0], "A99", q2["aggregates"][0][2]],
                                          *q2["aggregates"][1:]]}}
    proc = subprocess.run([engine_python("flink"), "-c", JAVA_PLANNER],
                          input=json.dumps({"jar": str(build_jar()), "items": [*items, bad]}),
                          capture_output=True, text=True, timeout=600, cwd=checkout_root(),
                          env={"PYTHONPATH": str(checkout_root())})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["built"] == len(items) and out["nodes"] > len(items), out
    assert len(out["refused"]) == 1 and out["refused"][0].startswith("refused-on-purpose: "), out["refused"]
    assert "the events have no column A21" in out["refused"][0]
