"""A bucket of Pairs strategies over micro-batches of partial rows (runtime_common/pairs_bucket.py,
fed by pairs_partials.py) gives exactly the reference answers, however the ticks are cut into
batches and source partitions and the strategies into buckets, with its state stored and read
back between batches as Spark stores it; and a commit writes only the records that changed."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kit.workload import load_aux
from querygen.strategies import strategies_for
from runtime_common.pairs_bucket import OUT_COLUMNS, DictStore, PairsBucket, decode, encode
from runtime_common.pairs_partials import Layout
from tests.pairs_trace import (BIG_EXPECTED_ORDERS, BIG_STRATEGY_ROW, EXPECTED_INDICATORS, EXPECTED_ORDERS, STRATEGY_ROW,
                               T0, big_price_rows, trace_rows, write_dataset)
from validator.pairs_reference import StrategyParams, compute_reference


class SparkLikeStore(DictStore):
    """Values pickled on the way in and out, as Spark's state API sends them to the JVM and back."""

    def get(self, name):
        v = super().get(name)
        return None if v is None else pickle.loads(v)

    def put(self, name, value):
        super().put(name, pickle.dumps(value))


def _table(rows) -> pa.Table:
    n = len(rows)
    return pa.table({"symbol": [r[0] for r in rows], "price": pa.array([r[1] for r in rows], pa.int32()),
                     "size": pa.array([100] * n, pa.int32()), "tickTS": pa.array([r[2] for r in rows], pa.int64()),
                     "TS": pa.array([r[2] + 3 for r in rows], pa.int64()), "offset": pa.array(range(n), pa.int64()),
                     "ingestTS": pa.array([r[2] + 5 for r in rows], pa.int64())})


class Run:
    """The plan without Spark: batches of ticks, split into source partitions, to partial rows,
    shuffled, grouped by bucket key, each bucket over its rows with its own store."""

    def __init__(self, strategies, buckets: int):
        self.layout = Layout(strategies, buckets, keys=tuple(range(100, 100 + buckets)))
        self.logic = {k: PairsBucket(b, self.layout.granule_ms) for k, b in zip(self.layout.keys, self.layout.buckets)}
        self.stores = {k: SparkLikeStore() for k in self.layout.keys}
        self.outs: list[pd.DataFrame] = []
        self.writes: list[dict] = []
        self.closing: list[dict] = []       # per batch: does it close a period of each bucket?
        self._last_ts: int | None = None

    def _closes(self, tick_ts: np.ndarray) -> dict:
        out = {}
        for key, bucket in self.logic.items():
            periods = bucket.periods
            out[key] = bool(len(tick_ts) and self._last_ts is not None and
                            ((tick_ts.max() // periods) > (self._last_ts // periods)).any())
        if len(tick_ts):
            self._last_ts = int(tick_ts.max())
        return out

    def batch(self, ticks: pa.Table, parts: int, rng) -> None:
        self.closing.append(self._closes(ticks.column("tickTS").to_numpy()))
        bounds = np.linspace(0, ticks.num_rows, parts + 1).astype(int)
        partials = pa.concat_tables([self.layout.partials(ticks.slice(a, b - a)) for a, b in zip(bounds, bounds[1:])])
        frame = partials.to_pandas().sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
        before = {k: len(s.writes) for k, s in self.stores.items()}
        for key, bucket in self.logic.items():
            out = bucket.process(self.stores[key], frame[frame.key == key].reset_index(drop=True))
            assert out.columns.tolist() == OUT_COLUMNS
            self.outs.append(out)
        self.writes.append({k: s.writes[before[k]:] for k, s in self.stores.items()})

    def output(self) -> pd.DataFrame:
        return pd.concat(self.outs, ignore_index=True)


def _trace_outputs(got: pd.DataFrame):
    ind = got[got.stream == "Indicator"].sort_values("inputTickTS")
    orders = [(int(r.inputTickTS - T0), r.type, r.symbol, int(r.price), int(r.size))
              for r in got[got.stream == "MarketOrder"].itertuples()]
    return ind, orders


@pytest.mark.parametrize("parts", [1, 3])
def test_the_hand_trace_through_every_cut_into_two_batches(parts):
    """tests/pairs_trace.py's 22 periods: the batch boundary at every tick, the source split in
    `parts` partitions; the orders and Indicators are the worked-out ones, on the closing ticks."""
    rows = trace_rows()
    ticks = _table(rows)
    rng = np.random.default_rng(5)
    for cut in range(len(rows) + 1):
        run = Run([STRATEGY_ROW], 1)
        for a, b in ((0, cut), (cut, len(rows))):
            if b > a:
                run.batch(ticks.slice(a, b - a), parts, rng)
        ind, orders = _trace_outputs(run.output())
        assert (ind.inputTickTS - T0).tolist() == [e[0] for e in EXPECTED_INDICATORS], cut
        for col, j in (("ratio", 1), ("avgRatio", 2), ("upperBand", 3), ("lowerBand", 4)):
            np.testing.assert_allclose(ind[col].to_numpy(), [e[j] for e in EXPECTED_INDICATORS], rtol=0, atol=1e-12)
        assert orders == EXPECTED_ORDERS, cut
        assert (ind.inputTS == ind.inputTickTS + 3).all() and (ind.ingestTS == ind.inputTickTS + 5).all()


def test_the_hand_trace_one_tick_per_batch():
    """A batch of one tick of a symbol nobody watches only moves the clock, and may close periods."""
    rows = trace_rows()
    ticks = _table(rows)
    run = Run([STRATEGY_ROW], 1)
    rng = np.random.default_rng(1)
    for i in range(len(rows)):
        run.batch(ticks.slice(i, 1), 1, rng)
    assert _trace_outputs(run.output())[1] == EXPECTED_ORDERS


def test_a_genuine_crossing_near_2_31_cents_in_batches(tmp_path):
    """Section 5 (issue 27): the trace near 2^31 cents (190 ticks a period, sd ~ 9.8e-13 |avgRatio|,
    no order on main), with the hand trace's strategy beside it, cut into random batches and
    partitions: the worked-out orders, and every double and order exactly the reference's."""
    rows = big_price_rows()
    ticks = _table(rows)
    run = Run([BIG_STRATEGY_ROW, STRATEGY_ROW], 2)
    rng = np.random.default_rng(27)
    start = 0
    while start < len(rows):
        size = int(rng.integers(1, 600))
        run.batch(ticks.slice(start, size), int(rng.integers(1, 4)), rng)
        start += size
    got = run.output()
    _ind, orders = _trace_outputs(got[got.strategy == BIG_STRATEGY_ROW[0]])
    assert orders == BIG_EXPECTED_ORDERS
    ref = compute_reference(write_dataset(tmp_path / "ref", rows), [StrategyParams(*BIG_STRATEGY_ROW),
                                                                     StrategyParams(*STRATEGY_ROW)])
    ind = got[got.stream == "Indicator"].sort_values(["inputTickTS", "strategy"], ignore_index=True)
    want = ref.indicators.sort_values(["inputTickTS", "strategy"], ignore_index=True)
    assert ind.strategy.tolist() == want.strategy.tolist() and len(want) == 9 + 6     # N = 2 and N = 5 over 10 closes
    assert (ind.inputTickTS.astype("int64") == want.inputTickTS).all()
    for col in ("ratio", "avgRatio", "upperBand", "lowerBand"):
        assert (ind[col].to_numpy() == want[col].to_numpy()).all(), col
    assert len(ref.orders) == len(BIG_EXPECTED_ORDERS)


@pytest.fixture(scope="module")
def quick_spec(quick_pairs):
    """The querygen strategies plus dense ones (P = 5 s, N = 5) so that two minutes trade a lot."""
    aux = load_aux(quick_pairs / "pairs-aux.json")
    rows = [(s.alias, s.symbol1, s.symbol2, s.available_funds, s.period_length, s.num_periods, s.bands_multiplier,
             s.stop_loss_perc) for s in strategies_for(aux, 7).strategies]
    rows += [(f"st_{900 + i:05d}", c.symbol1, c.symbol2, 1_000_000, 5, 5, 1.2, 0.1)
             for i, c in enumerate(aux.correlations[:20])]
    return rows


@pytest.mark.parametrize("buckets, seed", [(1, 3), (3, 4), (8, 5)])
def test_generated_data_matches_the_reference_exactly_over_any_batching(quick_pairs, quick_spec, buckets, seed):
    """The quick SF=1 dataset in random batches (1 to 20,000 ticks) and partitions (1 to 3): every
    Indicator and order of the reference, with the very same doubles (not within a tolerance)."""
    ticks = pa.concat_tables([pq.read_table(f) for f in sorted(quick_pairs.glob("ticks-*.parquet"))])
    n = ticks.num_rows
    tick_ts = ticks.column("tickTS").to_numpy()
    ticks = (ticks.append_column("TS", pa.array(tick_ts + 3)).append_column("offset", pa.array(np.arange(n)))
             .append_column("ingestTS", pa.array(tick_ts + 5)))
    run = Run(quick_spec, buckets)
    rng = np.random.default_rng(seed)
    start = 0
    while start < n:
        size = int(rng.integers(1, 20_000))
        run.batch(ticks.slice(start, size), int(rng.integers(1, 4)), rng)
        start += size
    got = run.output()
    ref = compute_reference(quick_pairs, [StrategyParams(*r) for r in quick_spec])
    ind = got[got.stream == "Indicator"]
    key = ["strategy", "inputTickTS"]
    merged = ref.indicators.merge(ind, on=key, how="outer", indicator=True, suffixes=("_ref", ""))
    assert len(ref.indicators) > 400 and (merged["_merge"] == "both").all() and len(ind) == len(ref.indicators)
    for col in ("ratio", "avgRatio", "upperBand", "lowerBand"):
        assert (merged[col] == merged[f"{col}_ref"]).all(), col
    orders = got[got.stream == "MarketOrder"]
    m = ref.orders.merge(orders, on=key + ["type", "symbol"], how="outer", indicator=True, suffixes=("_ref", ""))
    assert len(ref.orders) > 50 and (m["_merge"] == "both").all() and len(orders) == len(ref.orders)
    assert (m["price"] == m["price_ref"]).all() and (m["size"] == m["size_ref"]).all()
    # A commit writes what changed: the strategies' record exactly in the batches that close a
    # period of one of the bucket's period lengths, the open periods' record at most once a batch
    # (and not at all when neither its symbols traded nor the granule moved).
    for writes, closing in zip(run.writes, run.closing):
        for k, names in writes.items():
            assert ("books" in names) == closing[k] and len(names) == len(set(names)), (k, names)
            assert "open" in names or not closing[k]
    assert 0 < sum(c[run.layout.keys[0]] for c in run.closing) < len(run.closing) / 2


def test_state_records_round_trip_and_are_packed():
    """Vectors travel as packed little-endian bytes, longs as ints (pairs_bucket.STATE_RECORDS)."""
    record = encode("open", {"granule": 7, "periods": np.array([1, 2]), "sums": np.arange(6).reshape(2, 3),
                             "counts": np.ones((2, 3), np.int64), "last": np.array([5, 6, 7])})
    assert isinstance(record[0], int) and all(isinstance(v, bytes) for v in record[1:])
    back = decode("open", pickle.loads(pickle.dumps(record)))
    assert back["granule"] == 7 and back["sums"].tolist() == list(range(6)) and back["last"].tolist() == [5, 6, 7]


def test_ticks_out_of_time_order_are_refused():
    run = Run([STRATEGY_ROW], 1)
    rows = trace_rows()
    rng = np.random.default_rng(2)
    run.batch(_table(rows[20:]), 1, rng)
    with pytest.raises(ValueError, match="out of time order"):
        run.batch(_table(rows[:5]), 1, rng)
