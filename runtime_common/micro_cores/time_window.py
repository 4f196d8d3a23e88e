"""Time-window aggregation core: Q3 TimeWindowAggregation and Q4 TwoLevelAggregation.

The contract of a core is in runtime_common/micro_cores/__init__.py; the meaning is specs/SEMANTICS.md
section 5, the reference `time_window` in validator/micro_windows.py. Windows are [e - range, e)
for e a multiple of slide; the window ending at e closes on the first event with TS >= e, which is
its inputTS. With pane j = [j*slide, (j+1)*slide) and k = range / slide, the window ending at
m*slide is panes [m - k, m).

Both plans are paned (the plan of the thesis' ref [59]); Q3 differs only by MEDIAN, which needs
the values. Per micro-batch, all numpy, no Python loop per event or per window:
1. the batch's events become one record per (pane, group) holding partials: COUNT, SUM (of the
   values minus a fixed shift), M2 (squared deviations from the record's mean), MAX, MIN; the
   first of them merges into the state's last record of that pane and group;
2. the windows closing in the batch (m from the state's `next` to the last event's pane) are found
   per group as the union of [p + 1, p + k] over the group's panes p, so empty windows and gaps
   cost nothing; each (window, group) row covers a contiguous run of the records sorted by
   (group, pane), found with searchsorted, and the runs are reduced all at once (reduceat);
3. the records older than the open windows are dropped.
STDEV combines (count, mean, M2) with Chan's formula, never a sum of squares, and the shift keeps
the means' rounding far below the spread of close values. MEDIAN (Q3 only) keeps the open range's
raw values and takes each row's median with one pandas groupby over the expanded rows.

Cost: O(n) per batch for step 1 (bincount; group keys coded densely, or hashed), and per closing
batch O(R log R) for the R records of the open range plus O(k) per output row (each row reduces
at most k records); MEDIAN adds O(k) per event of the range. State: the records of the last k
panes (at most k x groups), plus their raw values for MEDIAN: bounded by the window.
"""

import numpy as np
import pandas as pd

_tw_DENSE = 4        # codes spanning up to this many times the rows are compacted by a dense table


def _tw_compact(code, size):
    """Renumber codes (0 <= code < size) as 0..groups-1 keeping their order; returns (codes, groups)."""
    if size <= _tw_DENSE * len(code) + 1024:
        present = np.bincount(code, minlength=size) > 0
        rank = np.cumsum(present) - 1
        return rank[code], (int(rank[-1]) + 1 if size else 0)
    code, uniques = pd.factorize(code, sort=True)
    return code.astype(np.int64, copy=False), len(uniques)


def _tw_codes(cols):
    """Group code of every row of the key columns (0..groups-1, in lexicographic key order) and
    the number of groups."""
    code, size = None, 1
    for c in cols:
        lo, hi = (int(c.min()), int(c.max())) if c.dtype.kind in "iu" and len(c) else (0, -1)
        if lo <= hi and hi - lo <= _tw_DENSE * len(c) + 1024:    # integers of a small range: no hashing
            ci, ni = _tw_compact(c.astype(np.int64) - lo, hi - lo + 1)
        else:
            ci, uniques = pd.factorize(c, sort=True, use_na_sentinel=False)
            ci, ni = ci.astype(np.int64, copy=False), len(uniques)
        # Mixed radix over codes in key order keeps lexicographic order.
        code, size = (ci, ni) if code is None else _tw_compact(code * ni + ci, size * ni)
    return code, size


def _tw_runs(order, key, width, uniq, row_g, row_m, k):
    """Expand the rows' runs: row (group g, window m) is the items of `key` (group * width + pane
    rank, sorted; `order` maps back to the table) in [g * width + rank(m - k), g * width + rank(m)).
    Returns each run's start in the expansion, its length, and the expanded table indices."""
    a = np.searchsorted(key, row_g * width + np.searchsorted(uniq, row_m - k))
    size = np.searchsorted(key, row_g * width + np.searchsorted(uniq, row_m)) - a
    starts = np.cumsum(size) - size
    return starts, size, order[np.repeat(a - starts, size) + np.arange(int(size.sum()))]


class TimeWindowCore:
    """State: {"next": the first window end not yet closed, in panes (None before any event),
    "shift": field -> the value subtracted before summing, "rec": the records sorted by pane
    (columns pane, g:<key>, n, and per field s:, m2:, hi:, lo: as needed), "raw" (MEDIAN only):
    the open range's events (pane, g:<key>, v:<field>)}."""

    def __init__(self, q):
        self.slide = int(q["slide_ms"])
        self.k = int(q["range_ms"]) // self.slide
        self.fields = list(q["fields"])
        self.dtypes = {f: np.int64 if t in ("int", "long") else np.float64 for f, t in zip(q["fields"], q["types"])}
        self.aggs = [tuple(a) for a in q["aggregates"]]
        self.group_by = list(q["group_by"])
        self.keys = ["g:" + g for g in self.group_by]
        if q["paned"] and any(func == "MEDIAN" for func, _, _ in self.aggs):
            raise ValueError(f"query {q['id']}: MEDIAN cannot be combined from pane partials")
        # Partial columns per value field: every field keeps its sum (AVG needs it, STDEV the mean).
        self.parts = {}
        for func, f, _ in self.aggs:
            if func not in ("COUNT", "MEDIAN"):
                self.parts.setdefault(f, {"s"}).add({"STDEV": "m2", "MAX": "hi", "MIN": "lo"}.get(func, "s"))
        self.medians = list(dict.fromkeys(f for func, f, _ in self.aggs if func == "MEDIAN"))
        self.rec_cols = {"pane": np.int64, **{c: self.dtypes[c[2:]] for c in self.keys}, "n": np.int64}
        for f, parts in self.parts.items():
            self.rec_cols.update((p + ":" + f, np.float64) for p in sorted(parts))
        self.raw_cols = {"pane": np.int64, **{c: self.dtypes[c[2:]] for c in self.keys},
                         **{"v:" + f: np.float64 for f in self.medians}}
        # Empty results copy one template: building a DataFrame costs more than a small batch's work.
        self._template = pd.DataFrame({f: np.empty(0, self.dtypes[f]) for f in self.fields})

    def initial_state(self):
        state = {"next": None, "shift": {}, "rec": {c: np.empty(0, dt) for c, dt in self.rec_cols.items()}}
        if self.medians:
            state["raw"] = {c: np.empty(0, dt) for c, dt in self.raw_cols.items()}
        return state

    def _empty(self):
        return self._template.copy()

    def process(self, state, events):
        if len(events) == 0:
            return self._empty()
        ts = events["TS"].to_numpy(np.int64)
        pane = ts // self.slide
        keys = {c: events[c[2:]].to_numpy(self.rec_cols[c]) for c in self.keys}
        if state["next"] is None:
            state["next"] = int(pane[0]) + 1
            # The shift only needs to be near the values: the first batch's mean is.
            means = {f: float(events[f].to_numpy(np.float64).mean()) for f in self.parts}
            state["shift"] = {f: m if np.isfinite(m) else 0.0 for f, m in means.items()}
        rec = self._append(state["rec"], self._partials(pane, keys, events, state["shift"]))
        raw = None
        if self.medians:
            new = {"pane": pane, **keys, **{"v:" + f: events[f].to_numpy(np.float64) for f in self.medians}}
            raw = {c: np.concatenate([state["raw"][c], new[c]]) for c in self.raw_cols}
        first, last = state["next"], int(pane[-1])   # windows m in [first, last] close now
        out = None
        if last >= first:
            out = self._close(rec, raw, first, last, ts, state["shift"])
            state["next"] = last + 1
            # Windows still open (m > last) read panes >= last + 1 - k only.
            keep = int(np.searchsorted(rec["pane"], last + 1 - self.k))
            rec = {c: a[keep:].copy() for c, a in rec.items()}
            if raw is not None:
                keep = int(np.searchsorted(raw["pane"], last + 1 - self.k))
                raw = {c: a[keep:].copy() for c, a in raw.items()}
        state["rec"] = rec
        if raw is not None:
            state["raw"] = raw
        return self._empty() if out is None else out

    def _partials(self, pane, keys, events, shift):
        """The batch's records: one per (pane, group), sorted by pane (events are in TS order)."""
        run = np.zeros(len(pane), np.int64)
        np.cumsum(pane[1:] != pane[:-1], out=run[1:])
        if keys:
            g, groups = _tw_codes(list(keys.values()))
            idx, size = _tw_compact(run * groups + g, (int(run[-1]) + 1) * groups)
        else:
            idx, size = run, int(run[-1]) + 1
        tab = {"pane": pane, **keys, "n": None}
        for f, parts in self.parts.items():
            x = events[f].to_numpy(np.float64)
            tab["s:" + f] = x - shift[f]
            if "m2" in parts:
                tab["m2:" + f] = None           # one value: M2 = 0
            tab["hi:" + f] = tab["lo:" + f] = x
        return self._reduce(tab, idx, size)

    def _reduce(self, tab, idx, size):
        """Combine the records of `tab` that share a code idx (0..size-1) into one record per code,
        in code order. tab["n"] None means single events (n = 1, M2 = 0)."""
        rep = np.empty(size, np.int64)
        rep[idx] = np.arange(len(idx))          # any record of the code: they share pane and keys
        out = {c: tab[c][rep] for c in ["pane", *self.keys]}
        n = tab["n"]
        total = np.bincount(idx, minlength=size) if n is None else np.bincount(idx, n, size).astype(np.int64)
        out["n"] = total
        for f, parts in self.parts.items():
            s = tab["s:" + f]
            out["s:" + f] = sums = np.bincount(idx, s, size)
            if "m2" in parts:
                # Chan et al.: M2 = sum of M2_i + n_i * (mean_i - mean)^2 over the merged records.
                mean_i = s if n is None else s / n
                dev = mean_i - (sums / total)[idx]
                m2 = dev * dev if n is None else tab["m2:" + f] + n * dev * dev
                out["m2:" + f] = np.bincount(idx, m2, size)
            for p, ufunc, init in (("hi", np.maximum, -np.inf), ("lo", np.minimum, np.inf)):
                if p in parts:
                    out[p + ":" + f] = acc = np.full(size, init)
                    ufunc.at(acc, idx, tab[p + ":" + f])
        return out

    def _append(self, old, new):
        """The state's records followed by the batch's: only the state's last pane can continue."""
        if len(old["pane"]) and old["pane"][-1] == new["pane"][0]:
            cut = int(np.searchsorted(old["pane"], new["pane"][0]))
            cut_new = int(np.searchsorted(new["pane"], new["pane"][0], side="right"))
            tail = {c: np.concatenate([old[c][cut:], new[c][:cut_new]]) for c in self.rec_cols}
            if self.keys:
                idx, size = _tw_codes([tail[c] for c in self.keys])
            else:
                idx, size = np.zeros(len(tail["pane"]), np.int64), 1
            merged = self._reduce(tail, idx, size)
            return {c: np.concatenate([old[c][:cut], merged[c], new[c][cut_new:]]) for c in self.rec_cols}
        return {c: np.concatenate([old[c], new[c]]) for c in self.rec_cols}

    def _close(self, rec, raw, first, last, ts, shift):
        """Rows of the windows ending at m*slide, first <= m <= last, for each group with records."""
        k, panes = self.k, rec["pane"]
        uniq = panes[np.r_[True, panes[1:] != panes[:-1]]]
        if self.keys:
            keycols = [rec[c] for c in self.keys]
            if raw is not None:       # MEDIAN rows need the raw events' group codes too
                keycols = [np.concatenate([a, raw[c]]) for a, c in zip(keycols, self.keys)]
            g, _ = _tw_codes(keycols)
            g, g_raw = g[:len(panes)], g[len(panes):]
            order = np.argsort(g, kind="stable")      # records by (group, pane): panes are sorted
        else:
            g, g_raw, order = np.zeros(len(panes), np.int64), None, np.arange(len(panes))
        gs, ps = g[order], panes[order]
        # A record of pane p is in windows p + 1 .. p + k; the windows that the group's previous
        # record already reaches are counted there, so each (window, group) row is made once.
        same = np.r_[False, gs[1:] == gs[:-1]]
        lo = np.maximum(ps + 1, first)
        lo[same] = np.maximum(lo[same], ps[np.flatnonzero(same) - 1] + k + 1)
        count = np.maximum(np.minimum(ps + k, last) - lo + 1, 0)
        rows = int(count.sum())
        if rows == 0:
            return self._empty()
        row_m = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(rows)
        row_g = np.repeat(gs, count)
        if self.keys:                               # output order: windowEnd, then group key
            o = np.lexsort((row_g, row_m))
            row_m, row_g = row_m[o], row_g[o]
        # Records of (group g, panes [m - k, m)) are a run of the (group, pane) order; pane ranks
        # instead of panes keep the combined key small whatever the gaps.
        width = len(uniq) + 1
        starts, size, ix = _tw_runs(order, gs * width + np.searchsorted(uniq, ps), width, uniq, row_g, row_m, k)
        n = np.add.reduceat(rec["n"][ix], starts)
        cols = {c[2:]: rec[c][ix[starts]] for c in self.keys}
        stat = {}
        for f, parts in self.parts.items():
            sums = np.add.reduceat(rec["s:" + f][ix], starts)
            stat["SUM", f], stat["AVG", f] = sums + n * shift[f], sums / n + shift[f]
            if "m2" in parts:
                n_i = rec["n"][ix]
                dev = rec["s:" + f][ix] / n_i - np.repeat(sums / n, size)
                m2 = np.add.reduceat(rec["m2:" + f][ix] + n_i * dev * dev, starts)
                stat["STDEV", f] = np.sqrt(np.maximum(m2, 0.0) / n)
            if "hi" in parts:
                stat["MAX", f] = np.maximum.reduceat(rec["hi:" + f][ix], starts)
            if "lo" in parts:
                stat["MIN", f] = np.minimum.reduceat(rec["lo:" + f][ix], starts)
        if self.medians:
            stat.update(self._medians(raw, g_raw, uniq, row_g, row_m))
        for func, f, alias in self.aggs:
            cols[alias] = n if func == "COUNT" else stat[func, f]
        cols["windowEnd"] = row_m * self.slide
        cols["inputTS"] = ts[np.searchsorted(ts, cols["windowEnd"])]
        return pd.DataFrame({f: np.asarray(cols[f], self.dtypes[f]) for f in self.fields})

    def _medians(self, raw, g_raw, uniq, row_g, row_m):
        """MEDIAN of each row's raw values: its events, in (group, pane) order, are one run."""
        width = len(uniq) + 1
        if g_raw is None:
            order, key = np.arange(len(raw["pane"])), np.searchsorted(uniq, raw["pane"])
        else:
            order = np.argsort(g_raw, kind="stable")
            key = g_raw[order] * width + np.searchsorted(uniq, raw["pane"][order])
        _, size, ix = _tw_runs(order, key, width, uniq, row_g, row_m, self.k)
        row = np.repeat(np.arange(len(size)), size)
        # pandas' grouped median selects in O(values) per group, no global sort.
        return {("MEDIAN", f): pd.Series(raw["v:" + f][ix]).groupby(row, sort=True).median().to_numpy()
                for f in self.medians}
