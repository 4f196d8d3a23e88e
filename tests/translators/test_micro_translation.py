"""Microbenchmark translation and run validation without Spark: every quick-suite workload becomes
a tidy, importable program for every engine; a run's output log is validated against the reference
(shifted time fields, missing/undue/wrong rows), with the log written by the real harness sink."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util

import numpy as np
import pyarrow as pa
import pytest

from datagen.micro import generate_micro
from harness.sink import SinkServer
from kit.wire.sink_client import SinkClient
from kit.config import load_config
from kit.errors import CepkitError
from kit.shipped import specs_dir
from kit.workload import (Aggregate, CountWindowAggregation, Filter, QuerySet, TableJoin, TimeWindowAggregation,
                          output_schema, read_suite)
from kit.workload.suite import Dataset, Load, Workload
from translators.output import write_program
from kit.engines import ENGINES
from tests.helpers import program_literals, with_class_archive
from translators.registry import engine_module
from translators.request import MicroTranslation
from translators.flink_micro import flink_plan
from translators.spark_micro import output_fields
from translators.micro_literal import query_literal
from validator.micro_reference import expected_for_dataset
from validator.micro_run import validate_micro_run

QUICK_SUITES = ("filtering", "count-windows", "time-windows", "joins", "patterns", "adaptivity", "scalability")


def _import(path):
    spec = importlib.util.spec_from_file_location(f"micro_prog_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _table_needed(w: Workload) -> bool:
    return any(isinstance(q, TableJoin) for q in w.queries)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("suite", QUICK_SUITES)
def test_every_quick_workload_translates_to_a_tidy_program(engine, suite, tmp_path):
    translated = 0
    for w in read_suite(specs_dir() / "suites" / f"{suite}-quick.xml").workloads:
        table = tmp_path / "T.parquet" if _table_needed(w) else None
        req = MicroTranslation(w, table, f"{w.name}.xml", "cd" * 32)
        text = engine_module(engine).translate_micro(req)
        assert all(len(line) <= 120 and line == line.rstrip() for line in text.splitlines())
        path = write_program(text, tmp_path / w.name / "program.py")
        literals = program_literals(path)
        assert [q["id"] for q in literals["QUERIES"]] == [q.id for q in w.queries]
        # The program holds each query's literal as it is; Spark's program names each query's plan apart.
        assert list(literals["QUERIES"]) == list(map(query_literal, w.queries))
        translated += 1
        if engine == "flink":       # SQL for exactly the queries Flink SQL expresses
            assert set(literals["SQL"]) == {q["id"] for q in literals["QUERIES"] if flink_plan(q)[0] == "sql"}
            assert all(f"SELECT '{qid}' AS `stream`" in sql for qid, sql in literals["SQL"].items())
            continue
        assert set(literals["PLANS"]) == {q.id for q in w.queries}
        assert literals["WORK"]["family"] == "engine" and set(literals["WORK"]["queries"]) == set(literals["PLANS"])
        for q in w.queries:
            want = {"Filter": "filter", "CountWindowAggregation": "jvm_logic", "TimeWindowAggregation": "jvm_window",
                    "TwoLevelAggregation": "jvm_window", "WindowJoin": "jvm_logic", "Pattern": "jvm_logic",
                    "TableJoin": "broadcast_join" if getattr(q, "storage", "") == "memory" else "lookup_join"}
            assert literals["PLANS"][q.id] == want[type(q).__name__], q.id
        module = _import(path)
        for q in w.queries:
            assert module.PLAN.output_streams[q.id] == [*output_schema(q).names, "ingestTS"]
        assert set(module.PLAN.out_columns) >= {"stream", "ingestTS"}
    assert translated > 0


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_table_path_of_any_length_stays_a_tidy_program(engine, tmp_path):
    w = next(w for w in read_suite(specs_dir() / "suites" / "joins-quick.xml").workloads
             if any(isinstance(q, TableJoin) and q.storage == "memory" for q in w.queries))
    table = tmp_path.joinpath(*["a-rather-long-directory-name-" + "x" * 20] * 6, "it's T.parquet")
    text = engine_module(engine).translate_micro(MicroTranslation(w, table, "w.xml", "cd" * 32))
    assert all(len(line) <= 120 for line in text.splitlines())
    assert program_literals(write_program(text, tmp_path / "p" / "program.py"))["TABLE_PATH"] == str(table)


def test_conflicting_output_column_types_are_refused():
    a = Filter("a", "S1", ("ID",))
    b = CountWindowAggregation("b", "S1", 5, 1, (Aggregate("COUNT", None, "ID"),))
    with pytest.raises(CepkitError, match="output column ID is long here but int"):
        output_fields([query_literal(a), query_literal(b)])


@pytest.fixture
def filter_run(tmp_path):
    """A two-query workload, its dataset, and a sink that writes an output log."""
    w = Workload("w", "x", ("throughput",), Dataset(streams=1, attributes=2, max_id=10, seed=3),
                 Load("constant", 200.0, 3000),
                 QuerySet("independent", (Filter("f", "S1", ("ID", "A1"), ()),
                                          CountWindowAggregation("c", "S1", 20, 20, (Aggregate("MAX", "A2", "mx"),),
                                                                 ("ID",)))))
    cfg = load_config(settings=w.micro_settings())
    data = generate_micro(cfg.micro, tmp_path / "data").directory
    return w, data, tmp_path / "outputs"


def _write_log(out, streams: dict, shift: int):
    clocks = {"run_start_wall_ms": 1_800_000_060_000, "sim_start_ms": 1_800_000_060_000 - shift, "speed": 1.0}
    with SinkServer(out) as sink, SinkClient(port=sink.port) as client:
        for name, df in streams.items():
            client.emit(name, 0, pa.Table.from_pandas(df, preserve_index=False))
        sink.finish(clocks)


def test_a_log_equal_to_the_reference_after_the_shift_passes(filter_run):
    w, data, out = filter_run
    expected = expected_for_dataset(w.query_set, data)
    shift = 7 * 60_000
    shifted = {k: v.assign(inputTS=v["inputTS"] + shift) for k, v in expected.items()}
    _write_log(out, shifted, shift)
    outcome, latencies = validate_micro_run(w, data, out)
    assert outcome.verdict == "PASSED", outcome.to_dict()
    assert [q.comparison.expected for q in outcome.queries] == [len(expected["f"]), len(expected["c"])]
    assert len(expected["f"]) > 100 and len(expected["c"]) > 5
    assert len(latencies) == len(expected["f"]) + len(expected["c"])


def test_missing_undue_and_wrong_rows_are_counted(filter_run):
    w, data, out = filter_run
    expected = expected_for_dataset(w.query_set, data)
    f = expected["f"].iloc[1:].copy()                       # one missing
    c = expected["c"].copy()
    c.loc[c.index[0], "mx"] += 1.0                          # one wrong
    c = c._append(c.iloc[[1]])                              # one undue (a duplicate)
    _write_log(out, {"f": f, "c": c.reset_index(drop=True)}, 0)
    outcome, _ = validate_micro_run(w, data, out)
    by_id = {q.query_id: q.comparison for q in outcome.queries}
    assert outcome.verdict == "FAILED"
    assert (by_id["f"].missing, by_id["f"].undue, by_id["f"].wrong) == (1, 0, 0)
    assert (by_id["c"].missing, by_id["c"].undue, by_id["c"].wrong) == (0, 1, 1)


def test_time_fields_are_shifted_back(filter_run, tmp_path):
    """A selected TS is compared in the dataset's time: an unshifted one would be wrong."""
    w, data, out = filter_run
    w2 = Workload("w2", "x", ("throughput",), w.dataset, w.load,
                  QuerySet("independent", (Filter("g", "S1", ("ID", "TS"), ()),)))
    expected = expected_for_dataset(w2.query_set, data)
    _write_log(out, {"g": expected["g"].assign(TS=expected["g"]["TS"] + 60_000)}, 60_000)
    outcome, _ = validate_micro_run(w2, data, out)
    c = outcome.queries[0].comparison                       # inputTS was not shifted: no row pairs up
    assert c.missing == c.undue == len(expected["g"]) > 0 and outcome.verdict == "FAILED"
    out2 = tmp_path / "outputs2"
    g = expected["g"]
    _write_log(out2, {"g": g.assign(TS=g["TS"] + 60_000, inputTS=g["inputTS"] + 60_000)}, 60_000)
    outcome, _ = validate_micro_run(w2, data, out2)
    assert outcome.verdict == "PASSED"
    assert np.all(g["TS"].to_numpy() == g["inputTS"].to_numpy())


def _plans(text: str) -> dict:
    return program_literals_text(text)["PLANS"]


def test_plan_families_place_each_stateful_kind():
    """run.work (specs/TRANSLATION.md, "Plan families"): engine and jvm run Q2, Q3, Q4, J1 and every
    pattern in the JVM; operators puts Q3 on Spark's window() and a keyed all-all pattern on the
    interval join (Q4, the other patterns and the rest in the JVM); python and driver run every
    stateful kind on the kit's Python cores, in the executors or on the driver. Filters and table
    joins are Spark's operators in every family; the program says each query's plan and where its
    work runs."""
    from kit.workload import Pattern, PatternEvent, TwoLevelAggregation, WindowJoin

    q2 = CountWindowAggregation("q2", "S1", 10, 1, (Aggregate("SUM", "A1", "s"),), ("ID",))
    q3 = TimeWindowAggregation("q3", "S1", 4000, 1000, (Aggregate("AVG", "A1", "a"),))
    q4 = TwoLevelAggregation("q4", "S1", 4000, 1000, (Aggregate("MAX", "A1", "m"),), ("ID",))
    j1 = WindowJoin("j1", "S1", "S2", 10, "ID", "ID", ("S1.ID", "S2.A1"))
    q7 = Pattern("q7", PatternEvent("a1", "S1"), PatternEvent("a2", "S2"), 1000, "all-all", ("a1.ID", "a2.A1"),
                 key="ID")
    q7one = dataclasses.replace(q7, id="q7one", consumption="one-all")
    q7whole = dataclasses.replace(q7, id="q7whole", key=None)
    q1 = Filter("q1", "S1", ("ID",), ())
    queries = (q1, q2, q3, q4, j1, q7, q7one, q7whole)
    w = Workload("fam", "x", ("throughput",), Dataset(streams=2, attributes=1, max_id=10, seed=1),
                 Load("constant", 100.0, 1000), QuerySet("independent", queries))
    jvm = {"q1": "filter", "q2": "jvm_logic", "q3": "jvm_window", "q4": "jvm_window", "j1": "jvm_logic",
           "q7": "jvm_logic", "q7one": "jvm_logic", "q7whole": "jvm_logic"}
    want = {"engine": jvm, "jvm": jvm,
            "operators": {**jvm, "q3": "spark_window", "q7": "interval_join"},
            "python": {**{q.id: "python_core" for q in queries}, "q1": "filter"},
            "driver": {**{q.id: "driver_core" for q in queries}, "q1": "filter"}}
    spark = engine_module("spark")
    for work, plans in want.items():
        text = spark.translate_micro(MicroTranslation(w, None, work=work))
        assert _plans(text) == plans, work
        assert "CORES_PLAN" not in text and f"Plan family (run.work): {work}." in text
        work_literal = program_literals_text(text)["WORK"]
        assert work_literal["family"] == work
        where = {"engine": "(engine user code, JVM)", "jvm": "(engine user code, JVM)",
                 "python": "(kit Python in the executors)", "driver": "(kit Python on the driver)"}.get(work)
        for qid, plan in plans.items():
            said = work_literal["queries"][qid]
            if plan in ("jvm_logic", "jvm_window"):
                assert said.endswith("(engine user code, JVM)"), said
            elif plan in ("filter", "spark_window", "interval_join"):
                assert said.endswith("(engine operators)"), said
            else:
                assert said.endswith(where), said
    said = program_literals_text(spark.translate_micro(MicroTranslation(w, None)))["WORK"]["queries"]
    assert said["q7"] == "Java PatternLogic in transformWithState, keyed by ID (engine user code, JVM)"
    assert said["q7whole"] == ("Java PatternLogic in transformWithState, one group: the whole stream "
                               "(engine user code, JVM)")
    assert said["q2"].startswith("Java CountWindowLogic") and said["j1"].startswith("Java WindowJoinLogic")
    with pytest.raises(CepkitError, match="work"):
        MicroTranslation(w, None, work="fast")
    with pytest.raises(CepkitError, match="work"):
        MicroTranslation(w, None, work="gpu")


def program_literals_text(text: str) -> dict:
    """The literal assignments of a program's text (QUERIES, PLANS, WORK, ...)."""
    tree = ast.parse(text)
    return {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()
            and isinstance(node.value, (ast.Dict, ast.Tuple, ast.List, ast.Constant))}


def test_shuffles_over_the_source_are_counted_for_the_python_source_check():
    """Every plan family may shuffle the source more than once per batch with the JVM source; the
    program counts its shuffles (SHUFFLES) so that it refuses the kit's Python source beside more
    than one (Spark 4.3's Python data source bug, specs/TRANSLATION.md): a window or interval-join
    query one each, all Java-logic queries one, all Python-core queries one, identical queries once."""
    from translators.spark_micro import query_plan, shuffles

    w = next(x for x in read_suite(specs_dir() / "suites" / "time-windows-quick.xml").workloads if "q3" in x.name)
    (q3,) = w.queries
    q2 = CountWindowAggregation("q2", "S1", 10, 1, (Aggregate("SUM", "A1", "s"),), ("ID",))
    q2b = dataclasses.replace(q2, id="q2b", rows=20)
    q3b = dataclasses.replace(q3, id="q3b")
    lits = [query_literal(q) for q in (q3, q3b, q2, q2b)]
    count = {work: shuffles(lits, {q["id"]: query_plan(q, work) for q in lits})
             for work in ("engine", "operators", "python", "driver")}
    assert count == {"engine": 2, "operators": 2, "python": 1, "driver": 0}
    text = engine_module("spark").translate_micro(MicroTranslation(
        dataclasses.replace(w, query_set=QuerySet("independent", (q3, q3b, q2, q2b))), None))
    assert program_literals_text(text)["SHUFFLES"] == 2


def test_jdbc_plan_reads_the_database_table_through_spark_for_j3_only(tmp_path):
    joins = read_suite(specs_dir() / "suites" / "joins-quick.xml").workloads
    j2 = next(w for w in joins if "j2" in w.name)
    j3 = next(w for w in joins if "j3" in w.name)
    spark = engine_module("spark")
    jdbc = spark.translate_micro(MicroTranslation(j3, None, database_join="jdbc"))
    assert "Spark's JDBC source re-read per batch" in jdbc and "mapInPandas" not in jdbc
    module = _import(write_program(jdbc, tmp_path / "j3" / "program.py"))
    assert [q["kind"] for q in module.QUERIES] == ["table_join"] and set(module.PLANS.values()) == {"jdbc_join"}
    lookup = spark.translate_micro(MicroTranslation(j3, None))
    assert "key lookups in PostgreSQL per task and batch in mapInPandas" in lookup and "jdbc_join" not in lookup
    table = tmp_path / "T.parquet"
    assert spark.translate_micro(MicroTranslation(j2, table, database_join="jdbc")) == \
        spark.translate_micro(MicroTranslation(j2, table))       # an in-memory table is not affected
    with pytest.raises(CepkitError, match="database_join"):
        MicroTranslation(j3, None, database_join="odbc")


@pytest.mark.spark
@pytest.mark.e2e
def test_pattern_predicates_are_pushed_into_the_routing(tmp_path):
    """Q7 push-down (thesis 4.5.4): an event that satisfies neither element's Where is not routed
    to the pattern's group, so it never crosses the shuffle; other queries still get every event."""
    from pyspark.sql import SparkSession, functions as F

    from spark_runtime.micro_plan import _routed_to

    spark = (with_class_archive(SparkSession.builder).master("local[1]").appName("cepkit-test-pushdown")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
    try:
        events = spark.createDataFrame([("S1", 5.0), ("S1", 50.0), ("S1", 95.0), ("S2", 5.0), ("S2", 50.0)],
                                       "stream string, A1 double")
        both = {"kind": "pattern", "first": {"stream": "S1", "where": [["A1", "lt", 10.0]]},
                "second": {"stream": "S1", "where": [["A1", "gt", 90.0]]}}
        second_only = {"kind": "pattern", "first": {"stream": "S2", "where": []},
                       "second": {"stream": "S1", "where": [["A1", "gt", 90.0]]}}
        window = {"kind": "count_window", "inputs": ["S1"]}

        def routed(q):
            return sorted(tuple(r) for r in events.where(_routed_to(q, F.col("stream"))).collect())

        assert routed(both) == [("S1", 5.0), ("S1", 95.0)]
        assert routed(second_only) == [("S1", 95.0), ("S2", 5.0), ("S2", 50.0)]
        assert routed(window) == [("S1", 5.0), ("S1", 50.0), ("S1", 95.0)]
    finally:
        spark.stop()


def test_keyed_all_all_patterns_are_an_interval_join_where_they_can_be():
    """run.work = "operators" plans a keyed all-all pattern (Q7) as Spark's stream-stream interval
    self-join, beside any other shuffle (the JVM source takes several); the other consumption
    policies and a pattern without a key run on the Java logic, and so does every pattern in the
    other JVM families; real-time mode takes the Java logic whatever the family
    (specs/TRANSLATION.md)."""
    from kit.workload import Pattern
    from translators.spark_micro import joinable_pattern

    spark = engine_module("spark")
    w = next(x for x in read_suite(specs_dir() / "suites" / "patterns.xml").workloads
             if x.name == "patterns-interval-w60s")
    (q7,) = w.queries
    assert isinstance(q7, Pattern) and joinable_pattern(query_literal(q7))
    assert _plans(spark.translate_micro(MicroTranslation(w, None))) == {q7.id: "jvm_logic"}   # engine: the default
    program = spark.translate_micro(MicroTranslation(w, None, work="operators"))
    assert _plans(program) == {q7.id: "interval_join"} and "Spark stream-stream interval self-join on ID" in program
    assert _plans(spark.translate_micro(MicroTranslation(w, None, work="jvm"))) == {q7.id: "jvm_logic"}
    join = functools.partial(MicroTranslation, work="operators")
    others = [dataclasses.replace(q7, consumption=c) for c in ("all-one", "one-all", "one-one")]
    for q in [*others, dataclasses.replace(q7, key=None)]:
        assert not joinable_pattern(query_literal(q))
        one = dataclasses.replace(w, query_set=QuerySet("independent", (q,)))
        assert _plans(spark.translate_micro(join(one, None))) == {q.id: "jvm_logic"}
    # Beside other shuffles (a Java-logic query), the join stays: the JVM source takes several.
    q2 = CountWindowAggregation("q2", "S1", 10, 1, (Aggregate("SUM", "A1", "s"),), ("ID",))
    both = dataclasses.replace(w, query_set=QuerySet("independent", (q7, q2)))
    assert _plans(spark.translate_micro(join(both, None))) == {q7.id: "interval_join", "q2": "jvm_logic"}
    realtime = spark.translate_micro(join(w, None, trigger="realtime"))
    assert _plans(realtime) == {q7.id: "jvm_logic"}
    with pytest.raises(CepkitError, match="real-time mode allows no Python"):
        spark.translate_micro(MicroTranslation(w, None, work="python", trigger="realtime"))
    with pytest.raises(CepkitError, match="work"):
        MicroTranslation(w, None, work="cep")
