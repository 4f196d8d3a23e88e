"""Spark's real-time mode at translation (specs/TRANSLATION.md, "Real-time mode"): a workload is
admitted only when every query's plan is made of operators the mode allows (filters, the in-memory
table join, time windows on the JVM's paned plan), the rest is refused in one line naming the
query and why; Pairs runs on its keyed plan only; the setting is Spark's only, and a real-time run
hands the program its trigger."""

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

SUITES = ("filtering", "count-windows", "time-windows", "joins", "patterns", "adaptivity", "scalability")


PLAIN = ("Filter", "TableJoin")          # admitted as they are (J3 only when in memory)
WINDOWS = ("TimeWindowAggregation", "TwoLevelAggregation")      # admitted on the JVM's paned plan


def _admitted(q) -> bool:
    name = type(q).__name__
    return name in WINDOWS or name == "Filter" or (name == "TableJoin" and q.storage == "memory")


@pytest.mark.parametrize("suite", SUITES)
def test_real_time_mode_admits_filters_memory_joins_and_time_windows_and_refuses_the_rest(suite, tmp_path):
    seen = set()
    for w in read_suite(specs_dir() / "suites" / f"{suite}-quick.xml").workloads:
        table = tmp_path / "T.parquet" if any(type(q).__name__ == "TableJoin" for q in w.queries) else None
        req = MicroTranslation(w, table, trigger="realtime")
        micro = engine_module("spark").translate_micro(MicroTranslation(w, table))
        if all(_admitted(q) for q in w.queries):
            program = engine_module("spark").translate_micro(req)
            if any(type(q).__name__ in WINDOWS for q in w.queries):
                # A time window's real-time plan is the JVM's paned one (cepkit.spark.WindowRealTime).
                assert "'kind': 'realtime_time_window'" in program and "cepkit.spark.WindowRealTime" in program
                assert program != micro
                seen.add("windows")
            else:
                # The program is the micro-batch one: the trigger is the run's, handed over at launch.
                assert program == micro
                seen.add("admitted")
            continue
        with pytest.raises(CepkitError) as e:
            engine_module("spark").translate_micro(req)
        msg = str(e.value)
        assert "\n" not in msg and f"workload {w.name}: not runnable in Spark's real-time mode" in msg
        first = next(q for q in w.queries if not _admitted(q))
        assert f"query {first.id} (" in msg
        assert any(why in msg for why in ("Python core", "PostgreSQL", "re-reads the table"))
        seen.add("refused")
    expected = {"filtering": {"admitted"}, "time-windows": {"windows"}, "count-windows": {"refused"},
                "patterns": {"refused"}}
    if suite in expected:
        assert seen == expected[suite]


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
    # run.time_windows = "native" is the micro-batch plan's choice; in real-time mode the JVM's.
    native = spark.translate_micro(MicroTranslation(w, work="operators", trigger="realtime"))
    assert "'kind': 'realtime_time_window'" in native


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
