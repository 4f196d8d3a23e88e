"""One bucket of Pairs strategies over a micro-batch of partial aggregates: plain numpy, no Spark.

A bucket (runtime_common/pairs_partials.py) is one key of the Spark operator: some whole
correlated pairs, their symbols and their strategies. Per micro-batch it receives its symbols'
aggregate rows and every clock row (both per granule, from every source partition) and:

1. walks the batch's granules in time order; at the first tick of a granule that starts a later
   period of some period length P (PAIRS_SEMANTICS.md section 2: the first tick of a later period
   of any symbol), it closes the open period of every such P: the strategies of that P step over
   the period's per-symbol sums and counts and the last trade prices at the closing tick
   (runtime_common/pairs_strategies.py);
2. adds the granule's aggregates to the open period of every P and moves the last prices on.

Its state is split by how often it changes, so a commit writes only what changed:
- `open` (value state): the open granule, the open period of each P, per P and symbol the open
  period's integer price sum and tick count, and each symbol's last trade price; rewritten by
  every batch with ticks of the bucket's symbols (~110 KiB a bucket at SF 256, two buckets);
- `books` (value state): the state of every strategy of the bucket (windows, previous Indicator,
  positions, balances, shares), all period lengths one after the other; read and rewritten only
  by a batch that closes a period (once in five seconds with Table B.1's periods).
Each is a typed record of arrays (`STATE_RECORDS`); `Store` is how the logic reaches them, so the
same code runs on Spark's state store and on a dict in the tests. Two records, not one per period
length in a map state: every state variable costs Spark an encoder built for every task of every
micro-batch (measured in specs/TRANSLATION.md), and a batch that closes P = 10 s closes P = 5 s too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from runtime_common.pairs_partials import Bucket
from runtime_common.pairs_strategies import Book, BookState, ClosedPeriod, Outputs

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

# The state records: (field, type), a type being "long" or the little-endian numpy dtype of a
# vector stored packed in a binary field ("<i8", "<f8", "<i1"). Packed, because a vector passed as
# a list of Python numbers costs a boxed object per element on both sides of Spark's state API:
# at SF 256 a bucket's `open` took 12 ms to write as lists and 5 ms packed (mostly the round trip
# to the JVM), its `books` 75 ms (196 at worst) against 12.
STATE_RECORDS = {
    "open": (("granule", "long"), ("periods", "<i8"), ("sums", "<i8"), ("counts", "<i8"), ("last", "<i8")),
    "books": (("window", "<f8"), ("filled", "<i8"), ("prev", "<f8"), ("position", "<i1"), ("ratioPos", "<f8"),
              ("balance", "<i8"), ("shares", "<i8")),
}


def encode(name: str, values: dict) -> tuple:
    """A state record as the tuple Spark stores (vectors packed)."""
    return tuple(int(values[f]) if t == "long" else np.ascontiguousarray(values[f], dtype=t).tobytes()
                 for f, t in STATE_RECORDS[name])


def decode(name: str, record) -> dict:
    """The fields of a stored record (vectors as read-only numpy arrays, flat)."""
    return {f: int(v) if t == "long" else np.frombuffer(bytes(v), dtype=t)
            for (f, t), v in zip(STATE_RECORDS[name], record)}


class Store(Protocol):
    """Where a bucket's state lives: values are tuples of `STATE_RECORDS` (None: unset)."""

    def get(self, name: str) -> tuple | None: ...

    def put(self, name: str, value: tuple) -> None: ...


class DictStore:
    """A Store in a dict (tests, and anything that runs the logic without Spark)."""

    def __init__(self):
        self.values: dict = {}
        self.writes: list = []

    def get(self, name):
        return self.values.get(name)

    def put(self, name, value):
        self.values[name] = value
        self.writes.append(name)


@dataclass
class Clock:
    granule: int | None
    periods: np.ndarray          # int64 [P]: the open period index of each period length


@dataclass
class Prices:
    sums: np.ndarray             # int64 [P, symbols]: the open period's integer price sums
    counts: np.ndarray           # int64 [P, symbols]
    last: np.ndarray             # int64 [symbols]: last trade price so far (0: none yet)


class PairsBucket:
    """The logic of one bucket; `process` is called once per micro-batch with its rows."""

    def __init__(self, bucket: Bucket, granule_ms: int):
        self.bucket = bucket
        self.granule_ms = int(granule_ms)
        code = {s: i for i, s in enumerate(bucket.symbols)}
        by_period: dict[int, list] = {}
        for s in bucket.strategies:
            by_period.setdefault(s.period_s * 1000, []).append(s)
        self.periods = np.array(sorted(by_period), dtype=np.int64)
        self.books = [Book(by_period[int(p)], code) for p in self.periods]
        self.n_symbols = len(bucket.symbols)

    # -- state records --------------------------------------------------------------------------
    def _open(self, store: Store) -> tuple[Clock, Prices]:
        v = store.get("open")
        shape = (len(self.periods), self.n_symbols)
        if v is None:
            return (Clock(None, np.zeros(len(self.periods), np.int64)),
                    Prices(np.zeros(shape, np.int64), np.zeros(shape, np.int64), np.zeros(self.n_symbols, np.int64)))
        r = decode("open", v)
        return (Clock(r["granule"], r["periods"].astype(np.int64)),
                Prices(r["sums"].reshape(shape).copy(), r["counts"].reshape(shape).copy(), r["last"].copy()))

    @staticmethod
    def _open_record(clock: Clock, prices: Prices) -> tuple:
        return encode("open", {"granule": clock.granule, "periods": clock.periods, "sums": prices.sums,
                               "counts": prices.counts, "last": prices.last})

    def _books(self, store: Store) -> list[BookState]:
        v = store.get("books")
        if v is None:
            return [b.initial_state() for b in self.books]
        r = decode("books", v)
        out, at, win_at = [], 0, 0
        for book in self.books:
            k = len(book)
            # The window is stored as each strategy's last N ratios only (its part of the columns).
            window = np.zeros((k, book.width))
            n_in = int(book.in_window.sum())
            window[book.in_window] = r["window"][win_at:win_at + n_in]
            sl = slice(at, at + k)
            out.append(BookState(window=window, filled=r["filled"][sl].copy(),
                                 prev=r["prev"][3 * at:3 * (at + k)].reshape(k, 3).copy(),
                                 position=r["position"][sl].copy(), ratio_pos=r["ratioPos"][sl].copy(),
                                 balance=r["balance"][sl].copy(),
                                 shares=r["shares"][2 * at:2 * (at + k)].reshape(k, 2).copy()))
            at, win_at = at + k, win_at + n_in
        return out

    def _books_record(self, states: list[BookState]) -> tuple:
        def cat(f):
            return np.concatenate([f(b, s) for b, s in zip(self.books, states)])
        return encode("books", {"window": cat(lambda b, s: s.window[b.in_window]),
                                "filled": cat(lambda b, s: s.filled), "prev": cat(lambda b, s: s.prev.ravel()),
                                "position": cat(lambda b, s: s.position), "ratioPos": cat(lambda b, s: s.ratio_pos),
                                "balance": cat(lambda b, s: s.balance), "shares": cat(lambda b, s: s.shares.ravel())})

    # -- one micro-batch ------------------------------------------------------------------------
    def process(self, store: Store, rows: pd.DataFrame) -> pd.DataFrame:
        """Advance the bucket over one batch of its partial rows (any order); the output rows."""
        if not len(rows):
            return _frame(Outputs.empty())
        col = {c: rows[c].to_numpy(np.int64) for c in ("granule", "code", "cnt", "sum", "price", "offset",
                                                        "tickTS", "TS", "ingestTS")}
        clock, prices = self._open(store)
        agg = col["cnt"] > 0
        clk = np.flatnonzero(~agg)
        # The first tick of each granule among the clock rows (the smallest offset over partitions).
        clk = clk[np.lexsort((col["offset"][clk], col["granule"][clk]))]
        first_of = {int(g): int(i) for g, i in zip(col["granule"][clk][::-1], clk[::-1])}
        agg_rows = np.flatnonzero(agg)
        books: list[BookState] | None = None
        out = Outputs.empty()
        changed = False
        for g in np.unique(col["granule"]):
            g = int(g)
            if clock.granule is None or g > clock.granule:
                if g not in first_of:
                    raise ValueError(f"pairs bucket {self.bucket.index}: no clock row for granule {g}")
                periods = (g * self.granule_ms) // self.periods
                if clock.granule is not None:
                    closing = np.flatnonzero(periods > clock.periods)
                    if len(closing):
                        books = books if books is not None else self._books(store)
                        self._close(books, closing, prices, col, first_of[g], out)
                clock = Clock(g, periods)
                changed = True
            elif g < clock.granule:
                raise ValueError(f"pairs bucket {self.bucket.index}: granule {g} after granule {clock.granule} "
                                 "(ticks out of time order)")
            mine = agg_rows[col["granule"][agg_rows] == g]
            if len(mine):
                _add(prices, col, mine)
                changed = True
        if changed:
            store.put("open", self._open_record(clock, prices))
        if books is not None:
            store.put("books", self._books_record(books))
        return _frame(out)

    def _close(self, books: list[BookState], closing: np.ndarray, prices: Prices, col: dict, at: int,
               out: Outputs) -> None:
        last = prices.last.copy()
        code = int(col["code"][at])
        if code >= 0:                           # the closing tick is the latest trade of its symbol
            last[code] = col["price"][at]
        for i in closing:
            period = ClosedPeriod(prices.sums[i].copy(), prices.counts[i].copy(), last, int(col["tickTS"][at]),
                                  int(col["TS"][at]), int(col["ingestTS"][at]))
            self.books[i].close(books[i], period, out)
            prices.sums[i] = 0
            prices.counts[i] = 0


def _add(prices: Prices, col: dict, rows: np.ndarray) -> None:
    """Add aggregate rows of one granule to every open period, and move the last prices on."""
    code = col["code"][rows]
    np.add.at(prices.sums, (slice(None), code), col["sum"][rows])
    np.add.at(prices.counts, (slice(None), code), col["cnt"][rows])
    order = np.argsort(col["offset"][rows], kind="stable")
    code_o = code[order][::-1]
    uniq, first = np.unique(code_o, return_index=True)       # the latest partial of each symbol
    prices.last[uniq] = col["price"][rows][order][::-1][first]


def _frame(out: Outputs) -> pd.DataFrame:
    parts = []
    if out.indicators:
        ind = pd.concat([pd.DataFrame(d) for d in out.indicators], ignore_index=True)
        ind.insert(0, "stream", "Indicator")
        parts.append(ind)
    if out.orders:
        orders = pd.DataFrame.from_records(out.orders, columns=["strategy", "type", "symbol", "price", "size",
                                                                "inputTickTS", "inputTS", "ingestTS"])
        orders.insert(0, "stream", "MarketOrder")
        parts.append(orders)
    if not parts:
        return pd.DataFrame({c: [] for c in OUT_COLUMNS})
    frame = pd.concat(parts, ignore_index=True)
    # Each stream leaves the other's columns empty; the sink keeps only a stream's own columns.
    for c, empty in _FILL.items():
        frame[c] = frame[c].fillna(empty) if c in frame else empty
    return frame[OUT_COLUMNS].astype(_DTYPES)


_FILL = {"ratio": np.nan, "avgRatio": np.nan, "upperBand": np.nan, "lowerBand": np.nan, "type": "", "symbol": "",
         "price": 0, "size": 0}
_DTYPES = {"price": np.int32, "size": np.int32, "inputTickTS": np.int64, "inputTS": np.int64, "ingestTS": np.int64}
