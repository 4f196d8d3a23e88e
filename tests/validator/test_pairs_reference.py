"""The Pairs reference engine against the hand-built tick traces of tests/pairs_trace.py, whose
docstring and comments work out every number; the collapse rule (PAIRS_SEMANTICS.md section 5)
against rounding noise; the reader's refusals."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from kit.errors import CepkitError
from tests.pairs_trace import (A, B, BIG_EXPECTED_FINAL, BIG_EXPECTED_ORDERS, BIG_STRATEGY_ROW, C, EXPECTED_INDICATORS,
                               EXPECTED_ORDERS, PERIODS, STRATEGY_ROW, T0, big_price_rows, trace_rows, write_dataset)
from validator.pairs_reference import COLLAPSE_ULPS, EPS, StrategyParams, _window_stats, compute_reference

STRATEGY = StrategyParams(*STRATEGY_ROW)


@pytest.mark.parametrize("files", [1, 4])
def test_hand_built_trace(tmp_path, files):
    ref = compute_reference(write_dataset(tmp_path / "ds", trace_rows(), files), [STRATEGY])
    ind = ref.indicators
    assert list(ind["strategy"].unique()) == ["st_00001"]
    assert (ind["inputTickTS"] - T0).tolist() == [e[0] for e in EXPECTED_INDICATORS]
    for col, j in (("ratio", 1), ("avgRatio", 2), ("upperBand", 3), ("lowerBand", 4)):
        assert np.allclose(ind[col].to_numpy(), [e[j] for e in EXPECTED_INDICATORS], rtol=0, atol=1e-12), col
    got = [(int(r.inputTickTS - T0), r.type, r.symbol, int(r.price), int(r.size)) for r in ref.orders.itertuples()]
    assert got == EXPECTED_ORDERS
    final = ref.final.iloc[0]
    assert (final.state, final.shares, final.balance_cents, final.value_cents) == ("FLAT", 0, 99_600, 99_600)


def test_closing_tick_offsets_point_at_the_closing_tick(tmp_path):
    rows = trace_rows()
    ref = compute_reference(write_dataset(tmp_path / "ds", rows), [STRATEGY])
    for r in ref.indicators.itertuples():
        sym, _, ts = rows[r.inputOffset]
        assert ts == r.inputTickTS and ts % 1000 == 0
    # The close at +4000 is the AAAAAA tick at 2250; the one at +13000 a BBBBBB tick.
    assert rows[ref.indicators.inputOffset[2]][:2] == (A, 2250)
    assert rows[ref.indicators.inputOffset[10]][:2] == (B, 1000)


def test_open_position_is_marked_to_market(tmp_path):
    # Cut the trace after period 16 (closes 15): the strategy is SHORT_LONG holding 90 BBBBBB.
    rows = [r for r in trace_rows() if r[2] < T0 + 17_000]
    ref = compute_reference(write_dataset(tmp_path / "ds", rows), [STRATEGY])
    final = ref.final.iloc[0]
    assert (final.state, final.held, final.shares, final.balance_cents) == ("SHORT_LONG", B, 90, 9_600)
    assert final.value_cents == 9_600 + 90 * 1000


def test_open_position_is_valued_at_the_inputs_last_trade(tmp_path):
    """Section 10 (issue 27): the value uses the held symbol's last trade in the whole input, here a
    BBBBBB trade at 1020 in the last period (which never closes), after the last Indicator's
    closing tick (+16000, where BBBBBB last traded at 1000). On main the value was 9_600 + 90 * 1000."""
    rows = [r for r in trace_rows() if r[2] < T0 + 17_000] + [(B, 1020, T0 + 16_800)]
    ref = compute_reference(write_dataset(tmp_path / "ds", rows), [STRATEGY])
    final = ref.final.iloc[0]
    assert (final.state, final.held, final.shares, final.balance_cents) == ("SHORT_LONG", B, 90, 9_600)
    assert final.value_cents == 9_600 + 90 * 1020


def test_a_genuine_crossing_near_2_31_cents_trades(tmp_path):
    """Section 5 (issue 27): prices near 2^31 cents, 190 ticks a period, a one-cent bump of one tick:
    the bands' sd is ~9.8e-13 |avgRatio|, which the old rule (sd <= 1e-12 |avgRatio|) took for
    collapsed bands, so main emitted no order. The crossings are genuine (tests/pairs_trace.py)."""
    st = StrategyParams(*BIG_STRATEGY_ROW)
    ref = compute_reference(write_dataset(tmp_path / "ds", big_price_rows(), files=3), [st])
    ind = ref.indicators
    assert (ind["inputTickTS"] - T0).tolist() == [5000, 6000, 7000, 8000, 9000, 10000]
    sd = (ind["upperBand"] - ind["avgRatio"]).to_numpy() / st.bands_multiplier
    # The regime the test is about: above the rounding threshold, below the old relative one.
    rounding = COLLAPSE_ULPS * EPS * st.num_periods * ind["avgRatio"].abs().to_numpy()
    assert (sd > 100 * rounding).all() and (sd[[1, 5]] < 1e-12 * ind["avgRatio"].to_numpy()[[1, 5]]).all()
    got = [(int(r.inputTickTS - T0), r.type, r.symbol, int(r.price), int(r.size)) for r in ref.orders.itertuples()]
    assert got == BIG_EXPECTED_ORDERS
    final = ref.final.iloc[0]
    assert (final.state, final.held, final.shares, final.balance_cents, final.value_cents) == BIG_EXPECTED_FINAL


# Two periods whose ratios are mathematically equal (6000/3002) but round differently: A three
# ticks at 2000 over B at 1000, 1001, 1001 (means 2000 and 1000.666...), or A 6000 over B 3002.
NOISY = {True: [(A, 2000), (A, 2000), (A, 2000), (B, 1000), (B, 1001), (B, 1001)], False: [(A, 6000), (B, 3002)]}
NOISE_STRATEGIES = [StrategyParams("st_00003", A, B, 1_000_000, 1, 2, 0.5, 0.1),
                    StrategyParams("st_00004", A, B, 1_000_000, 1, 5, 1.2, 0.1)]


def noisy_rows(periods: int = 10) -> list[tuple[str, int, int]]:
    """Periods alternating between the two ways to the same ratio, then one tick to close the last."""
    rows = [(sym, price, T0 + 1000 * q + 10 * i) for q in range(periods)
            for i, (sym, price) in enumerate(NOISY[q % 2 == 0])]
    return rows + [(C, 7, T0 + 1000 * periods)]


def test_rounding_noise_gives_no_signal(tmp_path):
    """Section 5: ratios that differ only by rounding (one ulp apart) cross their bands by the
    comparisons alone, for both strategies below; the collapse rule keeps every such crossing out
    (a rule that took any sd > 0 for real bands would trade here)."""
    ref = compute_reference(write_dataset(tmp_path / "ds", noisy_rows()), NOISE_STRATEGIES)
    ind = ref.indicators
    ratios = ind["ratio"].to_numpy()
    assert ind["ratio"].nunique() == 2 and np.ptp(ratios) == np.spacing(ratios.min())     # one ulp apart
    for st in NOISE_STRATEGIES:
        mine = ind[ind.strategy == st.alias]
        r, up, lo = (mine[c].to_numpy() for c in ("ratio", "upperBand", "lowerBand"))
        crossing = ((r[1:] >= up[1:]) & (r[:-1] < up[:-1])) | ((r[1:] <= lo[1:]) & (r[:-1] > lo[:-1]))
        assert crossing.any(), st.alias
    assert ref.orders.empty and (ref.final.state == "FLAT").all()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(p=hs.integers(1, 10 ** 4), q=hs.integers(1, 10 ** 4), n=hs.integers(1, 200),
       periods=hs.lists(hs.tuples(hs.integers(1, 10 ** 5), hs.integers(1, 50), hs.integers(1, 200),
                                  hs.integers(1, 200)), min_size=1, max_size=40))
def test_rounding_alone_stays_within_the_derived_bound(p, q, n, periods):
    """Section 5's derivation: a window of N ratios that are all mathematically p/q, each from its
    own period's means (p t / m and q t / m, often inexact doubles), has a computed sd of at most
    (N + 3)/2 eps |avgRatio|: rounding alone; the collapse threshold is at least twice that."""
    per = (periods * (n // len(periods) + 2))[:n + len(periods)]
    # Period (t, m, k, k2): A sums p*t*k over k*m ticks, B q*t*k2 over k2*m: means p*t/m and q*t/m.
    ratios = np.array([(float(p * t * k) / (k * m)) / (float(q * t * k2) / (k2 * m)) for t, m, k, k2 in per])
    mean, sd = _window_stats(ratios, n)
    bound = (n + 3) / 2 * EPS * np.abs(mean)
    assert (sd <= bound).all()
    assert (2 * bound <= COLLAPSE_ULPS * EPS * n * np.abs(mean)).all()


def test_strategies_are_independent_and_periods_epoch_aligned(tmp_path):
    # A 2-second strategy over the same trace closes at even seconds only and sees pairs of periods.
    two = StrategyParams("st_00002", A, B, 100_000, period_length_s=2, num_periods=2, bands_multiplier=0.5,
                         stop_loss_perc=0.1)
    ref = compute_reference(write_dataset(tmp_path / "ds", trace_rows()), [STRATEGY, two])
    one = ref.indicators[ref.indicators.strategy == "st_00001"]
    assert len(one) == len(EXPECTED_INDICATORS)
    st2 = ref.indicators[ref.indicators.strategy == "st_00002"]
    assert ((st2.inputTickTS - T0) % 2000 == 0).all()
    # Its first window: periods [0,2000) and [2000,4000). A avg (2000+2100)/2 and (1990+2010+2200)/3.
    r0, r1 = 2050 / 1000, (1990 + 2010 + 2200) / 3 / 1000
    assert st2.ratio.iloc[0] == pytest.approx(r1, abs=1e-12)
    assert st2.avgRatio.iloc[0] == pytest.approx((r0 + r1) / 2, abs=1e-12)
    assert st2.inputTickTS.iloc[0] - T0 == 4000


def test_ticks_out_of_time_order_are_refused(tmp_path):
    rows = trace_rows()
    rows[5], rows[6] = rows[6], rows[5]
    with pytest.raises(CepkitError, match=r"ticks-00001-of-00001.parquet:tickTS: data row 7: .* tickTS goes backwards"):
        compute_reference(write_dataset(tmp_path / "ds", rows), [STRATEGY])


# -- issue 14 --------------------------------------------------------------------------------

def test_batches_without_a_monitored_tick(tmp_path):
    """Finding 1: a read batch holding no tick of a monitored symbol (here: one file per tick, so the
    CCCCCC ticks in mid-period are batches of their own) gave np.bincount an empty key, which
    returns int64 even with weights; adding the open period's float sums to it raised
    UFuncOutputCastingError on main."""
    rows = sorted(trace_rows() + [(C, 7, T0 + 1000 * q + 600) for q in range(len(PERIODS))], key=lambda r: r[2])
    one = compute_reference(write_dataset(tmp_path / "one", rows), [STRATEGY])
    many = compute_reference(write_dataset(tmp_path / "many", rows, files=len(rows)), [STRATEGY])
    assert many.indicators.drop(columns="inputOffset").equals(one.indicators.drop(columns="inputOffset"))
    assert many.orders.equals(one.orders) and many.final.equals(one.final)


def test_a_trace_that_only_ever_sees_other_symbols(tmp_path):
    rows = [(C, 7, T0 + 250 * i) for i in range(20)]
    with pytest.raises(CepkitError, match=r"strategies:st_00001: symbol AAAAAA is not a symbol of the dataset "
                                          r"\(no tick of it in"):
        compute_reference(write_dataset(tmp_path / "ds", rows, files=3), [STRATEGY])


def test_symbols_come_from_pairs_aux_when_listed(tmp_path):
    """Finding 8: a strategy over a symbol the dataset does not have was accepted on main."""
    ds = write_dataset(tmp_path / "ds", trace_rows())
    m = json.loads((ds / "manifest.json").read_text())
    m["aux_file"] = "pairs-aux.json"
    (ds / "manifest.json").write_text(json.dumps(m))
    aux = {"kind": "cepkit.pairs-aux", "schema_version": 1, "scale_factor": 1, "markets": 1, "num_strategies": 1,
           "max_strategies_per_pair": 10, "seed": 1, "symbols": [{"symbol": s, "market": 0} for s in (A, C)],
           "correlations": [{"symbol1": A, "symbol2": C, "market": 0}]}
    (ds / "pairs-aux.json").write_text(json.dumps(aux))
    with pytest.raises(CepkitError) as e:
        compute_reference(ds, [STRATEGY], strategies_file=tmp_path / "s.xml")
    assert str(e.value) == f"{tmp_path / 's.xml'}:st_00001: symbol BBBBBB is not a symbol of the dataset " \
                           f"({ds / 'pairs-aux.json'} lists 2 symbols)"


def _table(rows, **override) -> pa.Table:
    cols = {"symbol": pa.array([r[0] for r in rows]), "price": pa.array([r[1] for r in rows], pa.int32()),
            "size": pa.array([100] * len(rows), pa.int32()), "tickTS": pa.array([r[2] for r in rows], pa.int64())}
    cols.update(override)
    return pa.table({k: v for k, v in cols.items() if v is not None})


def _rewrite(ds: Path, table: pa.Table | None = None, csv_text: str | None = None) -> Path:
    """Replace the one tick file of `ds` and fix its manifest entry (rows, bytes, sha256)."""
    m = json.loads((ds / "manifest.json").read_text())
    f = ds / m["files"][0]["path"]
    if table is not None:
        pq.write_table(table, f)
        rows = table.num_rows
    else:
        f.unlink()
        f = f.with_suffix(".csv")
        f.write_text(csv_text)
        m["format"] = "csv"
        rows = csv_text.count("\n") - 1
    m["files"][0].update(path=f.name, rows=rows, bytes=f.stat().st_size,
                         sha256=hashlib.sha256(f.read_bytes()).hexdigest())
    (ds / "manifest.json").write_text(json.dumps(m))
    return f


@pytest.mark.parametrize("override, match", [
    ({"price": None}, r":price: missing column"),
    ({"price": pa.array(["1"] * 3)}, r":price: expected an integer column, got string"),
    ({"tickTS": pa.array([T0 * 1.0] * 3)}, r":tickTS: expected an integer column, got double"),
    ({"symbol": pa.array([1, 2, 3])}, r":symbol: expected a string column, got int64"),
    ({"price": pa.array([5, None, 7], pa.int32())}, r":price: data row 2: is empty \(null\)"),
    ({"price": pa.array([5, 0, 7], pa.int32())}, r":price: data row 2: 0 is not a price in cents"),
    ({"tickTS": pa.array([T0, None, T0], pa.int64())}, r":tickTS: data row 2: is empty"),
])
def test_unreadable_parquet_columns_name_file_and_column(tmp_path, override, match):
    rows = [(A, 5, T0), (B, 6, T0 + 1), (A, 7, T0 + 2)]
    ds = write_dataset(tmp_path / "ds", rows)
    f = _rewrite(ds, _table(rows, **override))
    with pytest.raises(CepkitError, match=f"^{f}{match}"):
        compute_reference(ds, [STRATEGY])


@pytest.mark.parametrize("text, match", [
    ("symbol,price,tickTS\nAAAAAA,5,1\nBBBBBB,abc,2\n", r":3: column price: 'abc' is not an integer"),
    ("symbol,price,tickTS\nAAAAAA,5,1\nBBBBBB,6,2.5\n", r":3: column tickTS: '2.5' is not an integer"),
    ("symbol,price,tickTS\nAAAAAA,5,1\nBBBBBB,,2\n", r":3: column price: is empty \(null\)"),
    ("symbol,prize,tickTS\nAAAAAA,5,1\n", r":price: missing column \(the header has symbol, prize, tickTS\)"),
    ("symbol,price,tickTS\nAAAAAA,-5,1\n", r":2: column price: -5 is not a price in cents"),
])
def test_unreadable_csv_columns_name_file_line_and_column(tmp_path, text, match):
    ds = write_dataset(tmp_path / "ds", [(A, 5, T0)])
    f = _rewrite(ds, csv_text=text)
    with pytest.raises(CepkitError, match=f"^{f}{match}"):
        compute_reference(ds, [STRATEGY])


def test_input_per_second_and_a_far_origin(tmp_path):
    """The per-second input series counts every tick; an origin far before the ticks (a manifest's
    start_epoch_ms of 0) costs nothing (on main: a bincount over ~1.8e9 seconds, ~14 GB)."""
    rows = trace_rows()
    ds = write_dataset(tmp_path / "ds", rows, files=3)
    ref = compute_reference(ds, [STRATEGY], count_from_ms=T0)
    series = ref.input_per_second
    assert series["second"].tolist() == list(range(22)) and series["count"].sum() == len(rows)
    assert series["count"].tolist()[:3] == [3, 3, 4]
    m = json.loads((ds / "manifest.json").read_text())
    m["start_epoch_ms"] = 0
    (ds / "manifest.json").write_text(json.dumps(m))
    far = compute_reference(ds, [STRATEGY], count_from_ms=0).input_per_second
    assert far["second"].tolist() == [(T0 // 1000) + s for s in range(22)]
    assert far["count"].tolist() == series["count"].tolist()


def test_ticks_before_the_run_start_are_refused(tmp_path):
    ds = write_dataset(tmp_path / "ds", trace_rows())
    m = json.loads((ds / "manifest.json").read_text())
    m["start_epoch_ms"] = T0 + 1
    (ds / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(CepkitError, match=r"parquet:tickTS: data row 1: \d+ is before the run start, manifest.json's "
                                          r"start_epoch_ms"):
        compute_reference(ds, [STRATEGY])


def _closed_periods_tick_by_tick(sym, price, ts, period_ms: int, n: int) -> dict:
    """PAIRS_SEMANTICS.md's periods, one tick at a time (no batch, no vector): a tick of a new
    period closes the open one (its sums, counts, the last price per symbol, the closing tick's own
    trade included in that last price)."""
    out = {"off": [], "ts": [], "sum": [], "cnt": [], "last": []}
    cur, sums, cnts, last = None, [0] * n, [0] * n, [0] * n
    for i, (s, p, t) in enumerate(zip(sym.tolist(), price.tolist(), ts.tolist())):
        period = t // period_ms
        if cur is not None and period != cur:
            closing = list(last)
            if s >= 0:
                closing[s] = p
            for k, v in (("off", i), ("ts", t), ("sum", list(sums)), ("cnt", list(cnts)), ("last", closing)):
                out[k].append(v)
            sums, cnts = [0] * n, [0] * n
        cur = period
        if s >= 0:
            sums[s] += p
            cnts[s] += 1
            last[s] = p
    return out


@settings(max_examples=150, deadline=None)
@given(data=hs.data())
def test_periods_of_any_batching_match_the_tick_by_tick_definition(data):
    """Closed periods over ticks with gaps of every size (none, within a period, over many periods,
    over more periods than a batch has ticks), symbols watched or not, cut into batches anywhere:
    the vectorized accumulator (segment starts by binary search, last trades by an unbuffered
    maximum) gives exactly the tick-by-tick definition."""
    from validator.pairs_reference import closed_periods
    from validator.ticks import TickBatch

    n_symbols = data.draw(hs.integers(1, 4))
    size = data.draw(hs.integers(1, 60))
    gaps = data.draw(hs.lists(hs.sampled_from([0, 0, 1, 7, 400, 999, 1000, 5000, 10**6]), min_size=size, max_size=size))
    ts = T0 + np.cumsum(np.array(gaps, dtype=np.int64))
    sym = np.array(data.draw(hs.lists(hs.integers(-1, n_symbols - 1), min_size=size, max_size=size)), dtype=np.int32)
    price = np.array(data.draw(hs.lists(hs.integers(1, 2**31 - 1), min_size=size, max_size=size)), dtype=np.int64)
    cuts = sorted(set(data.draw(hs.lists(hs.integers(1, size), max_size=6))) | {size})
    periods = data.draw(hs.lists(hs.sampled_from([1, 1000, 5000, 30_000]), min_size=1, max_size=3, unique=True))
    batches, start = [], 0
    for end in cuts:
        batches.append(TickBatch(start, sym[start:end], price[start:end], ts[start:end]))
        start = end
    got = closed_periods(iter(batches), periods, n_symbols)
    for period_ms in periods:
        want, cp = _closed_periods_tick_by_tick(sym, price, ts, period_ms, n_symbols), got[period_ms]
        assert cp.trigger_offset.tolist() == want["off"] and cp.trigger_ts_ms.tolist() == want["ts"]
        assert cp.sums.reshape(-1, n_symbols).tolist() == [[float(v) for v in r] for r in want["sum"]]
        assert cp.counts.reshape(-1, n_symbols).tolist() == want["cnt"]
        assert cp.last_price.reshape(-1, n_symbols).tolist() == want["last"]


# -- the range of order sizes and money (specs/PAIRS_SEMANTICS.md, section 8) ----------------------

def _swinging(periods: int, low: int, high: int):
    """Closed periods of two symbols, one period each: A's price alternates low/high, B stays 100."""
    from validator.pairs_reference import ClosedPeriods

    a = np.array([low if i % 2 == 0 else high for i in range(periods)], dtype=np.int64)
    b = np.full(periods, 100, dtype=np.int64)
    prices = np.stack([a, b], axis=1)
    return ClosedPeriods(5000, np.arange(periods, dtype=np.int64) * 10, np.arange(periods, dtype=np.int64) * 5000,
                         prices.astype(np.float64), np.ones((periods, 2)), prices, prices[-1])


def test_orders_beyond_a_32_bit_size_are_refused_in_one_line_naming_the_strategy():
    """Regression (issue 45): prices swinging between 1 cent and ~2^31 cents made order sizes beyond
    what a MarketOrder carries, and `validate pairs` ended in an OverflowError where it wrote them."""
    from validator.pairs_reference import OrderRangeError, StrategyParams, reference_from_periods

    st = StrategyParams("s1", "A", "B", 1_000_000, 5, 2, 0.5, 10.0)
    with pytest.raises(OrderRangeError) as refused:
        reference_from_periods({5000: _swinging(8, 1, 2**31 - 1)}, [st], {"A": 0, "B": 1})
    message = str(refused.value)
    assert message.startswith("strategy s1: the ") and "beyond a MarketOrder's size (a 32-bit int" in message
    assert "\n" not in message and "PAIRS_SEMANTICS.md, section 8" in message
    # The same swings, narrower: every size fits, and the orders are there.
    ref = reference_from_periods({5000: _swinging(8, 1000, 3000)}, [st], {"A": 0, "B": 1})
    assert len(ref.orders) > 0 and ref.orders["size"].max() <= 2**31 - 1


def test_a_non_flat_strategy_that_bought_nothing_holds_its_symbol_with_0_shares():
    """Pinned (section 8): funds below ten shares of the symbol to buy emit no BUY, but the state
    machine moves, and `held` names that symbol with 0 shares."""
    from validator.pairs_reference import StrategyParams, reference_from_periods

    st = StrategyParams("s1", "A", "B", 500, 5, 2, 0.5, 10.0)          # 5 dollars: not ten shares of A at 10
    ref = reference_from_periods({5000: _swinging(3, 1000, 3000)}, [st], {"A": 0, "B": 1})
    assert ref.orders.empty
    final = ref.final.iloc[0]
    assert final["state"] == "LONG_SHORT" and final["held"] == "A" and final["shares"] == 0
    assert final["balance_cents"] == final["value_cents"] == 500
