"""Reference answers for every microbenchmark query kind (specs/SEMANTICS.md).

`expected_outputs(query_set, streams, table)` gives, per query id, the rows the query must
produce over the inputs, with the output fields of `kit.workload.output_schema(query)` in the
reference order. Queries of a set are answered independently (section 9). Pure numpy/pandas;
nothing here is shared with a translator or the harness.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kit.errors import CepkitError
from kit.workload import (CountWindowAggregation, Filter, Pattern, Query, QuerySet, TableJoin,
                          TimeWindowAggregation, TwoLevelAggregation, WindowJoin)
from kit.workload.query_base import INPUT_TS
from validator.micro_inputs import load_micro_dataset, where_mask
from validator.micro_joins import table_join, window_join
from validator.micro_patterns import pattern_matches
from validator.micro_windows import count_window, time_window


def _stream(streams: dict[str, pd.DataFrame], name: str, query: Query) -> pd.DataFrame:
    if name not in streams:
        raise CepkitError(f"query {query.id}: the dataset has no stream {name} (has {', '.join(streams)})")
    return streams[name]


def filter_rows(query: Filter, df: pd.DataFrame) -> pd.DataFrame:
    kept = df[where_mask(df, query.where)]
    out = kept[list(query.select)].copy()
    out[INPUT_TS] = kept["TS"].to_numpy()
    return out.reset_index(drop=True)


def expected_for_query(query: Query, streams: dict[str, pd.DataFrame], table: pd.DataFrame | None) -> pd.DataFrame:
    if isinstance(query, Filter):
        return filter_rows(query, _stream(streams, query.input, query))
    if isinstance(query, CountWindowAggregation):
        return count_window(query, _stream(streams, query.input, query))
    if isinstance(query, TwoLevelAggregation):
        return time_window(query.single_level(), _stream(streams, query.input, query))
    if isinstance(query, TimeWindowAggregation):
        return time_window(query, _stream(streams, query.input, query))
    if isinstance(query, WindowJoin):
        return window_join(query, _stream(streams, query.left, query), _stream(streams, query.right, query))
    if isinstance(query, TableJoin):
        if table is None:
            raise CepkitError(f"query {query.id}: the dataset has no join table {query.table}")
        return table_join(query, _stream(streams, query.input, query), table)
    if isinstance(query, Pattern):
        for name in {query.first.stream, query.second.stream}:
            _stream(streams, name, query)
        return pattern_matches(query, streams)
    raise CepkitError(f"query {query.id}: no reference for query kind {type(query).__name__}")


def expected_outputs(query_set: QuerySet, streams: dict[str, pd.DataFrame],
                     table: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    return {q.id: expected_for_query(q, streams, table) for q in query_set.queries}


def expected_for_dataset(query_set: QuerySet, dataset_dir: Path) -> dict[str, pd.DataFrame]:
    streams, table = load_micro_dataset(dataset_dir)
    return expected_outputs(query_set, streams, table)
