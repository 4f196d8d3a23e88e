"""The Flink translation of microbenchmark queries: which kinds go to Flink SQL, and the SQL they
get (the end-to-end tests, `pytest -m flink`, run it on Flink and validate the answers)."""

from __future__ import annotations

import pytest

from kit.shipped import SUITE_NAMES, suite_path
from kit.workload import read_suite
from kit.errors import CepkitError
from translators.flink_micro import _interval, flink_plan, query_sql
from translators.micro_literal import query_literal
from translators.render import sql_words, wrap_sql


def _literal(suite: str, workload: str) -> dict:
    (q,) = read_suite(suite_path(suite, quick=True)).workload(workload).queries
    return query_literal(q)


# Each kind's plan per family (specs/TRANSLATION.md, "Microbenchmarks on Flink"): engine, jvm, python;
# operators as engine but for OPERATORS.
PLANS = [
    ("filtering", "filtering-selectivity-5pct", ("sql", "sql", "sql")),
    ("count-windows", "count-windows-window-sliding-r50-sum", ("jvm", "jvm", "python")),
    ("time-windows", "time-windows-rate-q3-range10s-rate500", ("sql", "jvm", "python")),
    ("time-windows", "time-windows-rate-q4-range10s-rate500", ("sql", "jvm", "python")),
    ("joins", "joins-j1-window-size-s100", ("jvm", "jvm", "python")),
    ("joins", "joins-j2-memory-table-t100", ("sql", "sql", "sql")),
    ("joins", "joins-j3-database-table-t100", ("jvm", "jvm", "python")),
    ("patterns", "patterns-consumption-all-all", ("jvm", "jvm", "python")),
    ("patterns", "patterns-consumption-one-all", ("jvm", "jvm", "python")),
    ("patterns", "patterns-consumption-all-one", ("jvm", "jvm", "python")),
    ("patterns", "patterns-consumption-one-one", ("jvm", "jvm", "python")),
]


@pytest.mark.parametrize("suite, workload, plans", PLANS)
def test_each_kind_goes_where_specs_translation_says(suite, workload, plans):
    q = _literal(suite, workload)
    for work, plan in zip(("engine", "jvm", "python"), plans):
        chosen, why = flink_plan(q, work)
        assert chosen == plan and why, (work, chosen, why)
    assert flink_plan(q, "engine") == flink_plan(q)
    assert flink_plan(q, "operators")[0] == OPERATORS.get(workload, plans[0])


# Where the operators family takes Flink's own operator though the engine family does not.
OPERATORS = {"patterns-consumption-all-all": "sql"}


def test_a_pattern_without_a_key_and_a_median_window_run_the_java_logic():
    q = _literal("patterns", "patterns-consumption-all-all")
    assert flink_plan({**q, "key": None})[0] == "jvm"
    w = _literal("time-windows", "time-windows-rate-q3-range10s-rate500")
    w["aggregates"] = [["MEDIAN", "A1", "medA1"]]
    plan, why = flink_plan(w)
    assert plan == "jvm" and "no MEDIAN aggregate" in why


def test_the_driver_family_is_spark_s_only():
    with pytest.raises(CepkitError, match="Spark's only"):
        flink_plan(_literal("filtering", "filtering-selectivity-5pct"), "driver")
    from translators.flink_micro import translate_micro
    from translators.request import MicroTranslation

    w = read_suite(suite_path("filtering", quick=True)).workload("filtering-selectivity-5pct")
    with pytest.raises(CepkitError, match="has no Flink plan"):
        translate_micro(MicroTranslation(w, work="driver"))


def test_a_filter_selects_its_fields_and_keeps_its_conditions():
    sql = query_sql(_literal("filtering", "filtering-selectivity-5pct"))
    assert sql.startswith("SELECT 'q1' AS `stream`, `ID` AS `ID`, `A1` AS `A1`")
    assert sql.endswith("FROM S1 WHERE `ID` <= 5") and "`TS` AS inputTS, ingestTS" in sql


def test_a_time_window_hops_by_its_slide_over_its_range():
    sql = query_sql(_literal("time-windows", "time-windows-rate-q3-range10s-rate500"))
    assert ("TABLE(HOP(TABLE S1, DESCRIPTOR(rowtime), INTERVAL '0 00:00:01.000' DAY TO SECOND(3), "
            "INTERVAL '0 00:00:10.000' DAY TO SECOND(3)))") in sql
    assert "CAST(AVG(`A1`) AS DOUBLE) AS `avgA1`" in sql and "window_end AS windowEnd" in sql
    assert sql.endswith("GROUP BY window_start, window_end")


def test_patterns_pair_by_key_within_the_window_in_feed_order():
    all_all = query_sql(_literal("patterns", "patterns-consumption-all-all"))
    for part in ("a1.`ID` = a2.`ID`", "a2.rowtime >= a1.rowtime", "a2.rowtime < a1.rowtime + INTERVAL",
                 "a1.`offset` < a2.`offset`", "a2.`A1` > ", "a2.`TS` AS inputTS"):
        assert part in all_all
    # One-all has no SQL plan: MATCH_RECOGNIZE would answer only once the watermark passes the trigger.
    with pytest.raises(CepkitError, match="no SQL form"):
        query_sql(_literal("patterns", "patterns-consumption-one-all"))


def test_every_quick_query_has_a_flink_plan():
    for name in SUITE_NAMES:
        for w in read_suite(suite_path(name, quick=True)).workloads:
            for q in map(query_literal, w.queries):
                plan, _ = flink_plan(q)
                if plan == "sql":
                    assert query_sql(q).startswith(f"SELECT '{q['id']}' AS `stream`")


@pytest.mark.parametrize("ms, literal", [
    (0, "'0 00:00:00.000'"), (1, "'0 00:00:00.001'"), (2_000, "'0 00:00:02.000'"),
    (600_000, "'0 00:10:00.000'"),          # Q7's 600-s interval: SECOND(2) refused it
    (3_723_004, "'0 01:02:03.004'"), (86_400_000 + 250, "'1 00:00:00.250'")])
def test_intervals_are_day_to_second_literals_of_any_length(ms, literal):
    assert _interval(ms) == f"INTERVAL {literal} DAY TO SECOND(3)"


def test_an_interval_flink_cannot_hold_is_refused():
    for ms in (-1, 100 * 86_400_000):
        with pytest.raises(CepkitError, match="0 to 99 days"):
            _interval(ms)


def test_sql_wraps_between_words_never_inside_a_quoted_literal():
    sql = ("SELECT a FROM S1 WHERE rowtime < rowtime + INTERVAL '0 00:10:00.000' DAY TO SECOND(3) "
           "AND `odd name` = 'it''s here' AND x = 1")
    assert sql_words(sql)[9:11] == ["INTERVAL", "'0 00:10:00.000'"] and "`odd name`" in sql_words(sql)
    assert "'it''s here'" in sql_words(sql)
    for width in range(10, 60):
        lines = wrap_sql(sql, width).split("\n")
        assert " ".join(lines) == sql                          # nothing lost, broken only at spaces
        assert all(line.count("'") % 2 == 0 and line.count("`") % 2 == 0 for line in lines)
        assert all(len(line) <= width or len(sql_words(line)) == 1 for line in lines)


def test_an_unclosed_quote_in_sql_is_an_error():
    with pytest.raises(CepkitError, match="unclosed '"):
        sql_words("SELECT 'oops FROM S1")


def test_every_shipped_query_keeps_its_literals_whole_in_the_program():
    """The program's SQL is the translator's, word for word, for every workload of every suite."""
    for name in SUITE_NAMES:
        for quick in (False, True):
            for w in read_suite(suite_path(name, quick=quick)).workloads:
                for q in map(query_literal, w.queries):
                    if flink_plan(q, "operators")[0] == "sql":       # every SQL any family plans
                        sql = query_sql(q)
                        assert " ".join(wrap_sql(sql).split("\n")) == " ".join(sql.split())


@pytest.mark.parametrize("suite, workload, work, jvm", [
    ("filtering", "filtering-selectivity-5pct", "engine", True),
    ("patterns", "patterns-consumption-all-all", "engine", True),
    ("count-windows", "count-windows-window-sliding-r50-sum", "engine", True),
    ("patterns", "patterns-consumption-one-one", "jvm", True),
    ("count-windows", "count-windows-window-sliding-r50-sum", "python", False),
    ("joins", "joins-j3-database-table-t100", "engine", True),
    ("joins", "joins-j3-database-table-t100", "python", False),
])
def test_the_program_says_which_way_its_events_and_answers_go(suite, workload, work, jvm):
    """Workloads without a Python query read and answer in the JVM (flink_runtime/micro.py jvm_feed
    decides alike); a workload with one keeps the Python feed and emitter."""
    from translators.flink_micro import translate_micro
    from translators.request import MicroTranslation

    w = read_suite(suite_path(suite, quick=True)).workload(workload)
    text = translate_micro(MicroTranslation(w, work=work))
    head = " ".join(text.split('"""')[1].split())
    assert ("read and answered in the JVM" in head) is jvm
    assert ("through the Python feed and emitter" in head) is (not jvm)
    assert f'Plan family run.work = "{work}"' in head


@pytest.mark.parametrize("work", ["engine", "operators", "jvm", "python"])
def test_the_program_names_each_query_s_plan_and_where_it_runs(work, tmp_path):
    """PLANS and WORK in the program: each query's plan, and the family and every query's plan in
    words, which the program's `started` event carries (run.json's plan)."""
    from tests.cepkit_app.test_micro_e2e import every_kind
    from tests.helpers import program_literals
    from translators.flink_micro import translate_micro
    from translators.request import MicroTranslation

    w = every_kind()
    path = tmp_path / "program.py"
    path.write_text(translate_micro(MicroTranslation(w, tmp_path / "T.parquet", work=work)))
    text = path.read_text()
    literals = program_literals(path)
    plans = {q.id: flink_plan(query_literal(q), work)[0] for q in w.queries}
    assert literals["PLANS"] == plans
    assert set(literals["SQL"]) == {qid for qid, p in plans.items() if p == "sql"}
    assert literals["WORK"]["family"] == work and set(literals["WORK"]["queries"]) == set(plans)
    words = {"sql": "Flink SQL", "jvm": "Java ", "python": "Python "}
    for qid, plan in plans.items():
        assert literals["WORK"]["queries"][qid].startswith(words[plan]), (qid, literals["WORK"]["queries"][qid])
    assert f'Plan family run.work = "{work}"' in text
