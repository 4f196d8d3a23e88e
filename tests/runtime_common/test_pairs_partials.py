"""Ticks to partial aggregates (runtime_common/pairs_partials.py): buckets of whole pairs, and per
(granule, symbol) sums, counts and last prices plus clock rows that match a plain per-tick count,
whatever the row order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from runtime_common.pairs_partials import PARTIAL_SCHEMA, Layout


def _st(i, s1, s2, period=5, n=5):
    return (f"st_{i:05d}", s1, s2, 1_000_000, period, n, 1.5, 0.2)


def test_buckets_hold_whole_components_balanced():
    """A symbol watched by two pairs ties them into one bucket (one bucket per symbol)."""
    strategies = [_st(1, "A", "B"), _st(2, "B", "C"), _st(3, "D", "E"), _st(4, "F", "G"), _st(5, "F", "G"),
                  _st(6, "H", "I")]
    layout = Layout(strategies, 3)
    groups = [set(b.symbols) for b in layout.buckets]
    assert {"A", "B", "C"} in groups and sum(len(g) for g in groups) == 9
    assert all(len(g1 & g2) == 0 for i, g1 in enumerate(groups) for g2 in groups[i + 1:])
    sizes = sorted(len(b.symbols) + len(b.strategies) for b in layout.buckets)
    assert sizes[-1] - sizes[0] <= 3           # ABC (5) against the rest (4 + 4 + 4 split)
    # Strategies keep the program's order inside a bucket; no bucket is empty.
    for b in layout.buckets:
        assert list(b.strategies) == sorted(b.strategies, key=lambda s: s.alias) and b.strategies
    assert len(Layout(strategies, 99).buckets) == 4        # never more buckets than components
    with pytest.raises(ValueError, match="distinct bucket keys"):
        Layout(strategies, 3, keys=(5, 5, 6))


def test_the_granule_is_the_gcd_of_the_periods():
    assert Layout([_st(1, "A", "B", 10), _st(2, "C", "D", 15)], 1).granule_ms == 5000
    assert Layout([_st(1, "A", "B", 20), _st(2, "C", "D", 60)], 1).granule_ms == 20_000


def _ticks(n, seed, symbols=("A", "B", "C", "D", "X", "Y")) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"symbol": rng.choice(symbols, n), "price": rng.integers(100, 10_000, n).astype(np.int32),
                         "size": np.full(n, 100, np.int32),
                         "tickTS": np.sort(rng.integers(0, 40_000, n)).astype(np.int64) + 1_000_000,
                         "TS": np.arange(n, dtype=np.int64) * 3, "offset": np.arange(n, dtype=np.int64) + 50,
                         "ingestTS": np.arange(n, dtype=np.int64) * 3 + 1})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_partials_match_a_per_tick_count_in_any_row_order(seed):
    layout = Layout([_st(1, "A", "B"), _st(2, "C", "D")], 2, keys=(11, 42))
    ticks = _ticks(3000, seed)
    shuffled = pa.Table.from_pandas(ticks.sample(frac=1.0, random_state=seed), preserve_index=False)
    got = layout.partials(shuffled).to_pandas()
    assert got.columns.tolist() == PARTIAL_SCHEMA.names
    ticks["granule"] = ticks.tickTS // 5000
    agg = got[got.cnt > 0]
    mon = ticks[ticks.symbol.isin(["A", "B", "C", "D"])]
    want = mon.groupby(["granule", "symbol"]).agg(cnt=("price", "size"), sum=("price", "sum"),
                                                  price=("price", "last"), offset=("offset", "last")).reset_index()
    bucket_of = {s: layout.keys[b.index] for b in layout.buckets for s in b.symbols}
    local_of = {s: j for b in layout.buckets for j, s in enumerate(b.symbols)}
    want["key"] = want.symbol.map(bucket_of)
    want["code"] = want.symbol.map(local_of)
    cols = ["key", "granule", "code", "cnt", "sum", "price", "offset"]
    order = ["key", "granule", "code"]
    assert agg[cols].sort_values(order).to_numpy().tolist() == want[cols].sort_values(order).to_numpy().tolist()
    # One clock row per granule and bucket: the granule's first tick, with its code in that bucket.
    clock = got[got.cnt == 0].sort_values(["key", "granule"])
    first = ticks.groupby("granule").head(1)
    assert len(clock) == 2 * len(first)
    for key in layout.keys:
        mine = clock[clock.key == key]
        assert mine.offset.tolist() == first.offset.tolist()
        assert mine.tickTS.tolist() == first.tickTS.tolist() and mine.TS.tolist() == first.TS.tolist()
        assert mine.ingestTS.tolist() == first.ingestTS.tolist() and mine.price.tolist() == first.price.tolist()
        codes = [local_of[s] if bucket_of.get(s) == key else -1 for s in first.symbol]
        assert mine.code.tolist() == codes


def test_a_partition_of_unwatched_ticks_gives_only_clock_rows_and_none_gives_nothing():
    layout = Layout([_st(1, "A", "B")], 1)
    only_x = pa.Table.from_pandas(_ticks(50, 4, symbols=("X",)), preserve_index=False)
    got = layout.partials(only_x).to_pandas()
    assert (got.cnt == 0).all() and len(got) == got.granule.nunique()
    assert layout.partials(only_x.slice(0, 0)).num_rows == 0


def test_a_batch_whose_symbols_are_all_null_is_only_clock():
    """The one-key plans null the symbol of ticks no strategy watches; a batch of only those
    reaches pandas as an all-None column, which Arrow reads as the null type."""
    layout = Layout([_st(1, "A", "B")], 1)
    ticks = _ticks(20, 6).assign(symbol=None, price=None)
    got = layout.partials(pa.Table.from_pandas(ticks, preserve_index=False)).to_pandas()
    assert (got.cnt == 0).all() and (got.code == -1).all() and len(got) == got.granule.nunique()
