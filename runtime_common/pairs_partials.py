"""Ticks to partial aggregates: the per-tick work of Pairs, done once and vectorized, no Spark.

Every strategy needs the same few numbers of a closed period: per symbol the integer price sum,
the tick count and the last trade price, plus the tick that closed the period (the first tick of
a later period of any symbol, PAIRS_SEMANTICS.md section 2). None of it depends on a strategy,
so the plan computes it per tick once, per source partition and micro-batch, over the smallest
time unit that every period length is a multiple of (the *granule*: the gcd of the periods, 5 s
for Table B.1's). A period is a run of whole granules, so period aggregates are sums of granule
aggregates. The result of a partition is a few rows per (granule, monitored symbol) and one clock
row per granule, instead of tens of thousands of ticks:

- an **aggregate row** (`cnt > 0`): bucket key, granule, the symbol's code in its bucket, the
  partition's tick count and integer price sum of that symbol in that granule, and its last price
  with that tick's offset;
- a **clock row** (`cnt = 0`): the partition's first tick of a granule (offset, tickTS, TS,
  ingestTS, price, and the symbol's code in the bucket or -1), copied to every bucket. Ticks are
  in time order (the harness refuses a dataset whose tickTS decreases), so the first tick of a new
  period is the first tick of its granule: the smallest offset among the clock rows of that
  granule over all partitions.

All of it is order-independent (sums, counts, maxima and minima by offset), so the shuffle that
follows may deliver the rows in any order. `Layout` assigns the monitored symbols to buckets: a
bucket is a set of whole connected components of the "strategy watches symbol" graph (a
correlated pair and its strategies, for generated workloads), balanced by size; each bucket is
one state key of the Spark operator (runtime_common/pairs_bucket.py holds its logic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime_common.pairs_strategies import Strategy

# The rows the pre-aggregation emits (the Spark plan's shuffle input), both kinds in one schema.
PARTIAL_FIELDS = (("key", pa.int32()), ("granule", pa.int64()), ("code", pa.int32()), ("cnt", pa.int64()),
                  ("sum", pa.int64()), ("price", pa.int64()), ("offset", pa.int64()), ("tickTS", pa.int64()),
                  ("TS", pa.int64()), ("ingestTS", pa.int64()))
PARTIAL_SCHEMA = pa.schema([pa.field(n, t) for n, t in PARTIAL_FIELDS])
PARTIAL_DDL = ", ".join(f"{n} {'int' if t == pa.int32() else 'bigint'}" for n, t in PARTIAL_FIELDS)
TICK_COLUMNS = ("symbol", "price", "tickTS", "TS", "offset", "ingestTS")


@dataclass(frozen=True)
class Bucket:
    """One state key: its symbols (local codes are positions in `symbols`) and strategies."""

    index: int
    symbols: tuple[str, ...]
    strategies: tuple[Strategy, ...]


class Layout:
    """The monitored symbols, their buckets and the granule of a set of strategies.

    `buckets` is the number asked for; there are never more than connected components of the
    strategy-symbol graph (a symbol lives in exactly one bucket). `keys` are the values of the
    grouping column, one per bucket (default 0..n-1); the Spark plan picks them so that the
    buckets land on different shuffle partitions.
    """

    def __init__(self, strategies, buckets: int, keys: tuple[int, ...] | None = None):
        self.strategies = tuple(s if isinstance(s, Strategy) else Strategy.of(s) for s in strategies)
        if not self.strategies:
            raise ValueError("no strategies")
        if buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        self.granule_ms = reduce(math.gcd, (s.period_s * 1000 for s in self.strategies))
        groups = _components(self.strategies)
        n = min(buckets, len(groups))
        # Largest components first onto the lightest bucket: work is ticks (symbols) and closes
        # (strategies), both spread evenly this way.
        load = [0] * n
        members: list[list[int]] = [[] for _ in range(n)]
        for g in sorted(range(len(groups)), key=lambda i: (-_weight(groups[i]), i)):
            b = min(range(n), key=lambda i: (load[i], i))
            members[b].append(g)
            load[b] += _weight(groups[g])
        self.buckets = []
        position = {s.alias: i for i, s in enumerate(self.strategies)}
        for b, gs in enumerate(members):
            syms = tuple(sorted(s for g in gs for s in groups[g][0]))
            strats = tuple(sorted((s for g in gs for s in groups[g][1]), key=lambda s: position[s.alias]))
            self.buckets.append(Bucket(b, syms, strats))
        self.keys = tuple(range(n)) if keys is None else tuple(int(k) for k in keys)
        if len(self.keys) < n or len(set(self.keys[:n])) != n:
            raise ValueError(f"need {n} distinct bucket keys, got {self.keys}")
        self.keys = self.keys[:n]
        self.symbols = tuple(sorted(s for b in self.buckets for s in b.symbols))
        code = {s: i for i, s in enumerate(self.symbols)}
        self.bucket_of = np.zeros(len(self.symbols), np.int32)
        self.local_of = np.zeros(len(self.symbols), np.int32)
        for b in self.buckets:
            for j, s in enumerate(b.symbols):
                self.bucket_of[code[s]], self.local_of[code[s]] = b.index, j
        self._value_set = pa.array(self.symbols, pa.string())

    def partials(self, ticks: pa.Table) -> pa.Table:
        """A partition's ticks (TICK_COLUMNS, any row order) as aggregate and clock rows."""
        n = ticks.num_rows
        if n == 0:
            return PARTIAL_SCHEMA.empty_table()
        off = _np(ticks, "offset")
        tick = _np(ticks, "tickTS")
        order = None if n < 2 or bool(np.all(off[1:] > off[:-1])) else np.argsort(off, kind="stable")
        pick = (lambda a: a) if order is None else (lambda a: a[order])
        off, tick = pick(off), pick(tick)
        symbol = ticks.column("symbol")
        if not pa.types.is_string(symbol.type):     # e.g. all null (the one-key plans null unwatched symbols)
            symbol = symbol.cast(pa.string())
        code = pick(pc.fill_null(pc.index_in(symbol, value_set=self._value_set), -1).to_numpy().astype(np.int64))
        price = pick(_np(ticks, "price"))
        gran = tick // self.granule_ms
        # Clock rows: the first tick of each granule (ticks are in offset order now).
        first = np.flatnonzero(np.r_[True, gran[1:] != gran[:-1]])
        parts = [self._clock_rows(first, gran, code, price, off, tick, pick(_np(ticks, "TS")),
                                  pick(_np(ticks, "ingestTS")))]
        mon = np.flatnonzero(code >= 0)
        if len(mon):
            parts.append(self._aggregate_rows(gran[mon], code[mon], price[mon], off[mon]))
        return pa.concat_tables(parts)

    def _clock_rows(self, first, gran, code, price, off, tick, ts, ingest) -> pa.Table:
        k, m = len(self.keys), len(first)
        bucket = np.repeat(np.arange(k, dtype=np.int32), m)
        at = np.tile(first, k)
        sym = code[at]
        known = sym >= 0
        local = np.full(len(at), -1, np.int32)
        mine = known & (self.bucket_of[np.where(known, sym, 0)] == bucket)
        local[mine] = self.local_of[sym[mine]]
        zeros = np.zeros(len(at), np.int64)
        return _table(np.asarray(self.keys, np.int32)[bucket], gran[at], local, zeros, zeros, price[at],
                      off[at], tick[at], ts[at], ingest[at])

    def _aggregate_rows(self, gran, code, price, off) -> pa.Table:
        g0 = int(gran[0])
        ns = len(self.symbols)
        cell = (gran - g0) * ns + code          # gran is non-decreasing: cells are (granule, symbol)
        size = int(cell.max()) + 1
        cnt = np.bincount(cell, minlength=size)
        # Integer price sums stay exact in float64 (far below 2**53 per granule and symbol).
        total = np.rint(np.bincount(cell, weights=price.astype(np.float64), minlength=size)).astype(np.int64)
        cells, rev_first = np.unique(cell[::-1], return_index=True)
        last = len(cell) - 1 - rev_first        # the last tick of each cell
        sym = code[last]
        z = np.zeros(len(cells), np.int64)
        return _table(np.asarray(self.keys, np.int32)[self.bucket_of[sym]], cells // ns + g0, self.local_of[sym],
                      cnt[cells].astype(np.int64), total[cells], price[last], off[last], z, z, z)


def _np(table: pa.Table, name: str) -> np.ndarray:
    # A null (the one-key plans null the price of a symbol nobody watches) reads as 0.
    col = table.column(name)
    if pa.types.is_null(col.type):
        col = col.cast(pa.int64())
    return pc.fill_null(col, 0).to_numpy().astype(np.int64, copy=False)


def _table(key, granule, code, cnt, total, price, offset, tick, ts, ingest) -> pa.Table:
    cols = (key, granule, code, cnt, total, price, offset, tick, ts, ingest)
    return pa.Table.from_arrays([pa.array(np.asarray(c).astype(t.to_pandas_dtype(), copy=False), t)
                                 for c, (_n, t) in zip(cols, PARTIAL_FIELDS)], schema=PARTIAL_SCHEMA)


def _components(strategies) -> list[tuple[set[str], list[Strategy]]]:
    """Connected components of symbols linked by strategies, in first-seen order."""
    parent: dict[str, str] = {}

    def find(s: str) -> str:
        while parent.setdefault(s, s) != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for st in strategies:
        a, b = find(st.symbol1), find(st.symbol2)
        if a != b:
            parent[b] = a
    roots: dict[str, tuple[set[str], list[Strategy]]] = {}
    for st in strategies:
        group = roots.setdefault(find(st.symbol1), (set(), []))
        group[0].update((st.symbol1, st.symbol2))
        group[1].append(st)
    return list(roots.values())


def _weight(group) -> int:
    return len(group[0]) + len(group[1])
