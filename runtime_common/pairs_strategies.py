"""The Pairs strategies of one period length, vectorized over the strategies: plain numpy, no Spark.

specs/PAIRS_SEMANTICS.md sections 3-8 pin what a strategy does when one of its periods closes:
the ratio of its two symbols' period averages, the count window of the last N ratios with
Bollinger bands, band-crossing signals, the three-state position machine with stop-loss, and the
orders of Procedure 4 in integer cents. Strategies with the same period length close their
periods at the same ticks, so `Book` holds such a group as columns (one row per strategy) and
`Book.close` steps every strategy of the group over one closed period with numpy operations over
the rows; Python runs only for the strategies that trade in that period (a few).

The doubles are bit-for-bit those of the spec's recipe: the window is summed oldest first, one
column at a time over all rows (0 + r_1 = r_1 exactly, so rows with a shorter window simply add
zeros before their first ratio), then divided by N; the population sd likewise.

The state of a group (`BookState`) is a handful of arrays that the Spark operator stores as one
typed value (runtime_common/pairs_bucket.py); the strategies' parameters are the program's data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLAT, LONG_SHORT, SHORT_LONG = 0, 1, 2
POSITION_NAMES = ("FLAT", "LONG_SHORT", "SHORT_LONG")
# Bands this narrow give no signal (PAIRS_SEMANTICS.md section 5): sd <= COLLAPSE_ULPS * EPS * N *
# |avgRatio|, what rounding alone makes of mathematically equal ratios (with a margin). 4 * EPS * N is
# exact (powers of two), so the threshold is one rounding of the product with |avgRatio|, as the
# validator's reference computes it.
COLLAPSE_ULPS = 4
EPS = 2.0 ** -52


@dataclass(frozen=True)
class Strategy:
    """One strategy as generated programs hold it: (alias, symbol1, symbol2, availableFunds in
    cents, periodLength in s, numPeriods, bandsMultiplier, stopLossPerc as a fraction)."""

    alias: str
    symbol1: str
    symbol2: str
    funds_cents: int
    period_s: int
    num_periods: int
    bands_multiplier: float
    stop_loss: float

    def __post_init__(self) -> None:
        if self.symbol1 == self.symbol2:
            raise ValueError(f"strategy {self.alias}: symbol1 and symbol2 are both {self.symbol1}")
        if self.period_s < 1 or self.num_periods < 1 or self.funds_cents < 0:
            raise ValueError(f"strategy {self.alias}: periodLength and numPeriods must be >= 1, funds >= 0")

    @classmethod
    def of(cls, row) -> "Strategy":
        alias, s1, s2, funds, period, n, mult, stop = row
        return cls(str(alias), str(s1), str(s2), int(funds), int(period), int(n), float(mult), float(stop))


@dataclass
class BookState:
    """The mutable state of a group of strategies, one row each (the window right-aligned)."""

    window: np.ndarray      # float64 [n, width]: the last ratios, newest in the last column
    filled: np.ndarray      # int64 [n]: ratios seen so far, capped at the row's N
    prev: np.ndarray        # float64 [n, 3]: the previous Indicator's ratio, upper, lower (NaN: none)
    position: np.ndarray    # int8 [n]: FLAT, LONG_SHORT, SHORT_LONG
    ratio_pos: np.ndarray   # float64 [n]: the ratio when the position was taken (NaN when flat)
    balance: np.ndarray     # int64 [n]: cents
    shares: np.ndarray      # int64 [n, 2]: shares of symbol1 and symbol2


@dataclass(frozen=True)
class ClosedPeriod:
    """What a group needs of one closed period: per symbol (codes of the caller's symbol list) the
    exact integer price sum and tick count, the last trade price at the closing tick (closing tick
    included), and the closing tick's tickTS, TS and ingestTS."""

    sums: np.ndarray        # int64 [symbols]
    counts: np.ndarray      # int64 [symbols]
    last_price: np.ndarray  # int64 [symbols] (0: no trade yet)
    tick_ts: int
    ts: int
    ingest_ts: int


@dataclass
class Outputs:
    """Output rows as columns, appended to by `Book.close`."""

    indicators: list        # of dicts of columns (one per close)
    orders: list            # of tuples (strategy, type, symbol, price, size, inputTickTS, inputTS, ingestTS)

    @classmethod
    def empty(cls) -> "Outputs":
        return cls([], [])


class Book:
    """The strategies of one period length over one list of symbols (`codes` index it)."""

    def __init__(self, strategies, symbol_code: dict[str, int]):
        self.strategies = tuple(Strategy.of(s) if not isinstance(s, Strategy) else s for s in strategies)
        if not self.strategies:
            raise ValueError("a book needs at least one strategy")
        periods = {s.period_s for s in self.strategies}
        if len(periods) != 1:
            raise ValueError(f"a book holds one period length, got {sorted(periods)}")
        self.period_ms = periods.pop() * 1000
        st = self.strategies
        self.alias = np.array([s.alias for s in st], dtype=object)
        self.symbols = np.array([[s.symbol1, s.symbol2] for s in st], dtype=object)
        self.codes = np.array([[symbol_code[s.symbol1], symbol_code[s.symbol2]] for s in st], dtype=np.int64)
        self.funds = np.array([s.funds_cents for s in st], dtype=np.int64)
        self.n = np.array([s.num_periods for s in st], dtype=np.int64)
        self.mult = np.array([s.bands_multiplier for s in st], dtype=np.float64)
        self.stop = np.array([s.stop_loss for s in st], dtype=np.float64)
        self.width = int(self.n.max())
        # Column j of the window is part of a row's window when j >= width - N.
        self.in_window = np.arange(self.width)[None, :] >= (self.width - self.n)[:, None]

    def __len__(self) -> int:
        return len(self.strategies)

    def initial_state(self) -> BookState:
        k = len(self)
        return BookState(window=np.zeros((k, self.width)), filled=np.zeros(k, np.int64),
                         prev=np.full((k, 3), np.nan), position=np.zeros(k, np.int8),
                         ratio_pos=np.full(k, np.nan), balance=self.funds.copy(),
                         shares=np.zeros((k, 2), np.int64))

    def close(self, state: BookState, period: ClosedPeriod, out: Outputs) -> None:
        """Step every strategy over one closed period (in place) and append its outputs."""
        c1, c2 = self.codes[:, 0], self.codes[:, 1]
        cnt1, cnt2 = period.counts[c1], period.counts[c2]
        live = np.flatnonzero((cnt1 > 0) & (cnt2 > 0))   # a symbol without a tick: the period is skipped
        if not len(live):
            return
        ratio = (period.sums[c1[live]].astype(np.float64) / cnt1[live]) / \
                (period.sums[c2[live]].astype(np.float64) / cnt2[live])
        win = state.window
        win[live, :-1] = win[live, 1:]
        win[live, -1] = ratio
        state.filled[live] = np.minimum(state.filled[live] + 1, self.n[live])
        full = state.filled[live] >= self.n[live]
        rows, ratio = live[full], ratio[full]
        if not len(rows):
            return
        n = self.n[rows].astype(np.float64)
        w = np.where(self.in_window[rows], win[rows], 0.0)
        total = np.zeros(len(rows))
        for j in range(self.width):             # oldest first, as the spec sums
            total = total + w[:, j]
        avg = total / n
        sq = np.zeros(len(rows))
        for j in range(self.width):
            d = np.where(self.in_window[rows, j], w[:, j] - avg, 0.0)
            sq = sq + d * d
        sd = np.sqrt(sq / n)
        upper = avg + self.mult[rows] * sd
        lower = avg - self.mult[rows] * sd
        out.indicators.append({"strategy": self.alias[rows], "ratio": ratio, "avgRatio": avg, "upperBand": upper,
                               "lowerBand": lower, "inputTickTS": period.tick_ts, "inputTS": period.ts,
                               "ingestTS": period.ingest_ts})
        prev = state.prev[rows]
        banded = ~(sd <= COLLAPSE_ULPS * EPS * n * np.abs(avg))
        # NaN (no previous Indicator) compares false, so the first Indicator never signals.
        high = banded & (ratio >= upper) & (prev[:, 0] < prev[:, 1])
        low = banded & (ratio <= lower) & (prev[:, 0] > prev[:, 2])
        state.prev[rows] = np.column_stack([ratio, upper, lower])
        pos = state.position[rows]
        rpos = state.ratio_pos[rows]
        to_short_long = high & (pos != SHORT_LONG)
        to_long_short = low & ~to_short_long & (pos != LONG_SHORT)
        moved = to_short_long | to_long_short
        stop = ~moved & (((pos == SHORT_LONG) & (ratio >= (1 + self.stop[rows]) * rpos)) |
                         ((pos == LONG_SHORT) & (ratio <= (1 - self.stop[rows]) * rpos)))
        for i in np.flatnonzero(moved | stop):
            self._trade(state, int(rows[i]), float(ratio[i]), bool(to_short_long[i]), bool(stop[i]), period, out)

    def _trade(self, state: BookState, row: int, ratio: float, to_short_long: bool, stop: bool,
               period: ClosedPeriod, out: Outputs) -> None:
        """Procedure 4 for one strategy, in exact integer cents (PAIRS_SEMANTICS.md section 8)."""
        alias = self.alias[row]
        stamp = (period.tick_ts, period.ts, period.ingest_ts)

        def order(kind: str, leg: int, price: int, size: int) -> None:
            if size > 0:
                out.orders.append((alias, kind, self.symbols[row, leg], price, size) + stamp)

        def price(leg: int) -> int:
            return int(period.last_price[self.codes[row, leg]])

        position = int(state.position[row])
        held = {LONG_SHORT: 0, SHORT_LONG: 1}.get(position)     # the leg held, if any
        available = int(state.balance[row])
        if held is not None:
            sell_price, size = price(held), int(state.shares[row, held])
            order("SELL", held, sell_price, size)
            available += size * sell_price
            state.shares[row, held] = 0
        if stop:
            state.balance[row] = available
            state.position[row] = FLAT
            state.ratio_pos[row] = np.nan
            return
        buy = 1 if to_short_long else 0         # high: buy symbol2; low: buy symbol1
        buy_price = price(buy)
        size = 10 * (available // (10 * buy_price))
        order("BUY", buy, buy_price, size)
        state.balance[row] = available - size * buy_price
        state.shares[row, buy] = size
        state.position[row] = SHORT_LONG if to_short_long else LONG_SHORT
        state.ratio_pos[row] = ratio
