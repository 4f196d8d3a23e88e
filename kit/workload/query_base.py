"""What every microbenchmark query is built from: field names, `Aggregate` and the shared behaviour.

Inputs follow Table 4.1: streams `S1, S2, ...` with fields `ID` (int), `A1..AN` (double) and `TS`
(long, ms); the join table `T` has `ID` and `T1..TM` (double). Every output row of a query also
carries `inputTS`, the `TS` of the event that triggered it, which FINCoS-style latency needs. The
base classes here give the query kinds of kit.workload.queries their inputs, output fields and
checks against the dataset's `Schema`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Protocol

from kit.workload.common import as_tuple, identifier, integer, need, one_of

FUNCTIONS = ("SUM", "AVG", "MAX", "MIN", "STDEV", "MEDIAN", "COUNT")
# Functions that can be computed from per-pane partials (thesis footnote 7: distributive or algebraic).
PANE_FUNCTIONS = ("SUM", "AVG", "MAX", "MIN", "STDEV", "COUNT")
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


class OneInput(_Query):
    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input,)


class Selecting(_Query):
    """Queries whose output is a `select` list of (possibly qualified) input fields."""

    def output_fields(self) -> tuple[tuple[str, str], ...]:
        return tuple((out_name(s), field_type(s.rpartition(".")[2]) or "double") for s in self.select) \
            + ((INPUT_TS, "long"),)


def check_select(select: tuple[str, ...], qualified: bool) -> None:
    need(len(select) > 0, "select must name at least one field")
    for name in select:
        if qualified:
            split_qualified(name)
        else:
            need("." not in name, f"select: {name!r} must not be qualified here")


class Aggregation(OneInput):
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


class TimeWindow(Aggregation):
    _WINDOW_END: ClassVar[bool] = True

    def _check_window(self) -> None:
        integer("rangeMs", self.range_ms, 1)
        integer("slideMs", self.slide_ms, 1)
        need(self.range_ms % self.slide_ms == 0,
             f"rangeMs ({self.range_ms}) must be a multiple of slideMs ({self.slide_ms})")

