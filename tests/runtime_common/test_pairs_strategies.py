"""The strategies of one period length (runtime_common/pairs_strategies.py), vectorized over the
strategies, against hand-computed closes: each case names the rule of specs/PAIRS_SEMANTICS.md it
pins. The doubles must be bit-for-bit the spec's recipe (the validator's reference computes it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runtime_common.pairs_strategies import (COLLAPSE_ULPS, EPS, FLAT, LONG_SHORT, SHORT_LONG, Book, ClosedPeriod,
                                             Outputs, Strategy)
from tests.pairs_trace import BIG_BUMPS, BIG_PRICE, BIG_STRATEGY_ROW, BIG_TICKS
from validator import pairs_reference
from validator.pairs_reference import _window_stats

A, B, C, D = "AAAAAA", "BBBBBB", "CCCCCC", "DDDDDD"
CODE = {A: 0, B: 1, C: 2, D: 3}


def _book(*rows) -> Book:
    return Book(rows, CODE)


def _close(book: Book, state, a_avg, b_avg=1000, last=None, stamp=7_000, counts=(1, 1, 0, 0)):
    """Close one period in which A averaged `a_avg` and B `b_avg` (one tick each unless `counts`
    says otherwise; a count of 0 is a symbol without a tick); last trade prices default to the
    averages. Returns the outputs."""
    cnt = np.array(counts, np.int64)
    sums = np.array([a_avg * cnt[0], b_avg * cnt[1], 0, 0], np.int64)
    last = np.array(last if last is not None else (a_avg, b_avg, 0, 0), np.int64)
    out = Outputs.empty()
    book.close(state, ClosedPeriod(sums, cnt, last, stamp, stamp + 3, stamp + 5), out)
    return out


def _ind(out: Outputs) -> list[tuple]:
    rows = []
    for d in out.indicators:
        for i, alias in enumerate(d["strategy"]):
            rows.append((alias, float(d["ratio"][i]), float(d["avgRatio"][i]), float(d["upperBand"][i]),
                         float(d["lowerBand"][i])))
    return rows


ST = ("st_1", A, B, 100_000, 5, 2, 0.5, 0.1)     # N = 2: bands = mean ± |b - a| / 4


def test_window_fills_before_the_first_indicator_and_it_never_signals():
    """Section 4: nothing until N ratios; section 5: the first Indicator cannot signal."""
    book = _book(ST)
    s = book.initial_state()
    assert _ind(_close(book, s, 2000)) == []
    out = _close(book, s, 2200)          # [2.0, 2.2]: 2.2 >= upper 2.15, but there is no previous Indicator
    assert _ind(out) == [("st_1", 2.2, pytest.approx(2.1), pytest.approx(2.15), pytest.approx(2.05))]
    assert out.orders == [] and s.position[0] == FLAT
    d = out.indicators[0]
    assert (d["inputTickTS"], d["inputTS"], d["ingestTS"]) == (7_000, 7_003, 7_005)


def test_a_period_without_a_tick_of_either_symbol_is_skipped():
    """Section 3: no ratio, the window does not move, no Indicator."""
    book = _book(ST)
    s = book.initial_state()
    _close(book, s, 2000)
    assert _ind(_close(book, s, 9999, counts=(1, 0, 0, 0))) == []
    assert _ind(_close(book, s, 9999, counts=(0, 1, 0, 0))) == []
    assert s.filled[0] == 1
    assert [r[1] for r in _ind(_close(book, s, 2100))] == [2.1]


@pytest.mark.parametrize("start, signal, want_state, want_orders", [
    # section 6's table: (state, signal) -> orders and the new state
    (FLAT, "high", SHORT_LONG, [("BUY", B, 1000, 100)]),
    (FLAT, "low", LONG_SHORT, [("BUY", A, 2000, 50)]),
    (LONG_SHORT, "high", SHORT_LONG, [("SELL", A, 2400, 30), ("BUY", B, 1000, 170)]),
    (LONG_SHORT, "low", LONG_SHORT, []),
    (SHORT_LONG, "low", LONG_SHORT, [("SELL", B, 1000, 30), ("BUY", A, 2000, 60)]),
    (SHORT_LONG, "high", SHORT_LONG, []),
])
def test_the_position_machine(start, signal, want_state, want_orders):
    """Section 6 and Procedure 4 (section 8): a high ratio buys symbol2, a low one symbol1; the
    held leg is sold first at its last trade price; sizes are 10 x floor(funds / (10 x price))."""
    book = _book(ST)
    s = book.initial_state()
    # One ratio so far (2.2), and a previous Indicator whose ratio lay inside its bands.
    s.window[0, -1], s.filled[0], s.prev[0] = 2.2, 1, (2.2, 2.3, 2.1)
    s.position[0], s.ratio_pos[0] = start, 2.2
    if start == LONG_SHORT:
        s.shares[0] = (30, 0)            # 30 A held, sold at the closing price below
    elif start == SHORT_LONG:
        s.shares[0] = (0, 30)
    # [2.2, 2.4]: mean 2.3, sd 0.1, 2.4 >= upper 2.35: high; [2.2, 2.0]: 2.0 <= lower 2.05: low
    a = 2400 if signal == "high" else 2000
    out = _close(book, s, a)
    got = [(o[1], o[2], o[3], o[4]) for o in out.orders]
    assert got == want_orders and s.position[0] == want_state
    funds = 100_000 + sum(p * n if k == "SELL" else -p * n for k, _sym, p, n in want_orders)
    if want_orders:
        assert s.balance[0] == funds and s.ratio_pos[0] == a / 1000
    else:                                # a signal that changes nothing is no transition
        assert s.balance[0] == 100_000


def test_stop_loss_after_no_transition_and_not_after_one():
    """Section 7: checked when no transition happened (a high while SHORT_LONG still checks it);
    ratio_pos is the Indicator's ratio when the position was taken."""
    book = _book(ST)
    s = book.initial_state()
    _close(book, s, 2000)
    _close(book, s, 2200)                # first Indicator: [2.0, 2.2]
    out = _close(book, s, 2500)          # 2.5 >= upper 2.425, but the previous 2.2 was not below its 2.15
    assert out.orders == []
    out = _close(book, s, 2300)          # [2.5, 2.3]: low (2.3 <= 2.35, prev 2.5 > its lower)
    assert [o[1] for o in out.orders] == ["BUY"] and s.position[0] == LONG_SHORT and s.ratio_pos[0] == 2.3
    held = int(s.shares[0, 0])
    out = _close(book, s, 2080, last=(2050, 1000, 0, 0))   # 2.08 <= 0.9 * 2.3 = 2.07? no
    assert out.orders == [] and s.position[0] == LONG_SHORT
    out = _close(book, s, 2060, last=(2050, 1000, 0, 0))   # 2.06 <= 2.07: stop, sell at the last trade
    assert out.orders == [("st_1", "SELL", A, 2050, held, 7_000, 7_003, 7_005)]
    assert s.position[0] == FLAT and s.shares[0].tolist() == [0, 0]


def test_a_signal_that_changes_nothing_still_checks_the_stop_loss():
    """Section 7: LONG_SHORT and a low signal (no transition) with the ratio below 0.9 x ratio_pos."""
    book = _book(ST)
    s = book.initial_state()
    s.window[0, -1], s.filled[0], s.prev[0] = 2.2, 1, (2.2, 2.3, 2.1)
    s.position[0], s.ratio_pos[0], s.shares[0] = LONG_SHORT, 2.3, (30, 0)
    out = _close(book, s, 2000)          # [2.2, 2.0]: low; 2.0 <= 0.9 x 2.3 = 2.07: stop
    assert out.orders == [("st_1", "SELL", A, 2000, 30, 7_000, 7_003, 7_005)]
    assert s.position[0] == FLAT and s.balance[0] == 100_000 + 30 * 2000


def test_a_transition_takes_precedence_over_the_stop_loss():
    """Section 7: LONG_SHORT, a high signal and the ratio below 0.9 x ratio_pos at once: the
    position changes (SELL A, BUY B), no stop-loss."""
    book = _book(ST)
    s = book.initial_state()
    s.window[0, -1], s.filled[0], s.prev[0] = 2.2, 1, (2.2, 2.3, 2.1)
    s.position[0], s.ratio_pos[0], s.shares[0] = LONG_SHORT, 3.0, (30, 0)
    out = _close(book, s, 2400)          # [2.2, 2.4]: high; 2.4 <= 0.9 x 3.0 = 2.7 too
    assert [(o[1], o[2]) for o in out.orders] == [("SELL", A), ("BUY", B)]
    assert s.position[0] == SHORT_LONG and s.ratio_pos[0] == 2.4


def test_collapsed_bands_give_no_signal():
    """Section 5: sd <= 4 N eps |avg| means no signal, whatever the comparisons say."""
    book = _book(ST)
    s = book.initial_state()
    for a in (2000, 2000, 2000):
        out = _close(book, s, a)
    assert _ind(out) == [("st_1", 2.0, 2.0, 2.0, 2.0)] and out.orders == []


def _close_sums(book: Book, state, a_sum, a_count, b_sum, b_count, last, stamp=7_000) -> Outputs:
    """Close one period from exact price sums and counts of A and B (C and D without a tick)."""
    out = Outputs.empty()
    book.close(state, ClosedPeriod(np.array([a_sum, b_sum, 0, 0], np.int64), np.array([a_count, b_count, 0, 0]),
                                   np.array(list(last) + [0, 0], np.int64), stamp, stamp + 3, stamp + 5), out)
    return out


def test_the_collapse_threshold_is_the_references():
    """The engines and the validator each hold the constants (neither imports the other): the same."""
    assert (COLLAPSE_ULPS, EPS) == (pairs_reference.COLLAPSE_ULPS, pairs_reference.EPS) == (4, 2.0 ** -52)


def test_a_genuine_crossing_near_2_31_cents_trades():
    """Section 5 (issue 27): tests/pairs_trace.py's trace near 2^31 cents, 190 ticks a period, one
    tick a cent dearer in some periods: sd ~ 9.8e-13 |avg|, which the old rule (1e-12 |avg|) took
    for collapsed bands (no order on main). Now: the high crossing buys B, the low one turns it into A."""
    book = _book(BIG_STRATEGY_ROW)
    s = book.initial_state()
    orders = []
    for q, bump in enumerate(BIG_BUMPS):
        orders += _close_sums(book, s, BIG_TICKS * BIG_PRICE + bump, BIG_TICKS, BIG_TICKS * BIG_PRICE, BIG_TICKS,
                              (BIG_PRICE, BIG_PRICE), stamp=1000 * (q + 1)).orders
    assert [(o[5], o[1], o[2], o[4]) for o in orders] == [(6000, "BUY", B, 40), (10000, "SELL", B, 40),
                                                          (10000, "BUY", A, 40)]
    assert s.position[0] == LONG_SHORT and s.shares[0].tolist() == [40, 0]


def _periods(kind: str, rng, count: int = 80) -> list[tuple[int, int, int, int]]:
    """(A sum, A count, B sum, B count) per period. "noise": the same ratio 6000/3002 two ways, exact
    means or 2000 over 1000.666... (one ulp apart after rounding); "genuine": A near 2^31 cents over
    1 to 199 ticks, its sum bumped by 0 to 2 cents, B flat (thousands of ulps apart)."""
    if kind == "noise":
        return [(6000, c, 3002, c) for c in rng.choice([1, 3], count)]
    return [(int(c) * BIG_PRICE + int(bump), int(c), int(c) * BIG_PRICE, int(c))
            for c, bump in zip(rng.integers(1, 200, count), rng.integers(0, 3, count))]


@pytest.mark.parametrize("kind", ["noise", "genuine"])
def test_the_collapse_rule_is_bit_for_bit_the_references(kind):
    """Book's orders are exactly those of the validator's reference over the same ratios, N from 2 to
    30 side by side; rounding noise crosses the bands by the comparisons alone and never trades,
    genuine moves near 2^31 cents (sd above 4 N eps |avg|, many below the old 1e-12 |avg|) do."""
    ns, mults = [2, 3, 5, 7, 13, 30], [0.5, 1.0, 1.2, 1.5, 2.0, 1.0]
    rows = [(f"st_{i}", A, B, 10 ** 12, 5, n, m, 0.2) for i, (n, m) in enumerate(zip(ns, mults))]
    book = _book(*rows)
    s = book.initial_state()
    periods = _periods(kind, np.random.default_rng(27))
    got: dict[str, list] = {r[0]: [] for r in rows}
    crossings = quiet = 0
    for q, p in enumerate(periods):
        out = _close_sums(book, s, *p, last=(BIG_PRICE, BIG_PRICE), stamp=1000 * (q + 1))
        for alias, kind_, *_rest in out.orders:
            got[alias].append((q, kind_))
    ratios = np.array([(a / ca) / (b / cb) for a, ca, b, cb in periods])
    k = len(ratios)
    cp = pairs_reference.ClosedPeriods(5000, np.arange(k), 1000 * (np.arange(k) + 1),
                                       np.column_stack([ratios, np.ones(k)]), np.ones((k, 2), np.int64),
                                       np.full((k, 2), BIG_PRICE, np.int64), np.full(2, BIG_PRICE, np.int64))
    for alias, _a, _b, funds, _p, n, mult, stop in rows:
        ind_rows: list = []
        ord_rows: list = []
        pairs_reference._run_strategy(pairs_reference.StrategyParams(alias, A, B, funds, 5, n, mult, stop), cp, 0, 1,
                                      ind_rows, ord_rows, [])
        assert got[alias] == [(int(ts) // 1000 - 1, t) for _al, t, _sym, _pr, _sz, ts, _off in ord_rows], alias
        ind = ind_rows[0]
        r, up, lo, avg = (ind[c].to_numpy() for c in ("ratio", "upperBand", "lowerBand", "avgRatio"))
        crossings += int((((r[1:] >= up[1:]) & (r[:-1] < up[:-1])) | ((r[1:] <= lo[1:]) & (r[:-1] > lo[:-1]))).sum())
        traded = np.isin(ind["inputTickTS"].to_numpy(), [ts for *_x, ts, _off in ord_rows])
        quiet += int((traded & ((up - avg) / mult <= 1e-12 * np.abs(avg))).sum())
    trades = sum(len(v) for v in got.values())
    assert crossings > 10
    if kind == "noise":
        assert trades == 0
    else:                       # some of them in bands the old rule (sd <= 1e-12 |avg|) silenced
        assert trades > 10 and quiet > 0


def test_an_order_of_size_zero_is_not_emitted_but_the_state_moves():
    """Section 8: funds below ten shares buy nothing, and the machine still moves."""
    book = _book(("st_1", A, B, 5_000, 5, 2, 0.5, 0.1))      # 50 dollars: ten shares of B cost 100
    s = book.initial_state()
    _close(book, s, 2000)
    _close(book, s, 2200)
    out = _close(book, s, 2000)          # low: FLAT -> LONG_SHORT, BUY A at 2000 x 0
    assert out.orders == [] and s.position[0] == LONG_SHORT and s.balance[0] == 5_000


def test_strategies_with_different_windows_match_the_spec_recipe_bit_for_bit():
    """One book, N from 2 to 30 side by side (rows with a shorter window add zeros first): every
    Indicator's doubles equal the reference engine's own recipe exactly, not within a tolerance."""
    ns = [2, 5, 7, 13, 30, 30, 3]
    rows = [(f"st_{i}", A, B, 1_000_000, 5, n, 1.5, 0.2) for i, n in enumerate(ns)]
    book = _book(*rows)
    s = book.initial_state()
    rng = np.random.default_rng(8)
    a_prices = rng.integers(1500, 2500, 60)
    got = {r[0]: [] for r in rows}
    for a in a_prices:
        for alias, ratio, avg, up, low in _ind(_close(book, s, int(a))):
            got[alias].append((ratio, avg, up, low))
    ratios = a_prices / 1000.0
    for (alias, *_rest), n, mult in zip(rows, ns, [1.5] * len(ns)):
        mean, sd = _window_stats(ratios, n)
        want = list(zip(ratios[n - 1:], mean, mean + mult * sd, mean - mult * sd))
        assert got[alias] == [tuple(float(x) for x in w) for w in want], alias


def test_the_closing_ticks_last_prices_are_the_order_prices():
    """Section 8: the price of an order is the last trade at the closing tick, not the average."""
    book = _book(ST)
    s = book.initial_state()
    _close(book, s, 2000)
    _close(book, s, 2200)
    out = _close(book, s, 2000, last=(2010, 990, 0, 0))
    assert out.orders == [("st_1", "BUY", A, 2010, 40, 7_000, 7_003, 7_005)]
    assert s.balance[0] == 100_000 - 40 * 2010


def test_a_book_holds_one_period_length_and_checks_its_strategies():
    with pytest.raises(ValueError, match="one period length"):
        _book(ST, ("st_2", C, D, 100_000, 10, 2, 0.5, 0.1))
    with pytest.raises(ValueError, match="both"):
        Strategy.of(("st_3", A, A, 100_000, 5, 2, 0.5, 0.1))
    assert math.isnan(_book(ST).initial_state().ratio_pos[0])
