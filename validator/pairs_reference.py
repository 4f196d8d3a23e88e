"""The reference engine for Pairs: the expected Indicator and MarketOrder streams.

It implements specs/PAIRS_SEMANTICS.md directly and shares no code with any translator or the
harness, so that one bug cannot make an engine and its check wrong the same way.

How it works: one pass over the ticks (in event order, batch by batch) computes, for every
distinct period length, the closed periods with their closing tick and, per monitored symbol, the
exact integer price sum and tick count of the period and the last trade price at the closing
tick, and at the end each symbol's last trade in the input (what open positions are valued at,
section 10). Each strategy then works on those few thousand period rows: ratios, the count window
(summed oldest first, as the spec says), band crossings vectorized, and the state machine with
Procedure 4 in integer cents.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from kit.errors import CepkitError, at
from kit.manifest import Manifest
from kit.workload import PairsStrategy, load_aux
from validator.ticks import TickBatch, iter_ticks, open_ticks

FLAT, LONG_SHORT, SHORT_LONG = "FLAT", "LONG_SHORT", "SHORT_LONG"
# Collapsed bands (PAIRS_SEMANTICS.md section 5): sd <= COLLAPSE_ULPS * EPS * N * |avgRatio| is what
# rounding alone can make of a window whose ratios are mathematically equal (at most (N + 3)/2 * EPS
# * |avgRatio|, derived there), with a margin of 2 at least. 4 * EPS * N is exact (powers of two).
COLLAPSE_ULPS = 4
EPS = 2.0 ** -52


@dataclass(frozen=True)
class StrategyParams:
    """What the reference needs of one strategy; money in cents, period in seconds."""

    alias: str
    symbol1: str
    symbol2: str
    available_funds_cents: int
    period_length_s: int
    num_periods: int
    bands_multiplier: float
    stop_loss_perc: float

    def __post_init__(self) -> None:
        if self.symbol1 == self.symbol2:
            raise CepkitError(f"strategy {self.alias}: symbol1 and symbol2 are both {self.symbol1}")
        if self.period_length_s <= 0 or self.num_periods < 1 or self.available_funds_cents < 0:
            raise CepkitError(f"strategy {self.alias}: invalid parameters")

    @classmethod
    def of(cls, s: PairsStrategy) -> "StrategyParams":
        """From the strategies spec model (funds are already in cents there)."""
        return cls(s.alias, s.symbol1, s.symbol2, int(s.available_funds), int(s.period_length),
                   int(s.num_periods), float(s.bands_multiplier), float(s.stop_loss_perc))


@dataclass(frozen=True)
class ClosedPeriods:
    """Closed periods of one length, in closing order; per-symbol columns follow `symbols`."""

    period_ms: int
    trigger_offset: np.ndarray   # event position of each closing tick
    trigger_ts_ms: np.ndarray    # its tickTS
    sums: np.ndarray             # [periods, symbols] exact integer price sums (float64, < 2^53)
    counts: np.ndarray           # [periods, symbols]
    last_price: np.ndarray       # [periods, symbols] last trade price at the closing tick (0: none)
    end_price: np.ndarray        # [symbols] last trade price at the end of the input (0: none)


@dataclass(frozen=True)
class PairsReference:
    indicators: pd.DataFrame     # strategy, ratio, avgRatio, upperBand, lowerBand, inputTickTS, inputOffset
    orders: pd.DataFrame         # strategy, type, symbol, price, size, inputTickTS, inputOffset
    final: pd.DataFrame          # strategy, state, symbol held, shares, balance, value at the input's last trades
    input_per_second: pd.DataFrame | None = None   # second (since origin), count: ticks of the dataset


def _sum_by(key: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """Sum of `weights` per key in 0..size-1, always float64 (exact: integer sums below 2^53).

    `np.bincount` with weights returns int64, not float64, when `key` is empty (a batch without a
    tick of any monitored symbol), and adding the float carry to that failed; the dtype is fixed
    here, where the sums are made."""
    return np.bincount(key, weights=weights.astype(np.float64, copy=False), minlength=size).astype(np.float64,
                                                                                                  copy=False)


@dataclass(frozen=True)
class _Monitored:
    """The ticks of a batch whose symbol some strategy watches, taken once for every period length:
    their positions in the batch, symbol indices and prices (cents)."""

    index: np.ndarray
    sym: np.ndarray
    price: np.ndarray

    @classmethod
    def of(cls, b: TickBatch) -> "_Monitored":
        index = np.flatnonzero(b.sym >= 0)
        return cls(index, b.sym[index].astype(np.int64), b.price[index])


class _PeriodAccumulator:
    """Streams tick batches into closed periods of one length."""

    def __init__(self, period_ms: int, n_symbols: int):
        self.period_ms = period_ms
        self.n = n_symbols
        self.cur = None                                   # period index of the open period
        self.open_sum = np.zeros(n_symbols, dtype=np.float64)
        self.open_cnt = np.zeros(n_symbols, dtype=np.int64)
        self.last = np.zeros(n_symbols, dtype=np.int64)   # last price so far (0: no tick yet)
        self.out: dict[str, list] = {k: [] for k in ("off", "ts", "sum", "cnt", "last")}

    def _close(self, trig: int, b: TickBatch, sums, cnts, last_end) -> None:
        last = last_end.copy()
        s = b.sym[trig]
        if s >= 0:                      # the closing tick itself is the latest trade of its symbol
            last[s] = b.price[trig]
        self.out["off"].append(b.offset + trig)
        self.out["ts"].append(b.tick_ts_ms[trig])
        self.out["sum"].append(sums)
        self.out["cnt"].append(cnts)
        self.out["last"].append(last)

    def _segment_starts(self, ts: np.ndarray) -> np.ndarray:
        """Where a new period begins in the batch: the positions i > 0 with ts[i] // period !=
        ts[i - 1] // period. As ts never decreases, these are the first ticks at or after each
        period boundary inside the batch, found by a binary search per boundary instead of a
        pass over every tick (a batch spans a few periods); a batch that spans more periods than
        it has ticks (sparse data) takes the pass."""
        first, last = int(ts[0]) // self.period_ms, int(ts[-1]) // self.period_ms
        if last - first > len(ts):
            p = ts // self.period_ms
            return np.flatnonzero(p[1:] != p[:-1]) + 1
        bounds = np.arange(first + 1, last + 1, dtype=np.int64) * self.period_ms
        return np.unique(np.searchsorted(ts, bounds, side="left"))     # an empty period adds no start

    def feed(self, b: TickBatch, m: "_Monitored") -> None:
        new_seg = self._segment_starts(b.tick_ts_ms)
        starts = np.concatenate([[0], new_seg])
        nseg = len(starts)
        key = np.searchsorted(new_seg, m.index, side="right") * self.n + m.sym     # (segment, symbol)
        sums = _sum_by(key, m.price, nseg * self.n).reshape(nseg, self.n)
        cnts = np.bincount(key, minlength=nseg * self.n).astype(np.int64, copy=False).reshape(nseg, self.n)
        # The last trade of each symbol in each segment: the greatest position per key. (An
        # unbuffered maximum is exact whatever the order numpy visits the positions in, unlike a
        # plain fancy assignment with repeated keys; and it is a pass, not a sort.)
        last_pos = np.full(nseg * self.n, -1, dtype=np.int64)
        np.maximum.at(last_pos, key, np.arange(key.size, dtype=np.int64))
        seg_last = np.zeros(nseg * self.n, dtype=np.int64)
        has = last_pos >= 0
        seg_last[has] = m.price[last_pos[has]]
        seg_last = seg_last.reshape(nseg, self.n)
        # Forward-fill last prices across segments, starting from the carried state.
        last_end = np.empty_like(seg_last)
        running = self.last
        for j in range(nseg):
            running = np.where(seg_last[j] > 0, seg_last[j], running)
            last_end[j] = running
        continues = self.cur is not None and int(b.tick_ts_ms[0]) // self.period_ms == self.cur
        if continues:
            sums[0] += self.open_sum
            cnts[0] += self.open_cnt
        elif self.cur is not None:
            self._close(0, b, self.open_sum, self.open_cnt, self.last)
        for j in range(nseg - 1):
            self._close(int(starts[j + 1]), b, sums[j], cnts[j], last_end[j])
        self.cur = int(b.tick_ts_ms[-1]) // self.period_ms
        self.open_sum, self.open_cnt, self.last = sums[-1].copy(), cnts[-1].copy(), last_end[-1].copy()

    def result(self) -> ClosedPeriods:
        o = self.out
        end_price = self.last.astype(np.int64, copy=True)   # after the last batch: the input's last trades
        if not o["off"]:
            empty = np.zeros((0, self.n))
            return ClosedPeriods(self.period_ms, np.zeros(0, np.int64), np.zeros(0, np.int64),
                                 empty, empty.astype(np.int64), empty.astype(np.int64), end_price)
        return ClosedPeriods(self.period_ms, np.array(o["off"], dtype=np.int64), np.array(o["ts"], dtype=np.int64),
                             np.vstack(o["sum"]), np.vstack(o["cnt"]).astype(np.int64),
                             np.vstack(o["last"]).astype(np.int64), end_price)


def closed_periods(batches: Iterable[TickBatch], period_lengths_ms: Sequence[int],
                   n_symbols: int) -> dict[int, ClosedPeriods]:
    """One pass over the ticks for every period length at once."""
    accs = {p: _PeriodAccumulator(p, n_symbols) for p in sorted(set(period_lengths_ms))}
    prev_ts = None
    for b in batches:
        if len(b.tick_ts_ms) == 0:
            continue
        ts = b.tick_ts_ms
        bad = np.flatnonzero(np.diff(ts) < 0)
        if prev_ts is not None and ts[0] < prev_ts:
            bad = np.concatenate([[-1], bad])
        if bad.size:
            row = b.offset + int(bad[0]) + 1
            raise CepkitError(f"tick {row} (0-based, event order): tickTS goes backwards; "
                              "ticks must be in time order")
        prev_ts = int(ts[-1])
        m = _Monitored.of(b)
        for acc in accs.values():
            acc.feed(b, m)
    return {p: a.result() for p, a in accs.items()}


def _window_stats(r: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population sd of each full window of n ratios, summed oldest first."""
    w = np.lib.stride_tricks.sliding_window_view(r, n)
    acc = w[:, 0].copy()
    for j in range(1, n):
        acc += w[:, j]
    mean = acc / n
    dev = (w[:, 0] - mean) ** 2
    for j in range(1, n):
        dev += (w[:, j] - mean) ** 2
    return mean, np.sqrt(dev / n)


# What a MarketOrder carries (specs/OUTPUT_LOG.md): `size` a 32-bit int; money in cents a 64-bit one.
# An input whose exact order arithmetic leaves these is outside the benchmark (specs/PAIRS_SEMANTICS.md,
# section 8): refused in one line, never an overflow.
MAX_ORDER_SIZE = 2**31 - 1
MAX_CENTS = 2**63 - 1


class OrderRangeError(CepkitError):
    """The strategies over this dataset make an order size or a balance beyond what the outputs
    carry; the message names the strategy and the closing tick (the caller adds the file)."""


def _run_strategy(st: StrategyParams, cp: ClosedPeriods, i1: int, i2: int,
                  ind_rows: list, ord_rows: list, final_rows: list) -> None:
    ok = (cp.counts[:, i1] > 0) & (cp.counts[:, i2] > 0)
    rows = np.flatnonzero(ok)
    n = st.num_periods
    if len(rows) < n:
        final_rows.append((st.alias, FLAT, "", 0, st.available_funds_cents, st.available_funds_cents))
        return
    ratio_all = (cp.sums[rows, i1] / cp.counts[rows, i1]) / (cp.sums[rows, i2] / cp.counts[rows, i2])
    mean, sd = _window_stats(ratio_all, n)
    rows = rows[n - 1:]
    ratio = ratio_all[n - 1:]
    upper = mean + st.bands_multiplier * sd
    lower = mean - st.bands_multiplier * sd
    ts = cp.trigger_ts_ms[rows]
    off = cp.trigger_offset[rows]
    ind_rows.append(pd.DataFrame({"strategy": st.alias, "ratio": ratio, "avgRatio": mean, "upperBand": upper,
                                  "lowerBand": lower, "inputTickTS": ts, "inputOffset": off}))
    live = sd > COLLAPSE_ULPS * EPS * n * np.abs(mean)       # the runtime computes the same double
    high = np.zeros(len(ratio), bool)
    low = np.zeros(len(ratio), bool)
    high[1:] = (ratio[1:] >= upper[1:]) & (ratio[:-1] < upper[:-1]) & live[1:]
    low[1:] = (ratio[1:] <= lower[1:]) & (ratio[:-1] > lower[:-1]) & live[1:]

    s1, s2 = st.symbol1, st.symbol2
    state, balance, held, shares, ratio_pos = FLAT, int(st.available_funds_cents), None, 0, 0.0
    idx = {s1: i1, s2: i2}

    def price(sym: str, k: int) -> int:
        return int(cp.last_price[rows[k], idx[sym]])

    def emit(kind: str, sym: str, p: int, size: int, k: int) -> None:
        if size > MAX_ORDER_SIZE:
            raise OrderRangeError(f"strategy {st.alias}: the {kind} of {sym} at the closing tick of offset "
                                  f"{int(off[k])} (tickTS {int(ts[k])}) would be of {size:,} shares, beyond a "
                                  f"MarketOrder's size (a 32-bit int, at most {MAX_ORDER_SIZE:,}): prices that "
                                  f"swing this far are outside the benchmark (specs/PAIRS_SEMANTICS.md, section 8)")
        if size > 0:
            ord_rows.append((st.alias, kind, sym, p, size, int(ts[k]), int(off[k])))

    def in_range(cents: int, k: int) -> int:
        if cents > MAX_CENTS:
            raise OrderRangeError(f"strategy {st.alias}: its funds at the closing tick of offset {int(off[k])} "
                                  f"(tickTS {int(ts[k])}) would be {cents:,} cents, beyond a 64-bit int: prices "
                                  f"that swing this far are outside the benchmark (specs/PAIRS_SEMANTICS.md, "
                                  f"section 8)")
        return cents

    for k in range(len(ratio)):
        target = None
        if high[k] and state in (FLAT, LONG_SHORT):
            target, to_buy = SHORT_LONG, s2
        elif low[k] and state in (FLAT, SHORT_LONG):
            target, to_buy = LONG_SHORT, s1
        if target is not None:
            available = balance
            if held is not None:
                sell_price = price(held, k)
                available += shares * sell_price
                emit("SELL", held, sell_price, shares, k)
            in_range(available, k)
            buy_price = price(to_buy, k)
            buy_size = 10 * (available // (10 * buy_price))
            emit("BUY", to_buy, buy_price, buy_size, k)
            balance = available - buy_size * buy_price
            state, held, shares, ratio_pos = target, to_buy, buy_size, float(ratio[k])
            continue
        if state == SHORT_LONG and ratio[k] >= (1 + st.stop_loss_perc) * ratio_pos or \
                state == LONG_SHORT and ratio[k] <= (1 - st.stop_loss_perc) * ratio_pos:
            p = price(held, k)
            emit("SELL", held, p, shares, k)
            balance = in_range(balance + shares * p, k)
            state, held, shares = FLAT, None, 0
    # Section 10: an open position is valued at the held symbol's last trade in the whole input (the
    # price a closing SELL at the end of the run would get), not at the last Indicator's closing
    # tick: the last period, which never closes, and skipped periods still trade.
    value = balance + (shares * int(cp.end_price[idx[held]]) if held is not None else 0)
    if value > MAX_CENTS:
        raise OrderRangeError(f"strategy {st.alias}: its position at the end of the input would be worth {value:,} "
                              f"cents, beyond a 64-bit int: prices that swing this far are outside the benchmark "
                              f"(specs/PAIRS_SEMANTICS.md, section 8)")
    final_rows.append((st.alias, state, held or "", shares, balance, value))


class _PerSecond:
    """Counts ticks per second since `origin_ms` while the batches stream past (no second read).

    Memory follows the seconds that hold ticks, not the distance from the origin: a dataset whose
    `start_epoch_ms` lies years before its ticks (0, say) once made this a bincount over billions
    of seconds. The frame has a row for every second from 0 to the last when that is at most
    `DENSE_SECONDS` rows, else only for the seconds that hold ticks."""

    DENSE_SECONDS = 1 << 20

    def __init__(self, origin_ms: int):
        self.origin_ms = int(origin_ms)
        self.secs: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []

    def tally(self, batches: Iterable[TickBatch]) -> Iterable[TickBatch]:
        for b in batches:
            if len(b.tick_ts_ms):
                # Ticks are in time order (checked by the reader), so seconds come in runs.
                sec = np.maximum((b.tick_ts_ms - np.int64(self.origin_ms)) // 1000, 0)
                starts = np.flatnonzero(np.r_[True, sec[1:] != sec[:-1]])
                self.secs.append(sec[starts])
                self.counts.append(np.diff(np.r_[starts, len(sec)]))
            yield b

    def frame(self) -> pd.DataFrame:
        if not self.secs:
            return pd.DataFrame({"second": np.zeros(0, np.int64), "count": np.zeros(0, np.int64)})
        secs, counts = np.concatenate(self.secs), np.concatenate(self.counts)
        first = np.flatnonzero(np.r_[True, secs[1:] != secs[:-1]])      # a second split over two batches
        secs, counts = secs[first], np.add.reduceat(counts, first)
        if secs[-1] < self.DENSE_SECONDS:
            dense = np.zeros(int(secs[-1]) + 1, dtype=np.int64)
            dense[secs] = counts
            return pd.DataFrame({"second": np.arange(len(dense)), "count": dense})
        return pd.DataFrame({"second": secs.astype(np.int64), "count": counts.astype(np.int64)})


def compute_reference(ticks_dir: Path | Manifest, strategies: Sequence[StrategyParams],
                      count_from_ms: int | None = None, *, strategies_file: Path | None = None,
                      verify: bool = True) -> PairsReference:
    """Expected outputs of `strategies` over the dataset in `ticks_dir` (a directory, read and
    verified with `verify`, or its manifest already read); with `count_from_ms`, also the input
    ticks per second since then (for the report's input-rate chart).

    Every symbol a strategy watches must be a symbol of the dataset: of its `pairs-aux.json` when
    the manifest names one (checked before any tick is read), else one that occurs in its ticks.
    Otherwise an error names `strategies_file`, the strategy and the symbol."""
    manifest = open_ticks(ticks_dir, verify=verify)
    symbols = sorted({s for st in strategies for s in (st.symbol1, st.symbol2)})
    index = {s: i for i, s in enumerate(symbols)}
    listed = dataset_symbols(manifest)
    if listed is not None:
        check_symbols(strategies, listed, strategies_file, f"{manifest.aux_path} lists {len(listed)} symbols")
    seen = np.zeros(len(symbols), dtype=bool)
    batches: Iterable[TickBatch] = iter_ticks(manifest, symbols)
    if listed is None:          # the symbols the ticks hold are then the dataset's: count them on the way
        batches = _mark_seen(batches, seen)
    counter = _PerSecond(count_from_ms) if count_from_ms is not None else None
    if counter is not None:
        batches = counter.tally(batches)
    periods = closed_periods(batches, [st.period_length_s * 1000 for st in strategies], len(symbols))
    if listed is None:
        check_symbols(strategies, {s for s, hit in zip(symbols, seen) if hit}, strategies_file,
                      f"no tick of it in {manifest.directory}")
    try:
        ref = reference_from_periods(periods, strategies, index)
    except OrderRangeError as e:
        raise OrderRangeError(f"{strategies_file or 'strategies'} over {manifest.directory}: {e}") from None
    return dataclasses.replace(ref, input_per_second=counter.frame()) if counter is not None else ref


def dataset_symbols(manifest: Manifest) -> frozenset[str] | None:
    """The symbols `pairs-aux.json` lists, when the manifest names that file (None otherwise)."""
    if manifest.aux_path is None:
        return None
    return load_aux(manifest.aux_path).symbol_set


def check_symbols(strategies: Sequence[StrategyParams], symbols: Collection[str], strategies_file: Path | None,
                  why: str) -> None:
    """Every watched symbol is in `symbols`; else one line naming the file, strategy and symbol."""
    for st in strategies:
        for sym in (st.symbol1, st.symbol2):
            if sym not in symbols:
                raise at(strategies_file if strategies_file is not None else "strategies", st.alias,
                         f"symbol {sym} is not a symbol of the dataset ({why})")


def _mark_seen(batches: Iterable[TickBatch], seen: np.ndarray) -> Iterator[TickBatch]:
    for b in batches:
        hit = b.sym[b.sym >= 0]
        if hit.size:            # a count per symbol: a pass over the batch, where a unique would sort it
            seen |= np.bincount(hit, minlength=len(seen)) > 0
        yield b


def reference_from_periods(periods: dict[int, ClosedPeriods], strategies: Sequence[StrategyParams],
                           index: dict[str, int]) -> PairsReference:
    ind_rows: list = []
    ord_rows: list = []
    final_rows: list = []
    for st in strategies:
        _run_strategy(st, periods[st.period_length_s * 1000], index[st.symbol1], index[st.symbol2],
                      ind_rows, ord_rows, final_rows)
    ind_cols = ["strategy", "ratio", "avgRatio", "upperBand", "lowerBand", "inputTickTS", "inputOffset"]
    indicators = pd.concat(ind_rows, ignore_index=True) if ind_rows else pd.DataFrame(columns=ind_cols)
    indicators = indicators.sort_values(["inputOffset", "strategy"], kind="stable", ignore_index=True)
    orders = pd.DataFrame(ord_rows, columns=["strategy", "type", "symbol", "price", "size", "inputTickTS",
                                             "inputOffset"])
    orders = orders.sort_values(["inputOffset", "strategy"], kind="stable", ignore_index=True)
    final = pd.DataFrame(final_rows, columns=["strategy", "state", "held", "shares", "balance_cents",
                                              "value_cents"])
    return PairsReference(indicators, orders, final)
