"""Microbenchmark queries as plain literals for generated programs.

A generated program must not depend on cepkit's model classes at run time (it runs in Spark's
Python workers, and a reader should see every parameter in the file itself), so each query becomes
a dict of strings, numbers and lists, written into the program with `repr`. The cores in
`runtime_common/micro_cores/` read these dicts; `query_literal` is the only place that builds them.

Common keys: `id`, `kind` (one of KINDS), `inputs` (stream names the query reads) and `fields`
(output column names in order, ending with `inputTS`; `windowEnd` before it for time windows)
with `types` (their logical types: int, long, double).
"""

from __future__ import annotations

from kit.errors import CepkitError
from kit.workload import (CountWindowAggregation, Filter, Pattern, Query, TableJoin, TimeWindowAggregation,
                          TwoLevelAggregation, WindowJoin)

KINDS = ("filter", "count_window", "time_window", "window_join", "table_join", "pattern")


def _where(where) -> list[list]:
    return [[c.field, c.op, float(c.value)] for c in where]


def _aggregates(aggs) -> list[list]:
    return [[a.function, a.field, a.alias] for a in aggs]


def query_literal(query: Query) -> dict:
    """The dict a generated program holds for `query` (see the module docstring for the keys)."""
    fields = query.output_fields()
    out = {"id": query.id, "inputs": list(query.inputs), "fields": [n for n, _ in fields],
           "types": [t for _, t in fields]}
    if isinstance(query, Filter):
        out.update(kind="filter", select=list(query.select), where=_where(query.where))
    elif isinstance(query, CountWindowAggregation):
        out.update(kind="count_window", rows=query.rows, slide=query.slide,
                   aggregates=_aggregates(query.aggregates), group_by=list(query.group_by))
    elif isinstance(query, (TimeWindowAggregation, TwoLevelAggregation)):
        # Q4 differs from Q3 only in its plan (panes of slideMs); the answer is the same.
        out.update(kind="time_window", range_ms=query.range_ms, slide_ms=query.slide_ms,
                   aggregates=_aggregates(query.aggregates), group_by=list(query.group_by),
                   paned=isinstance(query, TwoLevelAggregation))
    elif isinstance(query, WindowJoin):
        out.update(kind="window_join", left=query.left, right=query.right, rows=query.rows,
                   left_key=query.left_key, right_key=query.right_key, select=list(query.select),
                   where=_where(query.where))
    elif isinstance(query, TableJoin):
        out.update(kind="table_join", input=query.input, table=query.table, storage=query.storage,
                   stream_key=query.stream_key, table_key=query.table_key, select=list(query.select),
                   where=_where(query.where))
    elif isinstance(query, Pattern):
        out.update(kind="pattern", within_ms=query.within_ms, consumption=query.consumption,
                   select=list(query.select), key=query.key,
                   first={"alias": query.first.alias, "stream": query.first.stream,
                          "where": _where(query.first.where)},
                   second={"alias": query.second.alias, "stream": query.second.stream,
                           "where": _where(query.second.where)})
    else:
        raise CepkitError(f"query {query.id}: no translation for query kind {type(query).__name__}")
    return out
