"""Microbenchmark queries (thesis chapter 4, Q1-Q7) as frozen dataclasses.

One class per query kind; `KIND` is its XML element name. A query names its input stream(s) and
its output fields; every output row also carries `inputTS`, the `TS` of the event that triggered
it, which FINCoS-style latency needs. Inputs follow Table 4.1: streams `S1, S2, ...` with fields
`ID` (int), `A1..AN` (double) and `TS` (long, ms); the join table `T` has `ID` and `T1..TM`
(double). Checks that need the dataset (does stream S2 exist, is there an A7) are made by
`check_against`, which the workload calls. What each kind computes, and when, is written down in
`specs/SEMANTICS.md`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import ClassVar, Protocol, Union

from kit.records import Field, RecordSchema
from kit.workload.common import Comparison, SpecError, as_tuple, identifier, integer, need, one_of

FUNCTIONS = ("SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN", "COUNT")
# Functions that can be computed from per-pane partials (thesis footnote 7: distributive or algebraic).
PANE_FUNCTIONS = ("SUM", "AVG", "MAX", "MIN", "STDEV", "COUNT")
CONSUMPTION_POLICIES = ("all-all", "all-one", "one-all", "one-one")
TABLE_STORAGE = ("memory", "database")
SHARING = ("independent", "identical", "similar")
TABLE_NAME = "T"
INPUT_TS = "inputTS"
WINDOW_END = "windowEnd"      # exclusive end (ms) of a time window's result

_ATTR_RE = re.compile(r"([AT])([1-9][0-9]*)\Z")


def field_type(name: str) -> str | None:
    """Logical type of a stream or table field, by its Table 4.1 name; None for an unknown name."""
    if name == "ID":
        return "int"
    if name == "TS":
        return "long"
    return "double" if _ATTR_RE.match(name) else None


class Schema(Protocol):
    """What a query needs to know about its inputs (implemented by `Dataset`)."""

    def stream_fields(self, stream: str) -> tuple[str, ...] | None: ...

    def table_fields(self, table: str) -> tuple[str, ...] | None: ...


def split_qualified(name: str) -> tuple[str, str]:
    """`S1.A1` -> ("S1", "A1"); the output column of a qualified field is `S1_A1`."""
    head, dot, tail = name.partition(".")
    need(bool(dot) and bool(head) and bool(tail), f"{name!r} must be qualified, like S1.A1")
    return head, tail


def out_name(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class Aggregate:
    """`function(field) AS alias`; COUNT may omit the field (it counts events)."""

    function: str
    field: str | None
    alias: str

    def __post_init__(self) -> None:
        one_of("function", self.function, FUNCTIONS)
        need(self.field is not None or self.function == "COUNT", f"{self.function} needs a field")
        if self.field is not None:
            need(bool(_ATTR_RE.match(self.field)) and self.field.startswith("A"),
                 f"field of {self.function} must be an attribute A1..AN, got {self.field!r}")
        identifier("as", self.alias)

    @property
    def out_type(self) -> str:
        return "long" if self.function == "COUNT" else "double"

    def __str__(self) -> str:
        return f"{self.function}({self.field or '*'}) AS {self.alias}"


class _Query:
    """Behaviour shared by the query classes (kept out of the dataclass fields).

    Every query class has `id`, `inputs` (its stream names), `output_fields()` ((name, type)
    pairs, ending with inputTS) and `check_against(schema)`.
    """

    KIND: ClassVar[str]
    THESIS: ClassVar[str]      # the thesis' name of the query kind (Table 4.1): Q1 ... Q7

    @property
    def thesis_name(self) -> str:
        """Q1 ... Q7, with a table join named J2 (table in the engine) or J3 (in a database)."""
        return self.THESIS

    def _check_outputs(self) -> None:
        names = [n for n, _ in self.output_fields()]
        for n in names:
            need(names.count(n) == 1, f"output field {n} appears twice")

    def _fields_of(self, schema: Schema, stream: str) -> tuple[str, ...]:
        fields = schema.stream_fields(stream)
        need(fields is not None, f"query {self.id}: unknown input stream {stream}", self.id)
        return fields

    def _has(self, fields: tuple[str, ...], name: str, where: str) -> None:
        need(name in fields, f"query {self.id}: {where} has no field {name}", self.id)

    def _has_qualified(self, sources: dict[str, tuple[str, ...]], names, kind: str = "input") -> None:
        """Each `src.field` in `names` must name one of `sources` and one of its fields."""
        for name in names:
            src, f = split_qualified(name)
            need(src in sources, f"query {self.id}: {name} names neither {' nor '.join(sources)}", self.id)
            self._has(sources[src], f, f"{'table' if src == TABLE_NAME else kind} {src}")


class _OneInput(_Query):
    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input,)


class _Selecting(_Query):
    """Queries whose output is a `select` list of (possibly qualified) input fields."""

    def output_fields(self) -> tuple[tuple[str, str], ...]:
        return tuple((out_name(s), field_type(s.rpartition(".")[2]) or "double") for s in self.select) \
            + ((INPUT_TS, "long"),)


def _check_select(select: tuple[str, ...], qualified: bool) -> None:
    need(len(select) > 0, "select must name at least one field")
    for name in select:
        if qualified:
            split_qualified(name)
        else:
            need("." not in name, f"select: {name!r} must not be qualified here")


class _Aggregation(_OneInput):
    """Aggregations: groupBy fields, then one column per Aggregate (then windowEnd for time windows)."""

    _FUNCTIONS: ClassVar[tuple[str, ...]] = FUNCTIONS
    _WINDOW_END: ClassVar[bool] = False

    def _check_aggregation(self) -> None:
        as_tuple(self, "group_by", "aggregates")
        identifier("id", self.id)
        need(len(self.aggregates) > 0, f"query {self.id} needs at least one Aggregate")
        for a in self.aggregates:
            need(a.function in self._FUNCTIONS,
                 f"{a.function} cannot be computed in two levels (allowed: {','.join(self._FUNCTIONS)})")
        for g in self.group_by:
            need(g == "ID" or (bool(_ATTR_RE.match(g)) and g.startswith("A")),
                 f"groupBy must name ID or attributes A1..AN, got {g!r}")
        self._check_outputs()

    def output_fields(self) -> tuple[tuple[str, str], ...]:
        return (tuple((g, field_type(g) or "double") for g in self.group_by)
                + tuple((a.alias, a.out_type) for a in self.aggregates)
                + (((WINDOW_END, "long"),) if self._WINDOW_END else ()) + ((INPUT_TS, "long"),))

    def check_against(self, schema: Schema) -> None:
        fields = self._fields_of(schema, self.input)
        for name in self.group_by + tuple(a.field for a in self.aggregates if a.field is not None):
            self._has(fields, name, f"input {self.input}")


class _TimeWindow(_Aggregation):
    _WINDOW_END: ClassVar[bool] = True

    def _check_window(self) -> None:
        integer("rangeMs", self.range_ms, 1)
        integer("slideMs", self.slide_ms, 1)
        need(self.range_ms % self.slide_ms == 0,
             f"rangeMs ({self.range_ms}) must be a multiple of slideMs ({self.slide_ms})")


@dataclass(frozen=True)
class Filter(_OneInput, _Selecting):
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
        _check_select(self.select, qualified=False)
        self._check_outputs()

    def check_against(self, schema: Schema) -> None:
        fields = self._fields_of(schema, self.input)
        for f in self.select + tuple(c.field for c in self.where):
            self._has(fields, f, f"input {self.input}")


@dataclass(frozen=True)
class CountWindowAggregation(_Aggregation):
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
        integer("rows", self.rows, 1)
        integer("slide", self.slide, 1)
        need(self.slide <= self.rows, f"slide must be <= rows ({self.rows}), got {self.slide}")
        self._check_aggregation()

    @property
    def tumbling(self) -> bool:
        return self.slide == self.rows


@dataclass(frozen=True)
class TimeWindowAggregation(_TimeWindow):
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
class TwoLevelAggregation(_TimeWindow):
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
class WindowJoin(_Selecting):
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
        integer("rows", self.rows, 1)
        _check_select(self.select, qualified=True)
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
class TableJoin(_OneInput, _Selecting):
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
        _check_select(self.select, qualified=True)
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
class Pattern(_Selecting):
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
        _check_select(self.select, qualified=True)
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
