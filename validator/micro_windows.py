"""Reference answers for window aggregations: count windows (Q2) and time windows (Q3, Q4).

Both reduce to the same problem: for many (group, window) pairs, aggregate a contiguous range of
one group's events. Events are sorted by (group, event order) once, so every such window is a
range [lo, hi) of that sorted array, and the aggregates are computed for all ranges at once:
- COUNT from the range length; SUM and AVG from prefix sums of centered values in extended
  precision (errors far below the comparison tolerance);
- MAX and MIN from a sparse table (exact);
- STDEV (population) exactly per window, two-pass, on the expanded ranges in chunks, because
  prefix sums cancel badly when a window's values are close together;
- MEDIAN exactly, as the k-th smallest of every range at once (validator/range_kth.py).
Meaning (specs/SEMANTICS.md sections 4 and 5) is followed to the letter: which evaluation points
exist, which groups emit, which event triggers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.errors import CepkitError
from kit.workload import CountWindowAggregation, TimeWindowAggregation
from kit.workload.query_base import INPUT_TS, WINDOW_END
from validator.range_kth import range_median

EXPAND_CHUNK = 1 << 23       # elements per chunk when windows are expanded for STDEV
MAX_DENSE_PAIRS = 50_000_000  # (window, group) pairs a time-window query may enumerate


class RangeAggregator:
    """Aggregates of values[lo:hi] for many ranges at once (values already in range order)."""

    def __init__(self, values: np.ndarray):
        self.v = np.asarray(values, dtype=np.float64)
        center = self.v.mean() if len(self.v) else 0.0
        self.prefix = np.concatenate([[0], np.cumsum((self.v - center).astype(np.longdouble))])
        self.center = center
        self._sparse: dict[str, list[np.ndarray]] = {}

    def count(self, lo, hi) -> np.ndarray:
        return (hi - lo).astype(np.int64)

    def sum(self, lo, hi) -> np.ndarray:
        n = (hi - lo).astype(np.longdouble)
        return ((self.prefix[hi] - self.prefix[lo]) + n * self.center).astype(np.float64)

    def avg(self, lo, hi) -> np.ndarray:
        return self.sum(lo, hi) / (hi - lo)

    def _table(self, fn: str) -> list[np.ndarray]:
        if fn not in self._sparse:
            op = np.maximum if fn == "MAX" else np.minimum
            levels = [self.v]
            k = 1
            while 2 * k <= len(self.v):
                prev = levels[-1]
                levels.append(op(prev[:-k], prev[k:]))
                k *= 2
            self._sparse[fn] = levels
        return self._sparse[fn]

    def extreme(self, fn: str, lo, hi) -> np.ndarray:
        levels = self._table(fn)
        length = hi - lo
        k = np.floor(np.log2(length)).astype(np.int64)
        op = np.maximum if fn == "MAX" else np.minimum
        out = np.empty(len(lo))
        for level in np.unique(k):
            sel = k == level
            tab = levels[level]
            out[sel] = op(tab[lo[sel]], tab[hi[sel] - (1 << level)])
        return out

    def _expanded(self, lo, hi):
        """Yield (window ids, values) chunk by chunk, ranges expanded element by element."""
        lengths = hi - lo
        ends = np.cumsum(lengths)
        start = 0
        while start < len(lo):
            stop = int(np.searchsorted(ends, ends[start] - lengths[start] + EXPAND_CHUNK, side="right"))
            stop = max(stop, start + 1)
            ln = lengths[start:stop]
            wid = np.repeat(np.arange(start, stop), ln)
            offs = np.arange(int(ln.sum())) - np.repeat(np.cumsum(ln) - ln, ln)
            yield start, stop, wid - start, self.v[np.repeat(lo[start:stop], ln) + offs]
            start = stop

    def stdev(self, lo, hi) -> np.ndarray:
        out = np.empty(len(lo))
        for a, b, wid, vals in self._expanded(lo, hi):
            n = np.bincount(wid, minlength=b - a)
            mean = np.bincount(wid, weights=vals, minlength=b - a) / n
            dev = np.bincount(wid, weights=(vals - mean[wid]) ** 2, minlength=b - a)
            out[a:b] = np.sqrt(dev / n)
        return out

    def median(self, lo, hi) -> np.ndarray:
        # Not by expanding the windows: that is q x w work, twenty minutes for a sliding R = 50 K.
        return range_median(self.v, lo, hi)

    def apply(self, fn: str, lo, hi) -> np.ndarray:
        if fn == "COUNT":
            return self.count(lo, hi)
        if fn == "SUM":
            return self.sum(lo, hi)
        if fn == "AVG":
            return self.avg(lo, hi)
        if fn in ("MAX", "MIN"):
            return self.extreme(fn, lo, hi)
        if fn == "STDEV":
            return self.stdev(lo, hi)
        if fn == "MEDIAN":
            return self.median(lo, hi)
        raise ValueError(fn)


def _groups(df: pd.DataFrame, group_by: tuple[str, ...]) -> tuple[np.ndarray, pd.DataFrame]:
    """Group code of every event (codes follow the sorted group keys) and the keys per code."""
    if not group_by:
        return np.zeros(len(df), dtype=np.int64), pd.DataFrame(index=[0])
    keys = df[list(group_by)].drop_duplicates().sort_values(list(group_by)).reset_index(drop=True)
    codes = keys.reset_index().merge(df[list(group_by)], on=list(group_by), how="right")["index"]
    return codes.to_numpy(np.int64), keys


def _output(query, keys: pd.DataFrame, g: np.ndarray, lo, hi, order: np.ndarray, df: pd.DataFrame,
            trigger_ts: np.ndarray, window_end: np.ndarray | None) -> pd.DataFrame:
    cols: dict[str, np.ndarray] = {}
    for name in query.group_by:
        cols[name] = keys[name].to_numpy()[g]
    for a in query.aggregates:
        values = df[a.field].to_numpy(np.float64)[order] if a.field else np.zeros(len(order))
        cols[a.alias] = RangeAggregator(values).apply(a.function, lo, hi)
    if window_end is not None:
        cols[WINDOW_END] = window_end
    cols[INPUT_TS] = trigger_ts
    return pd.DataFrame(cols)


def _sorted_by_group(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    n = len(codes)
    order = np.lexsort((np.arange(n), codes))
    return order, codes[order] * n + order, n


def count_window(query: CountWindowAggregation, df: pd.DataFrame) -> pd.DataFrame:
    """Q2 (SEMANTICS.md section 4): whole-stream count window, emit every `slide` from full."""
    n, rows, slide = len(df), query.rows, query.slide
    empty = pd.DataFrame({name: [] for name, _ in query.output_fields()})
    if n < rows:
        return empty
    codes, keys = _groups(df, query.group_by)
    evals = (n - rows) // slide + 1
    i = np.arange(n)
    j = np.where(i <= rows - 1, 0, -(-(i - (rows - 1)) // slide))
    entered = j < evals
    g_count = len(keys)
    pairs = np.unique(j[entered] * g_count + codes[entered])
    jj, g = pairs // g_count, pairs % g_count
    e = rows - 1 + jj * slide
    order, key_sorted, base = _sorted_by_group(codes)
    lo = np.searchsorted(key_sorted, g * base + (e - rows + 1), side="left")
    hi = np.searchsorted(key_sorted, g * base + e, side="right")
    ts = df["TS"].to_numpy(np.int64)
    out = _output(query, keys, g, lo, hi, order, df, ts[e], None)
    out["_e"] = e
    return out.sort_values(["_e", *query.group_by], kind="stable").drop(columns="_e").reset_index(drop=True)


def time_window(query: TimeWindowAggregation, df: pd.DataFrame) -> pd.DataFrame:
    """Q3 and Q4 (SEMANTICS.md section 5): windows [e - range, e), e a multiple of slide,
    closed by the first event with TS >= e; one row per group with events in the window."""
    empty = pd.DataFrame({name: [] for name, _ in query.output_fields()})
    if len(df) == 0:
        return empty
    ts = df["TS"].to_numpy(np.int64)
    slide, rng = query.slide_ms, query.range_ms
    first_end = (ts[0] // slide + 1) * slide
    last_end = (ts[-1] // slide) * slide          # the last window end some event reaches
    if last_end < first_end:
        return empty
    codes, keys = _groups(df, query.group_by)
    g_count = len(keys)
    # Counted before anything is allocated: the span of TS comes from a data file.
    n_ends = (last_end - first_end) // slide + 1
    if n_ends * g_count > MAX_DENSE_PAIRS:
        raise CepkitError(f"query {query.id}: {n_ends:,} windows x {g_count:,} groups is too many "
                          "for the reference engine")
    ends = np.arange(first_end, last_end + 1, slide, dtype=np.int64)
    e = np.repeat(ends, g_count)
    g = np.tile(np.arange(g_count), len(ends))
    pos_lo = np.searchsorted(ts, e - rng, side="left")
    pos_hi = np.searchsorted(ts, e, side="left")
    order, key_sorted, base = _sorted_by_group(codes)
    lo = np.searchsorted(key_sorted, g * base + pos_lo, side="left")
    hi = np.searchsorted(key_sorted, g * base + pos_hi, side="left")
    keep = hi > lo
    e, g, lo, hi = e[keep], g[keep], lo[keep], hi[keep]
    closing = np.searchsorted(ts, e, side="left")
    out = _output(query, keys, g, lo, hi, order, df, ts[closing], e)
    return out.sort_values([WINDOW_END, *query.group_by], kind="stable").reset_index(drop=True)
