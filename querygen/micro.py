"""The chapter 4 queries Q1-Q7 as builders, and the thresholds that give a wanted selectivity.

Each builder returns one query of `kit.workload` with the thesis' shape (figures 4.2, 4.4, 4.8,
4.10, 4.12, 4.14); the suites vary their parameters. Thresholds assume Table 4.1's data: IDs
equiprobable in 1..maxId, attributes uniform on [1, 100).
"""

from __future__ import annotations

from kit.workload import (Aggregate, Comparison, CountWindowAggregation, Filter, Pattern, PatternEvent, TableJoin,
                          TimeWindowAggregation, TwoLevelAggregation, WindowJoin)

ATTR_LOW, ATTR_HIGH = 1.0, 100.0


def id_threshold(selectivity: float, max_id: int) -> int:
    """K such that `ID <= K` keeps `selectivity` of the events."""
    k = round(selectivity * max_id)
    if not 1 <= k <= max_id:
        raise ValueError(f"selectivity {selectivity} is not reachable with maxId {max_id}")
    return k


def above_threshold(selectivity: float) -> float:
    """K such that `A > K` holds for `selectivity` of uniform attributes."""
    return round(ATTR_HIGH - selectivity * (ATTR_HIGH - ATTR_LOW), 9)


def at_most_threshold(selectivity: float) -> float:
    """K such that `A <= K` holds for `selectivity` of uniform attributes."""
    return round(ATTR_LOW + selectivity * (ATTR_HIGH - ATTR_LOW), 9)


def attributes(n: int, prefix: str = "A") -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


def stream_fields(stream: str, n: int) -> tuple[str, ...]:
    """Every field of a stream, qualified: `S1.ID S1.A1 .. S1.An S1.TS` (SELECT * of a join)."""
    return tuple(f"{stream}.{f}" for f in ("ID", *attributes(n), "TS"))


def q1_filter(qid: str, k: int, m: int, stream: str = "S1") -> Filter:
    """Q1: SELECT ID, A1..Am FROM stream WHERE ID <= K."""
    return Filter(qid, stream, ("ID", *attributes(m)), (Comparison("ID", "le", k),))


def q2_count_window(qid: str, rows: int, slide: int, function: str, stream: str = "S1") -> CountWindowAggregation:
    """Q2: SELECT ID, f(A1) FROM stream [ROWS rows SLIDE slide] GROUP BY ID."""
    return CountWindowAggregation(qid, stream, rows, slide, (Aggregate(function, "A1", f"{function.lower()}A1"),),
                                  ("ID",))


def q3_time_window(qid: str, range_ms: int, slide_ms: int, function: str = "AVG",
                   stream: str = "S1") -> TimeWindowAggregation:
    """Q3: SELECT f(A1) FROM stream [RANGE range SLIDE slide]."""
    return TimeWindowAggregation(qid, stream, range_ms, slide_ms, (Aggregate(function, "A1", f"{function.lower()}A1"),))


def q4_two_level(qid: str, range_ms: int, slide_ms: int, function: str = "AVG",
                 stream: str = "S1") -> TwoLevelAggregation:
    """Q4: Q3 computed from per-slide partials (SUM(s)/SUM(c) over panes for AVG)."""
    return TwoLevelAggregation(qid, stream, range_ms, slide_ms, (Aggregate(function, "A1", f"{function.lower()}A1"),))


def q5_window_join(qid: str, rows: int, n_attributes: int, where: tuple[Comparison, ...] = (),
                   left: str = "S1", right: str = "S2") -> WindowJoin:
    """Q5: SELECT * FROM left [ROWS rows SLIDE 1], right [ROWS rows SLIDE 1] WHERE left.ID = right.ID."""
    return WindowJoin(qid, left, right, rows, "ID", "ID",
                      stream_fields(left, n_attributes) + stream_fields(right, n_attributes), where)


def q6_table_join(qid: str, storage: str, n_attributes: int, table_attributes: int,
                  stream: str = "S1") -> TableJoin:
    """Q6: SELECT * FROM stream, T WHERE stream.ID = T.ID, T in memory (J2) or in a database (J3)."""
    select = stream_fields(stream, n_attributes) + tuple(f"T.{f}" for f in ("ID", *attributes(table_attributes, "T")))
    return TableJoin(qid, stream, "T", storage, "ID", "ID", select)


def q7_pattern(qid: str, within_ms: int, k: float, consumption: str = "all-all", stream: str = "S1") -> Pattern:
    """Q7: SEQ(A a1, A a2) WHERE a1.ID = a2.ID AND a2.A1 > K WITHIN within."""
    return Pattern(qid, PatternEvent("a1", stream), PatternEvent("a2", stream, (Comparison("A1", "gt", k),)),
                   within_ms, consumption, ("a1.ID", "a1.A1", "a1.TS", "a2.A1"), key="ID")
