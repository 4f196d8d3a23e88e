"""The microbenchmark cores: the logic of every query kind an engine has no operator for.

One module per kind (count_window, time_window, window_join, pattern), plain numpy/pandas and no
engine, so each is tested on its own against the validator's independent reference, and every
engine runs the same code: Spark (spark_runtime/micro_plan.py, driver_cores.py) inside one
`transformWithStateInPandas` operator, one group per query, or on its driver; Flink
(flink_runtime/micro.py) in a keyed function, one key per query.

A core class has `__init__(q)` (q: a query literal, translators/micro_literal.py),
`initial_state() -> dict` and `process(state, events) -> pandas.DataFrame`: `events` is one
micro-batch's events of the query's input streams (or, for a pattern with a key, of some of its
keys) as a pandas DataFrame sorted by `offset` (columns ID, A1..AN, TS, stream, offset,
ingestTS), `state` the dict of the previous call as stored and read back by `state_codec`
(scalars, lists, dicts, numpy arrays; updated in place, bounded by the window), and the result
the output rows, columns `q["fields"]`, in the reference order. A core works on whole arrays: no
Python loop per event.
"""

from __future__ import annotations

from runtime_common.micro_cores.count_window import CountWindowCore
from runtime_common.micro_cores.pattern import PatternCore
from runtime_common.micro_cores.pattern_chunks import ChunkedPatternCore
from runtime_common.micro_cores.time_window import TimeWindowCore
from runtime_common.micro_cores.window_join import WindowJoinCore

# query kind -> its core class (the kinds that need a stateful operator)
CORES = {
    "count_window": CountWindowCore,
    "time_window": TimeWindowCore,
    "window_join": WindowJoinCore,
    "pattern": PatternCore,
}


def chunked(q) -> bool:
    """Whether query literal `q` runs on the chunked pattern core: a keyed pattern that never
    consumes a candidate (ALL on the first element)."""
    return q["kind"] == "pattern" and bool(q.get("key")) and q["consumption"].startswith("all-")


def core_for(q):
    """The core that runs query literal `q`: its kind's, except a chunked pattern (`chunked`),
    whose candidates go in append-only chunks (pattern_chunks.py) so a batch costs its events, not
    the window."""
    return ChunkedPatternCore(q) if chunked(q) else CORES[q["kind"]](q)
