"""The Pairs logic over a batch of ticks in event order: plain numpy and Python, no Spark.

What it computes is pinned in specs/PAIRS_SEMANTICS.md: for every strategy, the average price of
each of its two symbols over epoch-aligned periods of `periodLength` seconds of tickTS, their
ratio, a count window over the last `numPeriods` ratios with Bollinger bands, band-crossing
signals, the three-state position machine with stop-loss, and the orders of Procedure 4 in
integer cents. Every output carries the closing tick's tickTS and TS as inputTickTS and inputTS.

A strategy is the tuple (alias, symbol1, symbol2, availableFunds (cents), periodLength (s),
numPeriods, bandsMultiplier, stopLossPerc (a fraction)) that generated programs hold as data.
The Spark side is spark_runtime/pairs_plan.py; the validator's independent reference is
validator/pairs_reference.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

FLAT, LONG_SHORT, SHORT_LONG = "FLAT", "LONG_SHORT", "SHORT_LONG"
COLLAPSE_REL = 1e-12  # bands this narrow give no signal (PAIRS_SEMANTICS.md section 5)

# One output row type for both streams: `stream` says which; each stream keeps its own columns.
OUTPUT_STREAMS = {
    "Indicator": ["strategy", "ratio", "avgRatio", "upperBand", "lowerBand", "inputTickTS", "inputTS", "ingestTS"],
    "MarketOrder": ["strategy", "type", "symbol", "price", "size", "inputTickTS", "inputTS", "ingestTS"],
}
OUTPUT_SCHEMA = (
    "stream string, strategy string, ratio double, avgRatio double, upperBand double, lowerBand double, "
    "type string, symbol string, price int, size int, inputTickTS long, inputTS long, ingestTS long"
)
OUT_COLUMNS = [c.split()[0] for c in OUTPUT_SCHEMA.split(", ")]


class PairsCore:
    """The Pairs logic over a batch of ticks in event order; plain numpy and Python, no Spark.

    The state is one JSON-able dict, so the Spark operator can keep it in its state store:
    - `periods[P_ms]`: the open period `k` of that length and each symbol's integer price sum and
      tick count in it;
    - `last[symbol]`: the last trade price seen so far;
    - `st[alias]`: the count window of ratios, the previous Indicator's (ratio, upper, lower),
      the position, ratio_pos, balance (cents) and shares of symbol1 and symbol2.
    """

    def __init__(self, strategies):
        self.strategies = tuple(strategies)
        self.symbols = sorted({s[1] for s in self.strategies} | {s[2] for s in self.strategies})
        self.code = {sym: i for i, sym in enumerate(self.symbols)}
        self.by_period: dict[int, list] = {}
        for s in self.strategies:
            self.by_period.setdefault(s[4] * 1000, []).append(s)
        # The symbols whose period aggregates each period length needs (shared by its strategies).
        self.period_codes = {p: sorted({self.code[s[1]] for s in ss} | {self.code[s[2]] for s in ss})
                             for p, ss in self.by_period.items()}

    def initial_state(self) -> dict:
        return {
            "periods": {str(p): {"k": None, "sum": {}, "cnt": {}} for p in self.by_period},
            "last": {},
            "st": {s[0]: {"win": [], "prev": None, "pos": FLAT, "rpos": None, "bal": s[3], "sh1": 0, "sh2": 0}
                   for s in self.strategies},
        }

    def process(self, state: dict, ticks: pd.DataFrame) -> pd.DataFrame:
        """Advance `state` (in place) over `ticks` (any row order; sorted here by `offset`) and
        return the output rows (OUTPUT_SCHEMA columns)."""
        ticks = ticks.sort_values("offset", kind="stable")
        codes = pd.Categorical(ticks["symbol"], categories=self.symbols).codes.astype(np.int64)
        batch = _Batch(codes, ticks["price"].fillna(0).to_numpy(np.int64), ticks["tickTS"].to_numpy(np.int64),
                       ticks["TS"].to_numpy(np.int64), ticks["ingestTS"].to_numpy(np.int64), state["last"],
                       self.symbols)
        out: list[tuple] = []
        for period_ms, strategies in self.by_period.items():
            pstate = state["periods"][str(period_ms)]
            for pos, sums, counts in self._closes(pstate, batch, period_ms):
                for s in strategies:
                    self._on_close(state["st"][s[0]], s, sums, counts, pos, batch, out)
        for code, price in batch.last_prices().items():
            state["last"][self.symbols[code]] = price
        if not out:
            return pd.DataFrame({c: [] for c in OUT_COLUMNS})
        return pd.DataFrame.from_records(out, columns=OUT_COLUMNS)

    def _closes(self, pstate: dict, batch: "_Batch", period_ms: int):
        """Yield (closing position, sums by code, counts by code) for every period of length
        period_ms that a tick of this batch closes, in event order; update the open period."""
        n = len(batch.tick)
        if n == 0:
            return
        period = batch.tick // period_ms
        first_k = period[0] if pstate["k"] is None else pstate["k"]
        starts = np.flatnonzero(np.diff(period, prepend=first_k) != 0)  # ticks opening a new period
        segment = np.zeros(n, dtype=np.int64)
        segment[starts] = 1
        segment = np.cumsum(segment)
        nseg, ncode = len(starts) + 1, len(self.symbols)
        known = batch.code >= 0
        flat = segment[known] * ncode + batch.code[known]
        sums = np.bincount(flat, weights=batch.price[known], minlength=nseg * ncode).reshape(nseg, ncode)
        counts = np.bincount(flat, minlength=nseg * ncode).reshape(nseg, ncode)
        # Integer sums stay exact in float64 far beyond any period's total (< 2**53 cents).
        sums = np.rint(sums).astype(np.int64)
        for sym, v in pstate["sum"].items():
            sums[0, self.code[sym]] += v
        for sym, v in pstate["cnt"].items():
            counts[0, self.code[sym]] += v
        for j, pos in enumerate(starts):
            yield int(pos), sums[j], counts[j]
        wanted = self.period_codes[period_ms]
        pstate["k"] = int(period[-1])
        pstate["sum"] = {self.symbols[c]: int(sums[-1, c]) for c in wanted if counts[-1, c]}
        pstate["cnt"] = {self.symbols[c]: int(counts[-1, c]) for c in wanted if counts[-1, c]}

    def _on_close(self, st: dict, s: tuple, sums, counts, pos: int, batch: "_Batch", out: list) -> None:
        alias, sym1, sym2, _funds, _p, num_periods, mult, stop_loss = s
        c1, c2 = self.code[sym1], self.code[sym2]
        if counts[c1] == 0 or counts[c2] == 0:
            return  # a symbol did not trade in the period: the strategy skips it
        ratio = (float(sums[c1]) / int(counts[c1])) / (float(sums[c2]) / int(counts[c2]))
        win = st["win"]
        win.append(ratio)
        if len(win) > num_periods:
            del win[0]
        if len(win) < num_periods:
            return
        total = 0.0
        for r in win:
            total += r
        avg = total / num_periods
        sq = 0.0
        for r in win:
            sq += (r - avg) * (r - avg)
        sd = math.sqrt(sq / num_periods)
        upper, lower = avg + mult * sd, avg - mult * sd
        tick_ts, ts, ingest = int(batch.tick[pos]), int(batch.ts[pos]), int(batch.ingest[pos])
        out.append(("Indicator", alias, ratio, avg, upper, lower, "", "", 0, 0, tick_ts, ts, ingest))
        prev, st["prev"] = st["prev"], [ratio, upper, lower]
        high = low = False
        if prev is not None and not sd <= COLLAPSE_REL * abs(avg):
            high = ratio >= upper and prev[0] < prev[1]
            low = ratio <= lower and prev[0] > prev[2]

        def order(kind: str, sym: str, price: int, size: int) -> None:
            if size > 0:
                out.append(("MarketOrder", alias, math.nan, math.nan, math.nan, math.nan, kind, sym, price, size,
                            tick_ts, ts, ingest))

        def trade(sell: str | None, buy: str) -> None:
            available = st["bal"]
            if sell is not None:
                key = "sh1" if sell == sym1 else "sh2"
                price = batch.last_at(self.code[sell], pos)
                order("SELL", sell, price, st[key])
                available += st[key] * price
                st[key] = 0
            price = batch.last_at(self.code[buy], pos)
            size = 10 * (available // (10 * price))
            order("BUY", buy, price, size)
            st["bal"] = available - size * price
            st["sh1" if buy == sym1 else "sh2"] = size
            st["rpos"] = ratio

        position = st["pos"]
        if high and position in (FLAT, LONG_SHORT):
            trade(sym1 if position == LONG_SHORT else None, sym2)
            st["pos"] = SHORT_LONG
        elif low and position in (FLAT, SHORT_LONG):
            trade(sym2 if position == SHORT_LONG else None, sym1)
            st["pos"] = LONG_SHORT
        elif position == SHORT_LONG and ratio >= (1 + stop_loss) * st["rpos"]:
            self._stop(st, "sh2", sym2, pos, batch, order)
        elif position == LONG_SHORT and ratio <= (1 - stop_loss) * st["rpos"]:
            self._stop(st, "sh1", sym1, pos, batch, order)

    def _stop(self, st: dict, key: str, sym: str, pos: int, batch: "_Batch", order) -> None:
        price = batch.last_at(self.code[sym], pos)
        order("SELL", sym, price, st[key])
        st["bal"] += st[key] * price
        st[key] = 0
        st["pos"] = FLAT


class _Batch:
    """One batch of ticks in event order, with last-trade lookups (the closing tick included)."""

    def __init__(self, code, price, tick, ts, ingest, last_before: dict, symbols):
        self.code, self.price, self.tick, self.ts, self.ingest = code, price, tick, ts, ingest
        self._last_before, self._symbols = last_before, symbols
        self._positions: dict[int, np.ndarray] = {}

    def _where(self, code: int) -> np.ndarray:
        if code not in self._positions:
            self._positions[code] = np.flatnonzero(self.code == code)
        return self._positions[code]

    def last_at(self, code: int, pos: int) -> int:
        where = self._where(code)
        i = np.searchsorted(where, pos, side="right")
        if i:
            return int(self.price[where[i - 1]])
        return int(self._last_before[self._symbols[code]])

    def last_prices(self) -> dict[int, int]:
        known = np.flatnonzero(self.code >= 0)
        if len(known) == 0:
            return {}
        codes = self.code[known]
        # The last occurrence of each code: reverse, take the first.
        rev_codes, rev_index = np.unique(codes[::-1], return_index=True)
        return {int(c): int(self.price[known[len(known) - 1 - i]]) for c, i in zip(rev_codes, rev_index)}
