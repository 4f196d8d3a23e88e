"""Microbenchmark queries (thesis chapter 4, Q1-Q7) as frozen dataclasses, and the QuerySet of a workload.

One class per query kind; `KIND` is its XML element name. A query names its input stream(s) and
its output fields (the field names and what the kinds share are in kit.workload.query_base).
Checks that need the dataset (does stream S2 exist, is there an A7) are made by
`check_against`, which the workload calls. What each kind computes, and when, is written down in
`specs/SEMANTICS.md`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Union

from kit.config.limits import INT32_MAX
from kit.records import Field, RecordSchema
from kit.workload.common import Comparison, SpecError, as_tuple, identifier, integer, need, one_of
from kit.workload.query_base import (PANE_FUNCTIONS, Aggregate, Aggregation, OneInput, Schema, Selecting, TimeWindow,
                                     check_select, split_qualified)

CONSUMPTION_POLICIES = ("all-all", "all-one", "one-all", "one-one")
TABLE_STORAGE = ("memory", "database")
SHARING = ("independent", "identical", "similar")


@dataclass(frozen=True)
class Filter(OneInput, Selecting):
    """Q1: `SELECT select FROM input WHERE where` (all comparisons must hold)."""

    KIND: ClassVar[str] = "Filter"
    THESIS: ClassVar[str] = "Q1"
    id: str
    input: str
    select: tuple[str, ...]
    where: tuple[Comparison, ...] = ()

    def __post_init__(self) -> None:
        as_tuple(self, "select", "where")
        identifier("id", self.id)
        check_select(self.select, qualified=False)
        self._check_outputs()

    def check_against(self, schema: Schema) -> None:
        fields = self._fields_of(schema, self.input)
        for f in self.select + tuple(c.field for c in self.where):
            self._has(fields, f, f"input {self.input}")


@dataclass(frozen=True)
class CountWindowAggregation(Aggregation):
    """Q2: `SELECT groupBy, f(A) FROM input [ROWS rows SLIDE slide] GROUP BY groupBy`."""

    KIND: ClassVar[str] = "CountWindowAggregation"
    THESIS: ClassVar[str] = "Q2"
    id: str
    input: str
    rows: int
    slide: int
    aggregates: tuple[Aggregate, ...]
    group_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        integer("rows", self.rows, 1, maximum=INT32_MAX)
        integer("slide", self.slide, 1, maximum=INT32_MAX)
        need(self.slide <= self.rows, f"slide must be <= rows ({self.rows}), got {self.slide}")
        self._check_aggregation()

    @property
    def tumbling(self) -> bool:
        return self.slide == self.rows


@dataclass(frozen=True)
class TimeWindowAggregation(TimeWindow):
    """Q3: `SELECT groupBy, f(A) FROM input [RANGE rangeMs SLIDE slideMs] GROUP BY groupBy`."""

    KIND: ClassVar[str] = "TimeWindowAggregation"
    THESIS: ClassVar[str] = "Q3"
    id: str
    input: str
    range_ms: int
    slide_ms: int
    aggregates: tuple[Aggregate, ...]
    group_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._check_window()
        self._check_aggregation()


@dataclass(frozen=True)
class TwoLevelAggregation(TimeWindow):
    """Q4: Q3 computed in two levels: partials per pane of `slideMs`, then over the last `rangeMs`.

    Its results are by definition those of the TimeWindowAggregation with the same parameters;
    only functions computable from partials are allowed (no MEDIAN).
    """

    KIND: ClassVar[str] = "TwoLevelAggregation"
    THESIS: ClassVar[str] = "Q4"
    _FUNCTIONS: ClassVar[tuple[str, ...]] = PANE_FUNCTIONS
    id: str
    input: str
    range_ms: int
    slide_ms: int
    aggregates: tuple[Aggregate, ...]
    group_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._check_window()
        self._check_aggregation()

    @property
    def pane_ms(self) -> int:
        return self.slide_ms

    def single_level(self) -> TimeWindowAggregation:
        """The Q3 query whose results this one must reproduce."""
        return TimeWindowAggregation(self.id, self.input, self.range_ms, self.slide_ms, self.aggregates,
                                     self.group_by)


def _check_qualified_where(where: tuple[Comparison, ...]) -> None:
    for c in where:
        split_qualified(c.field)


@dataclass(frozen=True)
class WindowJoin(Selecting):
    """Q5 / J1: `SELECT select FROM left [ROWS rows SLIDE 1], right [ROWS rows SLIDE 1]
    WHERE left.leftKey = right.rightKey AND where`; fields are qualified by stream name."""

    KIND: ClassVar[str] = "WindowJoin"
    THESIS: ClassVar[str] = "Q5"
    id: str
    left: str
    right: str
    rows: int
    left_key: str
    right_key: str
    select: tuple[str, ...]
    where: tuple[Comparison, ...] = ()

    def __post_init__(self) -> None:
        as_tuple(self, "select", "where")
        identifier("id", self.id)
        need(self.left != self.right, f"left and right must be different streams, both are {self.left}")
        integer("rows", self.rows, 1, maximum=INT32_MAX)
        check_select(self.select, qualified=True)
        _check_qualified_where(self.where)
        self._check_outputs()

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.left, self.right)

    def check_against(self, schema: Schema) -> None:
        fields = {s: self._fields_of(schema, s) for s in self.inputs}
        self._has(fields[self.left], self.left_key, f"input {self.left}")
        self._has(fields[self.right], self.right_key, f"input {self.right}")
        self._has_qualified(fields, self.select + tuple(c.field for c in self.where))


@dataclass(frozen=True)
class TableJoin(OneInput, Selecting):
    """Q6 / J2, J3: `SELECT select FROM input, table WHERE input.streamKey = table.tableKey AND where`.

    `storage` says where the table lives: `memory` (J2, the engine holds it) or `database` (J3,
    a relation of an external DBMS that the engine queries).
    """

    KIND: ClassVar[str] = "TableJoin"
    THESIS: ClassVar[str] = "Q6"
    id: str
    input: str
    table: str
    storage: str
    stream_key: str
    table_key: str
    select: tuple[str, ...]
    where: tuple[Comparison, ...] = ()

    def __post_init__(self) -> None:
        as_tuple(self, "select", "where")
        identifier("id", self.id)
        one_of("storage", self.storage, TABLE_STORAGE)
        check_select(self.select, qualified=True)
        _check_qualified_where(self.where)
        self._check_outputs()

    @property
    def thesis_name(self) -> str:
        return "J3" if self.storage == "database" else "J2"

    def check_against(self, schema: Schema) -> None:
        stream_fields = self._fields_of(schema, self.input)
        table_fields = schema.table_fields(self.table)
        need(table_fields is not None, f"query {self.id}: the dataset has no table {self.table} "
                                       f"(set tableRows > 0)", self.id)
        self._has(stream_fields, self.stream_key, f"input {self.input}")
        self._has(table_fields, self.table_key, f"table {self.table}")
        self._has_qualified({self.input: stream_fields, self.table: table_fields},
                            self.select + tuple(c.field for c in self.where))


@dataclass(frozen=True)
class PatternEvent:
    """One element of a SEQ pattern: an alias bound to events of `stream` that satisfy `where`."""

    alias: str
    stream: str
    where: tuple[Comparison, ...] = ()

    def __post_init__(self) -> None:
        as_tuple(self, "where")
        identifier("alias", self.alias)
        for c in self.where:
            need("." not in c.field, f"Where in a pattern Event names a field of that event, got {c.field!r}")


@dataclass(frozen=True)
class Pattern(Selecting):
    """Q7: `SEQ(first, second) WHERE first.key = second.key AND <Event predicates> WITHIN withinMs`,
    with the ALL/ONE consumption policy of section 4.2.2 given for each element (`all-one` means
    ALL first -> ONE second)."""

    KIND: ClassVar[str] = "Pattern"
    THESIS: ClassVar[str] = "Q7"
    id: str
    first: PatternEvent
    second: PatternEvent
    within_ms: int
    consumption: str
    select: tuple[str, ...]
    key: str | None = "ID"

    def __post_init__(self) -> None:
        as_tuple(self, "select")
        identifier("id", self.id)
        need(self.first.alias != self.second.alias,
             f"the two Events need different aliases, both are {self.first.alias}")
        integer("withinMs", self.within_ms, 1)
        one_of("consumption", self.consumption, CONSUMPTION_POLICIES)
        check_select(self.select, qualified=True)
        for name in self.select:
            alias, _ = split_qualified(name)
            need(alias in (self.first.alias, self.second.alias),
                 f"select: {name} names neither {self.first.alias} nor {self.second.alias}")
        self._check_outputs()

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.first.stream, self.second.stream)))

    @property
    def first_policy(self) -> str:
        return self.consumption.split("-")[0].upper()

    @property
    def second_policy(self) -> str:
        return self.consumption.split("-")[1].upper()

    def check_against(self, schema: Schema) -> None:
        by_alias = {}
        for ev in (self.first, self.second):
            by_alias[ev.alias] = fields = self._fields_of(schema, ev.stream)
            for c in ev.where:
                self._has(fields, c.field, f"input {ev.stream}")
            if self.key is not None:
                self._has(fields, self.key, f"input {ev.stream}")
        self._has_qualified(by_alias, self.select, kind="event")


Query = Union[Filter, CountWindowAggregation, TimeWindowAggregation, TwoLevelAggregation, WindowJoin, TableJoin,
              Pattern]
QUERY_CLASSES: tuple[type, ...] = (Filter, CountWindowAggregation, TimeWindowAggregation, TwoLevelAggregation,
                                   WindowJoin, TableJoin, Pattern)


@dataclass(frozen=True)
class QuerySet:
    """The queries one workload runs together (thesis 4.5.6: N identical or N similar queries).

    `identical`: all queries equal but for their ids (tests computation sharing); `similar`: all
    of one kind, parameters may differ (tests memory sharing); `independent`: no relation claimed.
    """

    sharing: str
    queries: tuple[Query, ...]

    def __post_init__(self) -> None:
        as_tuple(self, "queries")
        one_of("sharing", self.sharing, SHARING)
        need(len(self.queries) > 0, "a QuerySet needs at least one query")
        seen: set[str] = set()
        for q in self.queries:
            need(isinstance(q, QUERY_CLASSES), f"not a query: {q!r}")
            need(q.id not in seen, f"duplicate query id {q.id}", q.id)
            seen.add(q.id)
        head = self.queries[0]
        for q in self.queries[1:]:
            if self.sharing == "identical":
                need(dataclasses.replace(q, id=head.id) == head,
                     f"query {q.id} differs from {head.id} in more than its id (sharing=identical)", q.id)
            elif self.sharing == "similar":
                need(type(q) is type(head), f"query {q.id} is a {q.KIND}, not a {head.KIND} (sharing=similar)", q.id)

    def __len__(self) -> int:
        return len(self.queries)


def check_queries(query_set: QuerySet, schema: Schema) -> None:
    for q in query_set.queries:
        try:
            q.check_against(schema)
        except SpecError as e:
            raise SpecError(e.message, e.ref or q.id) from None


def output_schema(query: Query) -> RecordSchema:
    """The record schema of a query's output stream, named after the query id."""
    return RecordSchema(query.id, tuple(Field(n, t) for n, t in query.output_fields()))
