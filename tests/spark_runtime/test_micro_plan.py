"""The planning rules of spark_runtime/micro_plan.py: which queries are computed once for a set of
identical ones, the columns the stateful operators get, the plans a program names; and, with a Spark
session (e2e), the one-shuffle limit of the Python source and the JVM plans analysed by Spark."""

from __future__ import annotations

import pytest

from kit.shipped import suite_path
from kit.workload import read_suite
from spark_runtime.micro_plan import shared_queries
from translators.micro_literal import query_literal


def _literals(suite: str, workload: str):
    (w,) = [w for w in read_suite(suite_path(suite, quick=True)).workloads if w.name == workload]
    return [query_literal(q) for q in w.queries]


def test_identical_queries_are_planned_once_and_fanned_out_to_every_id():
    qs = _literals("scalability", "scalability-identical-n64")
    assert shared_queries(qs) == {"q01": [q["id"] for q in qs]} and len(qs) == 64


def test_queries_that_differ_in_anything_but_their_id_are_planned_apart():
    qs = _literals("scalability", "scalability-similar-n4")
    assert shared_queries(qs) == {q["id"]: [q["id"]] for q in qs}
    one = _literals("count-windows", "count-windows-window-sliding-r50-sum")[0]
    other = dict(one, id="q2b", rows=51)
    same = dict(one, id="q2c")
    assert shared_queries([one, other, same]) == {"q2": ["q2", "q2c"], "q2b": ["q2b"]}


def test_the_stateful_operator_gets_only_the_columns_its_cores_name():
    from spark_runtime.micro_plan import needed_columns
    cols = ["ID", "A1", "A2", "A3", "TS", "stream", "offset", "ingestTS"]
    (q2,) = _literals("count-windows", "count-windows-window-sliding-r50-sum")
    assert needed_columns(cols, [q2]) == ["ID", "A1", "TS", "offset", "ingestTS"]
    (j1,) = _literals("joins", "joins-j1-window-size-s100")
    assert needed_columns(cols, [j1]) == ["ID", "A1", "A2", "TS", "stream", "offset", "ingestTS"]
    assert needed_columns(cols, [q2, j1]) == needed_columns(cols, [j1])


def test_a_plan_names_every_querys_plan():
    """MicroPlan checks the program's PLANS: one known plan per query (translators/spark_micro.py)."""
    from spark_runtime.micro_plan import MicroPlan

    (q2,) = _literals("count-windows", "count-windows-window-sliding-r50-sum")
    fields = ("stream string", "ingestTS long")
    assert MicroPlan("w", (q2,), fields, False, None, {"q2": "jvm_logic"}).plan_of(q2) == "jvm_logic"
    for plans, why in (({}, "every query"), (None, "every query"), ({"q2": "by-kind"}, "unknown plan")):
        with pytest.raises(ValueError, match=why):
            MicroPlan("w", (q2,), fields, False, None, plans)


@pytest.mark.spark
@pytest.mark.e2e
def test_shuffles_over_the_python_source_are_refused_and_the_jvm_plans_analysed(tmp_path):
    """A plan that shuffles the source more than once per batch is refused over the kit's Python data
    source (Spark 4.3's bug, specs/TRANSLATION.md) and planned over the JVM source: the Java logic's
    operator and a JVM time window, each a transformWithState, analysed by Spark."""
    import shutil
    import sys

    from pyspark.sql import SparkSession

    from harness.runtime_jar import build_jar
    from kit.errors import CepkitError
    from kit.workload import Aggregate, TimeWindowAggregation
    from spark_runtime.micro_plan import MicroPlan, build_micro, python_source
    from spark_runtime.source import FORMAT, DriverSource
    from tests.helpers import with_class_archive
    from translators.spark_micro import output_fields

    if shutil.which("javac") is None:
        pytest.skip("needs javac (a JDK), as scripts/setup.sh installs")
    jar = build_jar(sys.executable)
    (q2,) = _literals("count-windows", "count-windows-window-sliding-r50-sum")
    q3 = query_literal(TimeWindowAggregation("q3", "S1", 2000, 500, (Aggregate("AVG", "A1", "avgA1"),), ("ID",)))
    plan = MicroPlan("w", (q2, q3), tuple(output_fields([q2, q3])), False, None,
                     {"q2": "jvm_logic", "q3": "jvm_window"}, shuffles=2)
    ddl = "ID int, A1 double, TS long, offset long, ingestTS long"
    spark = (with_class_archive(SparkSession.builder).master("local[1]").appName("cepkit-test-shuffles")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.extraClassPath", str(jar)).getOrCreate())
    try:
        spark.dataSource.register(DriverSource)
        options = {"host": "127.0.0.1", "port": "1"}
        python = spark.readStream.format(FORMAT).schema(ddl).options(**options).load()
        jvm = spark.readStream.format("cepkit.spark.FeedSource").schema(ddl).options(**options).load()
        assert python_source(python) and not python_source(jvm)
        with pytest.raises(CepkitError, match="shuffles the source's events 2 times per batch"):
            build_micro(spark, python, plan)
        df, streams = build_micro(spark, jvm, plan)
        assert streams == {"q2": [*q2["fields"], "ingestTS"], "q3": [*q3["fields"], "ingestTS"]}
        analysed = df._jdf.queryExecution().analyzed().toString()
        assert analysed.count("TransformWithState") == 2, analysed
    finally:
        spark.stop()
