"""Spark's real-time mode at translation (specs/TRANSLATION.md, "Real-time mode"): a workload is
admitted only when every query's plan is made of operators the mode allows (filters, the in-memory
table join, and in the JVM the time windows' paned plan and the Java logic of count windows, window
joins and patterns), the rest is refused in one line naming the query and why; Pairs runs on its
keyed plan only; the setting is Spark's only, and a real-time run hands the program its trigger."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.config import DriverConfig
from harness.launch import program_args
from harness.run_spec import EngineRunSpec
from kit.config import RunConfig
from kit.errors import CepkitError
from kit.shipped import specs_dir
from kit.workload import QuerySet, load_aux, read_suite
from querygen.strategies import strategies_for
from translators.registry import engine_module
from translators.request import MicroTranslation, PairsTranslation

from tests.translators.test_micro_translation import program_literals_text

SUITES = ("filtering", "count-windows", "time-windows", "joins", "patterns", "adaptivity", "scalability")


def _admitted(q) -> bool:
    """Every kind but J3 (Python lookups, or a JDBC relation re-read per batch)."""
    return not (type(q).__name__ == "TableJoin" and q.storage == "database")


def _plans(text: str) -> dict:
    return program_literals_text(text)["PLANS"]


@pytest.mark.parametrize("suite", SUITES)
def test_real_time_mode_admits_every_kind_but_j3_and_refuses_the_rest(suite, tmp_path):
    seen = set()
    for w in read_suite(specs_dir() / "suites" / f"{suite}-quick.xml").workloads:
        table = tmp_path / "T.parquet" if any(type(q).__name__ == "TableJoin" for q in w.queries) else None
        req = MicroTranslation(w, table, trigger="realtime")
        micro = engine_module("spark").translate_micro(MicroTranslation(w, table))
        if all(_admitted(q) for q in w.queries):
            program = engine_module("spark").translate_micro(req)
            # The default family's plans are the same in both modes (the JVM's for every stateful
            # kind): the program is the micro-batch one, the trigger the run's, handed over at launch.
            assert program == micro
            plans = set(_plans(program).values())
            assert plans <= {"filter", "broadcast_join", "jvm_window", "jvm_logic"}
            seen.add("jvm" if plans & {"jvm_window", "jvm_logic"} else "admitted")
            continue
        with pytest.raises(CepkitError) as e:
            engine_module("spark").translate_micro(req)
        msg = str(e.value)
        assert "\n" not in msg and f"workload {w.name}: not runnable in Spark's real-time mode" in msg
        first = next(q for q in w.queries if not _admitted(q))
        assert f"query {first.id} (" in msg
        assert any(why in msg for why in ("PostgreSQL", "re-reads the table"))
        seen.add("refused")
    expected = {"filtering": {"admitted"}, "time-windows": {"jvm"}, "count-windows": {"jvm"}, "patterns": {"jvm"}}
    if suite in expected:
        assert seen == expected[suite]


def test_the_python_families_are_refused_in_real_time_mode():
    """run.work = python or driver runs the stateful kinds in Python, which real-time mode does not
    allow; operators' Spark window() and interval join are the micro-batch plan's choice, the JVM's
    in real-time mode."""
    spark = engine_module("spark")
    for suite in ("count-windows", "time-windows", "patterns"):
        w = read_suite(specs_dir() / "suites" / f"{suite}-quick.xml").workloads[0]
        for work, why in (("python", "transformWithStateInPandas"), ("driver", "on Spark's driver")):
            with pytest.raises(CepkitError, match=f"real-time mode.*{why}.*allows no Python"):
                spark.translate_micro(MicroTranslation(w, work=work, trigger="realtime"))
        program = spark.translate_micro(MicroTranslation(w, work="operators", trigger="realtime"))
        assert set(_plans(program).values()) <= {"jvm_window", "jvm_logic"}


def test_the_java_logics_queries_are_one_branch_in_real_time_mode():
    """Count windows, window joins and patterns share one JVM operator (cepkit.spark.LogicPlan), so
    any number of them is one branch over the source; a filter beside them would be a second."""
    from kit.workload import (Aggregate, Comparison, CountWindowAggregation, Filter, Pattern, PatternEvent,
                              WindowJoin)
    from kit.workload.suite import Dataset, Load, Workload

    q2 = CountWindowAggregation("q2", "S1", 10, 1, (Aggregate("SUM", "A1", "s"),), ("ID",))
    j1 = WindowJoin("j1", "S1", "S2", 10, "ID", "ID", ("S1.ID", "S2.A1"))
    q7 = Pattern("q7", PatternEvent("a1", "S1"), PatternEvent("a2", "S2", (Comparison("A1", "gt", 5.0),)), 1000,
                 "one-one", ("a1.ID", "a2.A1"), key="ID")
    w = Workload("logic", "x", ("throughput",), Dataset(streams=2, attributes=1, max_id=10, seed=1),
                 Load("constant", 100.0, 1000), QuerySet("independent", (q2, j1, q7)))
    spark = engine_module("spark")
    program = spark.translate_micro(MicroTranslation(w, trigger="realtime"))
    assert set(_plans(program).values()) == {"jvm_logic"}
    mixed = dataclasses.replace(w, query_set=QuerySet("independent", (q2, j1, q7, Filter("q1", "S1", ("ID",), ()))))
    with pytest.raises(CepkitError, match="a union of 2 branches over one source"):
        spark.translate_micro(MicroTranslation(mixed, trigger="realtime"))


def test_time_windows_in_real_time_mode_take_one_branch_each(tmp_path):
    """A time window is one branch over the source: beside a filter or another distinct window it
    would be a union, which Spark 4.3's real-time mode refuses; its identical copy is planned once."""
    w = read_suite(specs_dir() / "suites" / "time-windows-quick.xml").workloads[0]
    (q3,) = w.queries
    spark = engine_module("spark")
    twin = dataclasses.replace(q3, id="q3b")
    spark.translate_micro(MicroTranslation(dataclasses.replace(w, query_set=QuerySet("independent", (q3, twin))),
                                           trigger="realtime"))
    other = dataclasses.replace(q3, id="q3c", range_ms=2 * q3.range_ms)
    with pytest.raises(CepkitError, match="a union of 2 branches over one source"):
        spark.translate_micro(MicroTranslation(dataclasses.replace(w, query_set=QuerySet("independent", (q3, other))),
                                               trigger="realtime"))
    # Spark's window() (run.work = "operators") is the micro-batch plan's choice; in real-time mode the JVM's.
    native = spark.translate_micro(MicroTranslation(w, work="operators", trigger="realtime"))
    assert _plans(native) == {q3.id: "jvm_window"}


def test_one_branch_for_all_filters_and_one_per_other_distinct_query(tmp_path):
    """Distinct filters are one branch (one pass, spark_runtime/micro_plan.py) and identical queries
    are planned once and copied, so both run in real-time mode; a filter beside a J2 join would be
    a union of two branches over one source, which Spark 4.3's real-time mode refuses."""
    w = read_suite(specs_dir() / "suites" / "filtering-quick.xml").workloads[0]
    (q1,) = w.queries
    twin = dataclasses.replace(q1, id="q1b")
    other = dataclasses.replace(q1, id="q1c", where=(), select=("ID", "A2"))
    spark = engine_module("spark")
    for queries in ((q1, twin), (q1, other), (q1, twin, other)):
        spark.translate_micro(MicroTranslation(dataclasses.replace(w, query_set=QuerySet("independent", queries)),
                                               trigger="realtime"))
    j2w = next(x for x in read_suite(specs_dir() / "suites" / "joins-quick.xml").workloads if "j2" in x.name)
    (j2,) = j2w.queries
    plain = dataclasses.replace(q1, input=j2.input, select=("ID", "A1"), where=())
    mixed = dataclasses.replace(j2w, query_set=QuerySet("independent", (j2, plain)))
    with pytest.raises(CepkitError, match="a union of 2 branches over one source"):
        spark.translate_micro(MicroTranslation(mixed, tmp_path / "T.parquet", trigger="realtime"))


def test_j2_is_admitted_and_j3_refused_in_either_plan(tmp_path):
    joins = read_suite(specs_dir() / "suites" / "joins-quick.xml").workloads
    j2 = next(w for w in joins if "j2" in w.name)
    j3 = next(w for w in joins if "j3" in w.name)
    spark = engine_module("spark")
    assert "table_join" in spark.translate_micro(MicroTranslation(j2, tmp_path / "T.parquet", trigger="realtime"))
    for plan, why in (("lookup", "PostgreSQL"), ("jdbc", "re-reads the table")):
        with pytest.raises(CepkitError, match=why):
            spark.translate_micro(MicroTranslation(j3, None, database_join=plan, trigger="realtime"))


def test_only_the_keyed_pairs_plan_runs_in_real_time_mode(quick_pairs):
    spec = strategies_for(load_aux(quick_pairs / "pairs-aux.json"), 7)
    spark = engine_module("spark")
    keyed = spark.translate_pairs(PairsTranslation(spec, trigger="realtime"))
    assert keyed == spark.translate_pairs(PairsTranslation(spec))       # the trigger is the run's
    assert "realtime_build=PROGRAM.build_realtime" in keyed
    for plan in ("shared", "per-strategy"):
        with pytest.raises(CepkitError, match=f"the {plan} Pairs plan has no real-time form"):
            spark.translate_pairs(PairsTranslation(spec, plan, trigger="realtime"))
    with pytest.raises(CepkitError, match="trigger"):
        PairsTranslation(spec, trigger="continuous")


def test_the_trigger_is_a_spark_setting():
    assert RunConfig(trigger="realtime").realtime_batch_ms == 5000
    with pytest.raises(CepkitError, match="micro-batch, realtime, got 'continuous'"):
        RunConfig(trigger="continuous")
    with pytest.raises(CepkitError, match="real-time mode; engine 'flink' has none"):
        RunConfig(trigger="realtime", engine="flink")
    with pytest.raises(CepkitError, match="100"):
        RunConfig(trigger="realtime", realtime_batch_ms=10)
    # Faults too: the sink drops a re-run batch's answers by content (harness/replay_filter.py).
    assert RunConfig(trigger="realtime", faults=("kill-engine@40s",)).faults == ("kill-engine@40s",)


def test_a_real_time_run_hands_the_program_its_trigger(tmp_path):
    program = tmp_path / "program.py"
    program.write_text("")

    def args(**changes):
        spec = EngineRunSpec(program=program, run_dir=tmp_path / "run", driver=DriverConfig(tmp_path), **changes)
        return program_args(spec, 1, 2, "ck", None)

    assert "--trigger" not in args()
    rt = args(trigger="realtime", realtime_batch_ms=2000)
    assert rt[rt.index("--trigger"):rt.index("--trigger") + 4] == ["--trigger", "realtime", "--realtime-batch-ms",
                                                                   "2000"]
    with pytest.raises(CepkitError, match="trigger"):
        EngineRunSpec(program=program, run_dir=tmp_path / "run", driver=DriverConfig(tmp_path), engine="flink",
                      trigger="realtime")
    assert Path(program).exists()
