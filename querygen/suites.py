"""The microbenchmark suites: Table 4.2's parameter sweeps as named groups of workloads.

Each suite has a full variant (the thesis' values, see specs/SEMANTICS.md "Suites" for the values
the thesis leaves open) and a quick variant with the same experiments at toy sizes, a few seconds
of data each, for tests and demos. The committed files in `specs/suites/` are exactly what
`build_suite` returns (a test regenerates and compares them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kit.workload import Comparison, Dataset, Filter, Load, Param, QuerySet, Suite, Workload, format_number
from querygen.micro import (above_threshold, at_most_threshold, id_threshold, q1_filter, q2_count_window,
                            q3_time_window, q4_two_level, q5_window_join, q6_table_join, q7_pattern)

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS


@dataclass(frozen=True)
class Sizes:
    """Run length and nominal rate of a variant (the harness may search for the sustainable rate)."""

    rate_eps: float
    duration_ms: int


FULL = Sizes(rate_eps=10_000.0, duration_ms=10 * MINUTE_MS)    # 4.4.2: >= 10 minutes of steady state
QUICK = Sizes(rate_eps=1_000.0, duration_ms=5_000)


def _pct(fraction: float) -> str:
    """0.001 -> '0.1pct', 0.25 -> '25pct' (for workload names)."""
    return f"{format_number(round(fraction * 100, 6)).removesuffix('.0')}pct"


def _params(**values) -> tuple[Param, ...]:
    return tuple(Param(k, v if isinstance(v, str) else format_number(v)) for k, v in values.items())


def _workload(suite: str, point: str, experiment: str, metrics: tuple[str, ...], dataset: Dataset, load: Load,
              query_list, sharing: str = "independent", description: str = "", **params) -> Workload:
    return Workload(name=f"{suite}-{experiment}-{point}", experiment=experiment, metrics=metrics, dataset=dataset,
                    load=load, query_set=QuerySet(sharing, tuple(query_list)), params=_params(**params),
                    description=description)


def filtering(quick: bool) -> list[Workload]:
    """4.5.1: row selection (selectivity, N = m = 5) and column projection (N attributes, m = 1)."""
    sz, max_id = (QUICK, 100) if quick else (FULL, 1000)
    load = Load("constant", sz.rate_eps, sz.duration_ms)
    out = []
    for sel in ((0.05, 0.5) if quick else (0.01, 0.05, 0.25, 0.50)):
        out.append(_workload("filtering", _pct(sel), "selectivity", ("throughput",),
                             Dataset(attributes=5, max_id=max_id), load,
                             [q1_filter("q1", id_threshold(sel, max_id), 5)], selectivity=sel, attributes=5))
    for n in ((5, 25) if quick else (5, 10, 25, 50, 125)):
        out.append(_workload("filtering", f"n{n}", "projection", ("throughput",),
                             Dataset(attributes=n, max_id=max_id), load,
                             [q1_filter("q1", max_id, 1)], selectivity=1.0, attributes=n))
    return out


def count_windows(quick: bool) -> list[Workload]:
    """4.5.2 (count-based): window size x expiration (sliding S=1, tumbling S=R) x function."""
    sz, max_id = (QUICK, 10) if quick else (FULL, 100)
    sizes = (50,) if quick else (500, 5_000, 50_000, 500_000)
    functions = ("SUM", "MEDIAN") if quick else ("SUM", "AVG", "MAX", "STDEV", "MEDIAN")
    load = Load("constant", sz.rate_eps, sz.duration_ms)
    out = []
    for rows in sizes:
        for expiration, slide in (("sliding", 1), ("tumbling", rows)):
            for f in functions:
                out.append(_workload("count-windows", f"{expiration}-r{rows}-{f.lower()}", "window",
                                     ("throughput", "memory"), Dataset(attributes=1, max_id=max_id), load,
                                     [q2_count_window("q2", rows, slide, f)], rows=rows, expiration=expiration,
                                     function=f))
    return out


def time_windows(quick: bool) -> list[Workload]:
    """4.5.2 (time-based): Q3 and its two-level form Q4, varying the rate, then the window size.

    Runs last 1.5 times the window, as in the thesis' second experiment.
    """
    slide = 1_000
    if quick:
        by_rate, by_size = ((10_000, (500.0,)),), ((1_000.0, (20_000,)),)
    else:
        by_rate = ((10 * MINUTE_MS, (500.0, 5_000.0, 50_000.0, 100_000.0)),)
        by_size = ((100_000.0, (20 * MINUTE_MS, HOUR_MS, 2 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS)),)
    out = []
    points = [("rate", range_ms, rate) for range_ms, rates in by_rate for rate in rates]
    points += [("window-size", range_ms, rate) for rate, sizes in by_size for range_ms in sizes]
    for experiment, range_ms, rate in points:
        load = Load("constant", rate, range_ms * 3 // 2)
        for name, build in (("q3", q3_time_window), ("q4", q4_two_level)):
            point = f"{name}-range{range_ms // 1000}s-rate{format_number(rate).removesuffix('.0')}"
            out.append(_workload("time-windows", point, experiment, ("throughput", "memory"),
                                 Dataset(attributes=1), load, [build(name, range_ms, slide)],
                                 query=name.upper(), range_ms=range_ms, rate_eps=rate))
    return out


def joins(quick: bool) -> list[Workload]:
    """4.5.3: J1-1 window size = maxId; J1-2 join selectivity at a fixed window; J2/J3 table size."""
    sz = QUICK if quick else FULL
    load = Load("constant", sz.rate_eps, sz.duration_ms)
    out = []
    for s in ((100,) if quick else (500, 5_000, 50_000, 500_000)):
        out.append(_workload("joins", f"s{s}", "j1-window-size", ("throughput",),
                             Dataset(streams=2, attributes=2, max_id=s), load, [q5_window_join("j1", s, 2)],
                             rows=s, max_id=s, matches_per_event=1.0))
    rows = 100 if quick else 50_000
    for max_id in ((1_000,) if quick else (5_000, 50_000, 500_000, 5_000_000)):
        out.append(_workload("joins", f"maxid{max_id}", "j1-selectivity", ("throughput",),
                             Dataset(streams=2, attributes=2, max_id=max_id), load,
                             [q5_window_join("j1", rows, 2)], rows=rows, max_id=max_id,
                             matches_per_event=rows / max_id))
    for experiment, storage, sizes in (
            ("j2-memory-table", "memory", (100,) if quick else (1_000, 10_000, 100_000, 1_000_000, 10_000_000)),
            ("j3-database-table", "database",
             (100,) if quick else (1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000))):
        for n in sizes:
            out.append(_workload("joins", f"t{n}", experiment, ("throughput",),
                                 Dataset(attributes=2, max_id=n, table_rows=n, table_attributes=9), load,
                                 [q6_table_join("j" + experiment[1], storage, 2, 9)], table_rows=n,
                                 storage=storage))
    return out


def patterns(quick: bool) -> list[Workload]:
    """4.5.4: interval, ID cardinality and predicate selectivity; plus the four consumption policies."""
    sz = QUICK if quick else FULL
    load = Load("constant", sz.rate_eps, sz.duration_ms)
    if quick:
        base_within, base_max_id, base_sel = 2_000, 10, 0.1
        intervals, cardinalities, selectivities = (1_000,), (100,), (0.5,)
    else:
        base_within, base_max_id, base_sel = MINUTE_MS, 10_000, 0.001
        intervals = tuple(s * 1000 for s in (10, 30, 60, 120, 300, 600))
        cardinalities = (100, 1_000, 10_000, 100_000)
        selectivities = (0.001, 0.005, 0.01, 0.05, 0.10)
    points = [("interval", f"w{w // 1000}s", w, base_max_id, base_sel, "all-all") for w in intervals]
    points += [("cardinality", f"maxid{m}", base_within, m, base_sel, "all-all") for m in cardinalities]
    points += [("selectivity", _pct(s), base_within, base_max_id, s, "all-all") for s in selectivities]
    points += [("consumption", c, base_within, base_max_id, base_sel, c)
               for c in ("all-all", "all-one", "one-all", "one-one")]
    return [_workload("patterns", point, experiment, ("throughput",), Dataset(attributes=1, max_id=max_id), load,
                      [q7_pattern("q7", within, above_threshold(sel), consumption)],
                      within_ms=within, max_id=max_id, selectivity=sel, consumption=consumption)
            for experiment, point, within, max_id, sel, consumption in points]


def adaptivity(quick: bool) -> list[Workload]:
    """4.5.5: Q2 under the burst profile (warm-up, steady, 10 s at 1.5x, recovery).

    rateEps is lambda; the thesis picks it to load the CPU to about 75%.
    """
    rate, duration, rows = (1_000.0, 13_420, 100) if quick else (10_000.0, None, 10_000)
    load = Load("adaptivity", rate, duration)
    metrics = ("max-latency", "latency-degradation", "recovery-time", "post-peak-latency-variation")
    return [_workload("adaptivity", expiration, "burst", metrics, Dataset(attributes=1, max_id=100), load,
                      [q2_count_window("q2", rows, slide, "AVG")], rows=rows, expiration=expiration)
            for expiration, slide in (("sliding", 1), ("tumbling", rows))]


def scalability(quick: bool) -> list[Workload]:
    """4.5.6: N window joins that are identical (sharing computation) or similar (sharing memory).

    Identical: window 1000 rows, maxId 1000 (about one match per event), and a predicate of
    selectivity 1/N on S1.A1 so that all N queries together emit about one row per event.
    Similar: windows spread evenly over [400k, 500k] rows at a low rate, no predicate.
    """
    counts = (1, 4, 16, 64)
    out = []
    rows, max_id = (100, 100) if quick else (1_000, 1_000)
    load = Load("constant", *((QUICK.rate_eps, QUICK.duration_ms) if quick else (FULL.rate_eps, FULL.duration_ms)))
    for n in counts:
        k = at_most_threshold(1 / n)
        queries = [q5_window_join(f"q{i:02d}", rows, 2, (Comparison("S1.A1", "le", k),)) for i in range(1, n + 1)]
        out.append(_workload("scalability", f"n{n}", "identical", ("throughput", "memory"),
                             Dataset(streams=2, attributes=2, max_id=max_id), load, queries, sharing="identical",
                             queries=n, rows=rows))
    lo, hi, max_id = (400, 500, 5_000) if quick else (400_000, 500_000, 5_000_000)
    load = Load("constant", 200.0, 10_000) if quick else Load("constant", 1_000.0, 20 * MINUTE_MS)
    for n in counts:
        sizes = [lo + (hi - lo) * i // max(n - 1, 1) for i in range(n)]
        queries = [q5_window_join(f"q{i + 1:02d}", s, 2) for i, s in enumerate(sizes)]
        out.append(_workload("scalability", f"n{n}", "similar", ("throughput", "memory"),
                             Dataset(streams=2, attributes=2, max_id=max_id), load, queries, sharing="similar",
                             queries=n, rows_min=sizes[0], rows_max=sizes[-1]))
    return out


def ceiling(quick: bool) -> list[Workload]:
    """The kit's own ceiling (specs/SEMANTICS.md "Suites"): the most the kit can feed an engine and
    collect from it, with next to no work in the engine. `null` reads every event and answers none
    (Q1 with ID <= 0: IDs start at 1); `pass-through` answers every event with all its attributes
    (Q1 with ID >= 1). Searched for their sustainable rate they bound every figure the kit
    publishes for that engine and plan: a figure near them is the kit's, not the engine's."""
    sz, max_id = (QUICK, 100) if quick else (FULL, 1000)
    load = Load("constant", sz.rate_eps, sz.duration_ms)
    null = Filter("q1", "S1", ("ID",), (Comparison("ID", "le", 0),))
    everything = Filter("q1", "S1", ("ID", "A1", "A2", "A3", "A4", "A5"), (Comparison("ID", "ge", 1),))
    return [_workload("ceiling", "null", "kit", ("throughput",), Dataset(attributes=5, max_id=max_id), load, [null],
                      description="reads every event, answers none", answered=0),
            _workload("ceiling", "pass-through", "kit", ("throughput",), Dataset(attributes=5, max_id=max_id), load,
                      [everything], description="answers every event with its attributes", answered=1)]


@dataclass(frozen=True)
class SuiteDef:
    name: str
    description: str
    build: Callable[[bool], list[Workload]]


# In the order of kit.shipped.SUITE_NAMES, the one list of the standard suites (a test checks).
SUITES: dict[str, SuiteDef] = {d.name: d for d in (
    SuiteDef("filtering", "Selection and projection (thesis 4.5.1, Q1)", filtering),
    SuiteDef("count-windows", "Aggregation over count-based windows (thesis 4.5.2, Q2)", count_windows),
    SuiteDef("time-windows", "Aggregation over time-based windows, direct and two-level (thesis 4.5.2, Q3/Q4)",
             time_windows),
    SuiteDef("joins", "Window-to-window and stream-to-table joins (thesis 4.5.3, Q5/Q6, J1-J3)", joins),
    SuiteDef("patterns", "Pattern detection SEQ(A a1, A a2) (thesis 4.5.4, Q7)", patterns),
    SuiteDef("adaptivity", "Adaptivity to a burst of input (thesis 4.5.5, Q2)", adaptivity),
    SuiteDef("scalability", "Multiple identical or similar queries (thesis 4.5.6, Q5)", scalability),
    SuiteDef("ceiling", "The kit's own ceiling: a null and a pass-through workload (no thesis figure)", ceiling),
)}


def build_suite(name: str, quick: bool = False) -> Suite:
    """The suite `name` (see `SUITES`), full or quick."""
    d = SUITES[name]
    return Suite(name=d.name, quick=quick, workloads=tuple(d.build(quick)),
                 description=d.description + (" - quick variant" if quick else ""))
