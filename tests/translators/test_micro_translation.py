"""Microbenchmark translation and run validation without Spark: every quick-suite workload becomes
a tidy, importable program for every engine; a run's output log is validated against the reference
(shifted time fields, missing/undue/wrong rows), with the log written by the real harness sink."""

from __future__ import annotations

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
        # The program holds each query's literal; Spark's translator may name another plan of its kind
        # (a keyed all-all pattern as a join: run.patterns, on by default).
        replans = {("join_pattern", "pattern")} if engine == "spark" else set()
        for got, want in zip(literals["QUERIES"], map(query_literal, w.queries)):
            assert {**got, "kind": want["kind"]} == want
            assert got["kind"] == want["kind"] or (got["kind"], want["kind"]) in replans
        translated += 1
        if engine == "flink":       # SQL for exactly the queries Flink SQL expresses
            assert set(literals["SQL"]) == {q["id"] for q in literals["QUERIES"] if flink_plan(q)[0] == "sql"}
            assert all(f"SELECT '{qid}' AS `stream`" in sql for qid, sql in literals["SQL"].items())
            continue
        if any(isinstance(q, TableJoin) and q.storage == "database" for q in w.queries):
            assert "Per-batch key lookups in PostgreSQL (J3)" in text and "Stream-static joins" not in text
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


def test_native_time_window_plan_uses_spark_window_for_q3_only():
    w = read_suite(specs_dir() / "suites" / "time-windows-quick.xml")
    q3 = next(x for x in w.workloads if "q3" in x.name)
    q4 = next(x for x in w.workloads if "q4" in x.name)
    native = engine_module("spark").translate_micro(MicroTranslation(q3, None, work="operators"))
    assert "'kind': 'native_time_window'" in native and "Plain DataFrame operators" in native
    assert "A core in the stateful operator" not in native
    paned = engine_module("spark").translate_micro(MicroTranslation(q4, None, work="operators"))
    assert "'kind': 'time_window'" in paned and "native" not in paned        # Q4 keeps its paned plan
    core = engine_module("spark").translate_micro(MicroTranslation(q3, None))
    assert "'kind': 'time_window'" in core and "A core run on the driver" in core
    operator = engine_module("spark").translate_micro(MicroTranslation(q3, None, work="python"))
    assert "A core in the stateful operator" in operator and "CORES_PLAN = \"operator\"" in operator
    with pytest.raises(CepkitError, match="work"):
        MicroTranslation(q3, None, work="fast")
    with pytest.raises(CepkitError, match="work"):
        MicroTranslation(q3, None, work="gpu")


def test_native_windows_are_refused_beside_a_second_shuffle_over_the_source():
    """Two shuffles over the Python source race in Spark 4.3 (specs/TRANSLATION.md): a native Q3
    beside a core query, or two native Q3s, is refused at translation, naming the way out."""
    w = next(x for x in read_suite(specs_dir() / "suites" / "time-windows-quick.xml").workloads if "q3" in x.name)
    (q3,) = w.queries
    q2 = CountWindowAggregation("q2", "S1", 10, 1, (Aggregate("SUM", "A1", "s"),), ("ID",))
    q3b = TimeWindowAggregation("q3b", "S1", 4000, 1000, (Aggregate("AVG", "A1", "avgA1"),))
    for other in (q3b,):
        both = dataclasses.replace(w, query_set=QuerySet("independent", (q3, other)))
        with pytest.raises(CepkitError, match="2 shuffles over the source"):
            engine_module("spark").translate_micro(MicroTranslation(both, None, work="operators"))
        engine_module("spark").translate_micro(MicroTranslation(both, None))       # the core plan is fine
    # A core on the driver shuffles nothing, so a native window beside it is allowed.
    both = dataclasses.replace(w, query_set=QuerySet("independent", (q3, q2)))
    engine_module("spark").translate_micro(MicroTranslation(both, None, work="operators"))


def test_jdbc_plan_reads_the_database_table_through_spark_for_j3_only(tmp_path):
    joins = read_suite(specs_dir() / "suites" / "joins-quick.xml").workloads
    j2 = next(w for w in joins if "j2" in w.name)
    j3 = next(w for w in joins if "j3" in w.name)
    spark = engine_module("spark")
    jdbc = spark.translate_micro(MicroTranslation(j3, None, database_join="jdbc"))
    assert "'kind': 'jdbc_table_join'" in jdbc and "Stream-static joins with the table" in jdbc
    assert "Per-batch key lookups" not in jdbc
    module = _import(write_program(jdbc, tmp_path / "j3" / "program.py"))
    assert [q["kind"] for q in module.QUERIES] == ["jdbc_table_join"]
    lookup = spark.translate_micro(MicroTranslation(j3, None))
    assert "Per-batch key lookups in PostgreSQL (J3)" in lookup and "jdbc_table_join" not in lookup
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


def test_run_cores_places_whole_stream_cores_and_keyed_patterns():
    """by-kind: a count window and a keyed all-all pattern on the driver, a keyed pattern that
    consumes its candidates in the operator; driver and operator move all three
    (specs/TRANSLATION.md, "Where a core runs")."""
    from kit.workload import Pattern, PatternEvent
    from translators.spark_micro import on_driver

    w = next(x for x in read_suite(specs_dir() / "suites" / "time-windows-quick.xml").workloads if "q3" in x.name)
    q2 = CountWindowAggregation("q2", "S1", 10, 1, (Aggregate("SUM", "A1", "s"),), ("ID",))
    q7 = Pattern("q7", PatternEvent("a1", "S1"), PatternEvent("a2", "S1"), 1000, "all-all", ("a1.ID", "a2.A1"), key="ID")
    q7one = Pattern("q7one", PatternEvent("a1", "S1"), PatternEvent("a2", "S1"), 1000, "one-all", ("a1.ID", "a2.A1"),
                    key="ID")
    literals = {q.id: query_literal(q) for q in (q2, q7, q7one)}
    want = {"by-kind": {"q2": True, "q7": True, "q7one": False}, "driver": {"q2": True, "q7": True, "q7one": True},
            "operator": {"q2": False, "q7": False, "q7one": False}}
    both = dataclasses.replace(w, query_set=QuerySet("independent", (q2, q7, q7one)))
    for plan, where in want.items():
        assert {qid: on_driver(lit, plan) for qid, lit in literals.items()} == where
        work = {"by-kind": "engine", "driver": "driver", "operator": "python"}[plan]
        program = engine_module("spark").translate_micro(MicroTranslation(both, None, work=work))
        assert f'CORES_PLAN = "{plan}"' in program
        assert ("A core run on the driver" in program) == any(where.values())
        assert ("A core in the stateful operator" in program) == (not all(where.values()))


def test_keyed_all_all_patterns_are_an_interval_join_where_they_can_be():
    """run.patterns = "join" plans a keyed all-all pattern (Q7) as Spark's
    stream-stream interval self-join; the other consumption policies, a pattern without a key,
    run.patterns = "core", and a second shuffle over the source beside it keep the pattern core;
    real-time mode refuses the pattern either way (specs/TRANSLATION.md)."""
    from kit.workload import Pattern
    from translators.spark_micro import joinable_pattern

    spark = engine_module("spark")
    w = next(x for x in read_suite(specs_dir() / "suites" / "patterns.xml").workloads
             if x.name == "patterns-interval-w60s")
    (q7,) = w.queries
    assert isinstance(q7, Pattern) and joinable_pattern(query_literal(q7))
    assert "join_pattern" not in spark.translate_micro(MicroTranslation(w, None))   # "core" is the default
    program = spark.translate_micro(MicroTranslation(w, None, work="operators"))
    assert "'kind': 'join_pattern'" in program and "A stream-stream interval self-join" in program
    assert "A core in the stateful operator" not in program
    core = spark.translate_micro(MicroTranslation(w, None, work="engine"))
    assert "'kind': 'pattern'" in core and "join_pattern" not in core
    join = functools.partial(MicroTranslation, work="operators")
    others = [dataclasses.replace(q7, consumption=c) for c in ("all-one", "one-all", "one-one")]
    for q in [*others, dataclasses.replace(q7, key=None)]:
        assert not joinable_pattern(query_literal(q))
        one = dataclasses.replace(w, query_set=QuerySet("independent", (q,)))
        assert "join_pattern" not in spark.translate_micro(join(one, None))
    # Beside a core in the stateful operator, the join would be a second shuffle: the core runs it.
    q2 = CountWindowAggregation("q2", "S1", 10, 1, (Aggregate("SUM", "A1", "s"),), ("ID",))
    both = dataclasses.replace(w, query_set=QuerySet("independent", (q7, q2)))
    assert "join_pattern" not in spark.translate_micro(join(both, None, work="python"))
    assert "'kind': 'join_pattern'" in spark.translate_micro(join(both, None))   # q2 on the driver
    with pytest.raises(CepkitError, match="Python core"):
        spark.translate_micro(join(w, None, trigger="realtime"))
    with pytest.raises(CepkitError, match="work"):
        MicroTranslation(w, None, work="cep")
    flink = engine_module("flink").translate_micro(join(w, None))
    assert flink == engine_module("flink").translate_micro(MicroTranslation(w, None))   # Spark's setting only
