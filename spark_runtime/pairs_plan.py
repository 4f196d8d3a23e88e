"""The Pairs plan on Spark: the strategies' logic (spark_runtime/pairs_core.py) in a stateful operator.

Why a stateful processor and not DataFrame operators: Spark has no count windows and no CEP
language. A period closes at the first tick of a later period *of any symbol*, in event order,
and the count window, the band crossings (which compare with the previous Indicator) and the
position machine are sequential over a strategy's history. Spark's time windows close on the
watermark instead, at a batch boundary, and cannot see the previous window's result. So the logic
runs in `transformWithStateInPandas` (arbitrary state API v2), with the state in Spark's RocksDB
state store, checkpointed with every micro-batch; the input arrives in driver offset order only
after sorting inside the operator, since a shuffle does not keep row order.

Plans (specs/TRANSLATION.md): "shared", one stateful operator serves every strategy and the
per (periodLength, symbol) period sums and counts are computed once for all strategies with that
period length; "per-strategy", one independent pipeline per strategy (projection, stateful
operator) unioned into one output, as a naive engine would do it.
"""

from __future__ import annotations

import json
from typing import Iterator

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StringType, StructField, StructType

from spark_runtime.pairs_core import OUTPUT_SCHEMA, OUTPUT_STREAMS, PairsCore

_STATE_SCHEMA = StructType([StructField("json", StringType())])


class PairsProcessor(StatefulProcessor):
    """The Spark side of PairsCore: its state lives in one value state of the RocksDB store."""

    def __init__(self, strategies):
        self.strategies = tuple(strategies)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.core = PairsCore(self.strategies)
        self.state = handle.getValueState("pairs", _STATE_SCHEMA)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        ticks = pd.concat(list(rows), ignore_index=True)
        state = json.loads(self.state.get()[0]) if self.state.exists() else self.core.initial_state()
        out = self.core.process(state, ticks)
        self.state.update((json.dumps(state, separators=(",", ":")),))
        if len(out):
            yield out

    def close(self) -> None:
        pass


def _stateful(events, strategies, group: str):
    """Project the ticks a group of strategies needs and run the stateful operator over them.

    Ticks of symbols the group does not monitor still advance the period clock, so they stay,
    with symbol and price nulled (a few bytes instead of a string on the way through the shuffle).
    """
    symbols = sorted({s[1] for s in strategies} | {s[2] for s in strategies})
    mine = F.col("symbol").isin(symbols)
    return (events
            .select(F.when(mine, F.col("symbol")).alias("symbol"), F.when(mine, F.col("price")).alias("price"),
                    "tickTS", "TS", "offset", "ingestTS", F.lit(group).alias("group"))
            .groupBy("group")
            .transformWithStateInPandas(PairsProcessor(strategies), OUTPUT_SCHEMA, "Append", "None"))


def build_pairs(spark, events, strategies, plan: str):
    """The streaming plan: driver events in, one DataFrame of Indicator and MarketOrder rows out."""
    if plan == "shared":
        return _stateful(events, strategies, "all"), OUTPUT_STREAMS
    if plan != "per-strategy":       # the translator checked it against kit.config.PLANS
        raise ValueError(f"unknown Pairs plan {plan!r}")
    branches = [_stateful(events, (s,), s[0]) for s in strategies]
    out = branches[0]
    for branch in branches[1:]:
        out = out.unionByName(branch)
    return out, OUTPUT_STREAMS
