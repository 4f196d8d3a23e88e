"""Microbenchmark suites: the committed files parse, match the generator, and hold Table 4.2's sweeps."""

from __future__ import annotations

import pytest

from kit.shipped import specs_dir
from kit.workload import (CountWindowAggregation, Filter, Pattern, TableJoin, TimeWindowAggregation,
                          TwoLevelAggregation, WindowJoin, read_suite, to_xml)
from querygen.micro import above_threshold, at_most_threshold, id_threshold
from kit.shipped import SUITE_NAMES, suite_file_name
from querygen.suites import SUITES, build_suite

SUITES_DIR = specs_dir() / "suites"
NAMES = ("filtering", "count-windows", "time-windows", "joins", "patterns", "adaptivity", "scalability", "ceiling")


@pytest.fixture(scope="module")
def full():
    return {n: read_suite(SUITES_DIR / suite_file_name(n, False)) for n in NAMES}


def test_every_suite_has_a_full_and_a_quick_file():
    assert tuple(SUITES) == SUITE_NAMES == NAMES
    assert sorted(p.name for p in SUITES_DIR.glob("*.xml")) == sorted(
        suite_file_name(n, q) for n in NAMES for q in (False, True))


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_committed_file_parses_and_equals_the_generator(name, quick):
    path = SUITES_DIR / suite_file_name(name, quick)
    suite = read_suite(path)
    assert (suite.name, suite.quick) == (name, quick)
    assert suite == build_suite(name, quick)
    assert path.read_bytes() == to_xml(suite), f"regenerate {path.name}: cepkit querygen micro --suite {name}"


@pytest.mark.parametrize("name", NAMES)
def test_quick_variant_has_the_same_experiments_at_toy_sizes(full, name):
    quick = read_suite(SUITES_DIR / suite_file_name(name, True))
    assert {w.experiment for w in quick.workloads} == {w.experiment for w in full[name].workloads}
    for w in quick.workloads:
        events = w.load.rate_eps * (w.load.duration_ms or 0) / 1000 * w.dataset.streams
        assert 0 < events <= 30_000, w.name
        assert w.dataset.table_rows <= 1000 and w.dataset.max_id <= 10_000
        for q in w.queries:
            assert getattr(q, "rows", 0) <= 1000 and getattr(q, "range_ms", 0) <= 30_000


def _queries(suite, experiment):
    return [(w, q) for w in suite.workloads if w.experiment == experiment for q in w.queries]


def test_filtering_sweeps(full):
    sel = _queries(full["filtering"], "selectivity")
    assert [(w.param("selectivity"), q.where[0].value, q.select) for w, q in sel] == [
        (s, k, ("ID", "A1", "A2", "A3", "A4", "A5"))
        for s, k in (("0.01", 10), ("0.05", 50), ("0.25", 250), ("0.5", 500))]
    assert all(isinstance(q, Filter) and w.dataset.max_id == 1000 and w.dataset.attributes == 5 for w, q in sel)
    proj = _queries(full["filtering"], "projection")
    assert [w.dataset.attributes for w, _ in proj] == [5, 10, 25, 50, 125]
    assert {(q.select, str(q.where[0])) for _, q in proj} == {(("ID", "A1"), "ID <= 1000")}


def test_count_window_sweep(full):
    points = {(q.rows, q.slide, q.aggregates[0].function) for _, q in _queries(full["count-windows"], "window")}
    sizes = (500, 5_000, 50_000, 500_000)
    functions = ("SUM", "AVG", "MAX", "STDEV", "MEDIAN")
    assert points == {(r, s, f) for r in sizes for s in (1, r) for f in functions}
    assert all(isinstance(q, CountWindowAggregation) and q.group_by == ("ID",)
               for w in full["count-windows"].workloads for q in w.queries)


def test_time_window_sweeps_pair_q3_with_q4(full):
    suite = full["time-windows"]
    rates = {(w.load.rate_eps, q.range_ms) for w, q in _queries(suite, "rate")}
    assert rates == {(r, 600_000) for r in (500.0, 5_000.0, 50_000.0, 100_000.0)}
    sizes = sorted({q.range_ms for _, q in _queries(suite, "window-size")})
    assert sizes == [1_200_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000]
    q3 = {(w.load, q.range_ms, q.slide_ms) for w in suite.workloads for q in w.queries
          if type(q) is TimeWindowAggregation}
    q4 = {(w.load, q.range_ms, q.slide_ms) for w in suite.workloads for q in w.queries
          if isinstance(q, TwoLevelAggregation)}
    assert q3 == q4 and len(q3) == 9
    assert all(w.load.duration_ms == w.queries[0].range_ms * 3 // 2 for w in suite.workloads)


def test_join_sweeps(full):
    suite = full["joins"]
    j11 = [(q.rows, w.dataset.max_id) for w, q in _queries(suite, "j1-window-size")]
    assert j11 == [(s, s) for s in (500, 5_000, 50_000, 500_000)]
    j12 = [(q.rows, w.dataset.max_id) for w, q in _queries(suite, "j1-selectivity")]
    assert j12 == [(50_000, m) for m in (5_000, 50_000, 500_000, 5_000_000)]
    assert all(isinstance(q, WindowJoin) and len(q.select) == 8 for w, q in _queries(suite, "j1-window-size"))
    for experiment, storage, sizes in (("j2-memory-table", "memory", [10**k for k in range(3, 8)]),
                                       ("j3-database-table", "database", [10**k for k in range(3, 9)])):
        points = _queries(suite, experiment)
        assert [w.dataset.table_rows for w, _ in points] == sizes
        for w, q in points:
            assert isinstance(q, TableJoin) and q.storage == storage
            assert (w.dataset.max_id, w.dataset.attributes, w.dataset.table_attributes) == (w.dataset.table_rows, 2, 9)
            assert len(q.select) == 4 + 10    # SELECT *: S has 4 fields, T has 10


def test_pattern_sweeps(full):
    suite = full["patterns"]
    assert above_threshold(0.001) == 99.901 and above_threshold(0.1) == 90.1
    assert [q.within_ms for _, q in _queries(suite, "interval")] == [10_000, 30_000, 60_000, 120_000, 300_000, 600_000]
    assert [w.dataset.max_id for w, _ in _queries(suite, "cardinality")] == [100, 1_000, 10_000, 100_000]
    assert [q.second.where[0].value for _, q in _queries(suite, "selectivity")] == [99.901, 99.505, 99.01, 95.05, 90.1]
    assert [q.consumption for _, q in _queries(suite, "consumption")] == ["all-all", "all-one", "one-all", "one-one"]
    for w, q in _queries(suite, "interval") + _queries(suite, "cardinality"):
        assert isinstance(q, Pattern) and q.consumption == "all-all" and q.key == "ID"
        assert str(q.second.where[0]) == "A1 > 99.901" and q.first.stream == q.second.stream == "S1"


def test_adaptivity_uses_q2_under_the_burst_profile(full):
    ws = full["adaptivity"].workloads
    assert [(w.load.profile, w.load.duration_ms, w.queries[0].slide) for w in ws] == [
        ("adaptivity", None, 1), ("adaptivity", None, 10_000)]
    assert set(ws[0].metrics) == {"max-latency", "latency-degradation", "recovery-time", "post-peak-latency-variation"}


def test_scalability_query_sets(full):
    suite = full["scalability"]
    identical = [w for w in suite.workloads if w.experiment == "identical"]
    assert [len(w.query_set) for w in identical] == [1, 4, 16, 64]
    for w in identical:
        n = len(w.query_set)
        assert w.query_set.sharing == "identical"
        assert {(q.rows, q.where[0].value) for q in w.queries} == {(1_000, at_most_threshold(1 / n))}
    assert at_most_threshold(1 / 4) == 25.75 and id_threshold(0.05, 1000) == 50
    similar = [w for w in suite.workloads if w.experiment == "similar"]
    assert [len(w.query_set) for w in similar] == [1, 4, 16, 64]
    sizes = [q.rows for q in similar[-1].queries]
    assert sizes[0] == 400_000 and sizes[-1] == 500_000 and len(set(sizes)) == 64
    assert all(w.query_set.sharing == "similar" and w.load.rate_eps == 1_000.0 for w in similar)


def test_the_ceiling_reads_everything_and_answers_nothing_or_everything(full):
    # IDs are drawn from [1, maxId] (datagen/micro.py), so ID <= 0 keeps none and ID >= 1 all.
    null, passthrough = full["ceiling"].workloads
    assert (null.name, passthrough.name) == ("ceiling-kit-null", "ceiling-kit-pass-through")
    (q,), (p,) = null.queries, passthrough.queries
    assert isinstance(q, Filter) and [(c.field, c.op, c.value) for c in q.where] == [("ID", "le", 0)]
    assert isinstance(p, Filter) and [(c.field, c.op, c.value) for c in p.where] == [("ID", "ge", 1)]
    assert p.select == ("ID", "A1", "A2", "A3", "A4", "A5")
