"""The workload model: every spec kind round-trips through XML exactly; the model checks itself."""

from __future__ import annotations

import dataclasses

import pytest

from kit.config import load_config
from kit.errors import CepkitError
from kit.workload import (CONSUMPTION_POLICIES, Aggregate, Comparison, CountWindowAggregation, Dataset, Filter, Load,
                          PairsStrategy, Param, Pattern, PatternEvent, QuerySet, SpecError, StrategySet, Suite,
                          TableJoin, TimeWindowAggregation, TwoLevelAggregation, WindowJoin, Workload, output_schema,
                          parse_spec, read_spec, to_xml)

DATASET = Dataset(streams=2, attributes=3, max_id=40, table_rows=40, table_attributes=2, zipf_s=0.5, seed=11)

QUERIES = {
    "filter": Filter("q1", "S1", ("ID", "A1", "A3"), (Comparison("ID", "le", 4), Comparison("A2", "gt", 12.5))),
    "filter-no-where": Filter("q1", "S2", ("A2",)),
    "count-sliding": CountWindowAggregation("q2", "S1", 100, 1, (Aggregate("MEDIAN", "A1", "medA1"),), ("ID",)),
    "count-tumbling-all-functions": CountWindowAggregation(
        "q2", "S2", 50, 50, tuple(Aggregate(f, None if f == "COUNT" else "A2", f.lower())
                                  for f in ("SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN", "COUNT"))),
    "time-window": TimeWindowAggregation("q3", "S1", 3_600_000, 1_000, (Aggregate("AVG", "A1", "avgA1"),)),
    "time-window-grouped": TimeWindowAggregation("q3", "S1", 10_000, 2_000, (Aggregate("COUNT", "A1", "c"),),
                                                 ("ID", "A3")),
    "two-level": TwoLevelAggregation("q4", "S2", 600_000, 1_000, (Aggregate("STDEV", "A1", "sd"),), ("ID",)),
    "window-join": WindowJoin("j1", "S1", "S2", 500, "ID", "ID", ("S1.ID", "S1.TS", "S2.A3"),
                              (Comparison("S2.A1", "le", 50.25),)),
    "table-join-memory": TableJoin("j2", "S1", "T", "memory", "ID", "ID", ("S1.ID", "S1.A1", "T.T2")),
    "table-join-database": TableJoin("j3", "S2", "T", "database", "ID", "ID", ("S2.ID", "T.ID", "T.T1"),
                                     (Comparison("T.T1", "ge", 3),)),
    **{f"pattern-{c}": Pattern("q7", PatternEvent("a1", "S1"),
                               PatternEvent("a2", "S1", (Comparison("A1", "gt", 99.9),)),
                               60_000, c, ("a1.ID", "a1.TS", "a2.A1")) for c in CONSUMPTION_POLICIES},
    "pattern-two-streams-no-key": Pattern("p", PatternEvent("a", "S1", (Comparison("A1", "lt", 2),)),
                                          PatternEvent("b", "S2"), 1, "one-one", ("b.ID",), key=None),
}


def workload(*queries, sharing="independent", **changes) -> Workload:
    base = dict(name="w-1", experiment="exp", metrics=("throughput", "memory"), dataset=DATASET,
                load=Load("constant", 250.0, 3_000), query_set=QuerySet(sharing, queries),
                params=(Param("k", "4"), Param("rows", "100")), description="a <test> & \"quotes\" 'too'")
    base.update(changes)
    return Workload(**base)


def roundtrip(spec):
    data = to_xml(spec)
    back = parse_spec(data, "spec.xml")
    assert back == spec
    assert to_xml(back) == data
    return data


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_query_kind_roundtrips(name):
    data = roundtrip(workload(QUERIES[name]))
    assert f"<{QUERIES[name].KIND} ".encode() in data


def test_workload_variants_roundtrip():
    q = QUERIES["window-join"]
    roundtrip(workload(q, dataclasses.replace(q, id="j2"), dataclasses.replace(q, id="j3"), sharing="identical"))
    roundtrip(workload(q, dataclasses.replace(q, id="j2", rows=7), sharing="similar"))
    roundtrip(workload(*(dataclasses.replace(v, id=f"x{i}") for i, v in enumerate(QUERIES.values()))))
    roundtrip(workload(QUERIES["filter"], load=Load("adaptivity", 1e5), params=(), description=""))


def test_suite_and_strategies_roundtrip(tmp_path):
    suite = Suite("demo", True, (workload(QUERIES["filter"]), workload(QUERIES["two-level"], name="w-2")), "demo")
    data = roundtrip(suite)
    assert data.startswith(b"<?xml version='1.0' encoding='UTF-8'?>\n<Suite kind=\"cepkit.suite\" schema_version=\"1\"")
    strategies = StrategySet(3, 99, (
        PairsStrategy("st_00001", "u_00001", 1_000_000, "AAAAAA", "BBBBBB", 5, 30, 2.0, 0.1),
        PairsStrategy("st_00002", "u_00001", 5_000_000, "CCCCCC", "DDDDDD", 60, 5, 1.2, 0.3)))
    data = roundtrip(strategies)
    assert b'bandsMultiplier="2.0" stopLossPerc="0.1" user="u_00001"' in data
    path = tmp_path / "s.xml"
    path.write_bytes(data)
    assert read_spec(path) == strategies


def test_output_schemas_name_fields_and_carry_input_ts():
    names = {k: output_schema(q).names for k, q in QUERIES.items()}
    assert names["filter"] == ("ID", "A1", "A3", "inputTS")
    assert names["count-sliding"] == ("ID", "medA1", "inputTS")
    assert names["time-window-grouped"] == ("ID", "A3", "c", "windowEnd", "inputTS")
    assert names["window-join"] == ("S1_ID", "S1_TS", "S2_A3", "inputTS")
    assert names["table-join-database"] == ("S2_ID", "T_ID", "T_T1", "inputTS")
    assert names["pattern-all-all"] == ("a1_ID", "a1_TS", "a2_A1", "inputTS")
    schema = output_schema(QUERIES["count-tumbling-all-functions"])
    assert schema.name == "q2"
    assert [f.type for f in schema.fields] == ["double"] * 6 + ["long", "long"]
    assert output_schema(QUERIES["filter"]).field("ID").type == "int"


def test_query_properties():
    p = QUERIES["pattern-one-all"]
    assert (p.first_policy, p.second_policy, p.inputs) == ("ONE", "ALL", ("S1",))
    assert QUERIES["window-join"].inputs == ("S1", "S2")
    assert QUERIES["count-tumbling-all-functions"].tumbling and not QUERIES["count-sliding"].tumbling
    two = QUERIES["two-level"]
    assert two.single_level() == TimeWindowAggregation("q4", "S2", 600_000, 1_000, two.aggregates, ("ID",))
    assert two.pane_ms == 1_000


def test_micro_settings_drive_the_micro_generator():
    w = workload(QUERIES["filter"], load=Load("adaptivity", 1234.5, 67_100))
    micro = load_config(settings=w.micro_settings()).micro
    assert (micro.seed, micro.streams, micro.attributes, micro.max_id, micro.zipf_s, micro.table_rows,
            micro.table_attributes) == (11, 2, 3, 40, 0.5, 40, 2)
    assert (micro.rate.profile, micro.rate.basis_rate_eps, micro.rate.duration_s) == ("adaptivity", 1234.5, 67.1)
    assert "micro.rate.duration_s" not in workload(QUERIES["filter"], load=Load("constant", 10.0)).micro_settings()


@pytest.mark.parametrize("build, message", [
    (lambda: PairsStrategy("st_00001", "u_00001", 1_000_000, "A", "B", 5, 4, 2.0, 0.1),
     "numPeriods must be one of 5,6,7,8,9,10,15,20,25,30, got 4"),
    (lambda: PairsStrategy("st-00001", "u_00001", 1_000_000, "A", "B", 5, 5, 2.0, 0.1),
     "alias must look like st_00001, got 'st-00001'"),
    (lambda: PairsStrategy("st_00001", "u_00001", 1_000_000, "A", "A", 5, 5, 2.0, 0.1),
     "symbol1 and symbol2 must differ, both are A"),
    (lambda: Aggregate("MODE", "A1", "m"), "function must be one of SUM,AVG,MAX,MIN,STDEV,MEDIAN,COUNT, got MODE"),
    (lambda: Aggregate("SUM", None, "s"), "SUM needs a field"),
    (lambda: TwoLevelAggregation("q", "S1", 10, 5, (Aggregate("MEDIAN", "A1", "m"),)),
     "MEDIAN cannot be computed in two levels (allowed: SUM,AVG,MAX,MIN,STDEV,COUNT)"),
    (lambda: CountWindowAggregation("q", "S1", 5, 6, (Aggregate("SUM", "A1", "s"),)),
     "slide must be <= rows (5), got 6"),
    (lambda: CountWindowAggregation("q", "S1", 5, 1, (Aggregate("SUM", "A1", "ID"),), ("ID",)),
     "output field ID appears twice"),
    (lambda: WindowJoin("j", "S1", "S1", 5, "ID", "ID", ("S1.ID",)),
     "left and right must be different streams, both are S1"),
    (lambda: Pattern("p", PatternEvent("a", "S1"), PatternEvent("b", "S1"), 10, "chronicle", ("a.ID",)),
     "consumption must be one of all-all,all-one,one-all,one-one, got chronicle"),
    (lambda: Pattern("p", PatternEvent("a", "S1"), PatternEvent("b", "S1"), 10, "all-all", ("c.ID",)),
     "select: c.ID names neither a nor b"),
    (lambda: Comparison("ID", "le", float("nan")), "value must be a finite number, got nan"),
    (lambda: QuerySet("identical", (QUERIES["filter"],
                                    dataclasses.replace(QUERIES["filter"], id="q2", select=("A1",)))),
     "query q2 differs from q1 in more than its id (sharing=identical)"),
    (lambda: QuerySet("similar", (QUERIES["filter"], dataclasses.replace(QUERIES["count-sliding"], id="q9"))),
     "query q9 is a CountWindowAggregation, not a Filter (sharing=similar)"),
    (lambda: workload(Filter("q1", "S3", ("ID",))), "query q1: unknown input stream S3"),
    (lambda: workload(Filter("q1", "S1", ("A4",))), "query q1: input S1 has no field A4"),
    (lambda: workload(QUERIES["table-join-memory"], dataset=Dataset(streams=2)),
     "query j2: the dataset has no table T (set tableRows > 0)"),
    (lambda: Load("constant", 0.0), "rateEps must be > 0, got 0.0"),
    (lambda: Dataset(streams=27), "streams must be <= 26, got 27"),
    (lambda: Suite("s", False, (workload(QUERIES["filter"]), workload(QUERIES["filter"]))),
     "duplicate workload name w-1"),
])
def test_model_checks_itself(build, message):
    with pytest.raises(SpecError) as e:
        build()
    assert str(e.value) == message


def test_lists_become_tuples_and_objects_are_frozen():
    f = Filter("q1", "S1", ["ID"], [Comparison("ID", "eq", 1)])
    assert f.select == ("ID",) and isinstance(f.where, tuple) and hash(f)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.id = "x"


def test_reading_the_wrong_kind_is_an_error(tmp_path):
    from kit.workload import read_strategies, read_suite
    path = tmp_path / "w.xml"
    path.write_bytes(to_xml(workload(QUERIES["filter"])))
    with pytest.raises(CepkitError, match=r"w\.xml: expected a <Strategies> file, found a Workload spec"):
        read_strategies(path)
    with pytest.raises(CepkitError, match="expected a <Suite> file"):
        read_suite(path)
