"""Time-window aggregation core: Q3 TimeWindowAggregation and Q4 TwoLevelAggregation.

The contract of a core is in spark_runtime/micro_cores/__init__.py; the meaning is specs/SEMANTICS.md
section 5. Windows are [e - range, e) for e a multiple of slide; the window ending at e closes
on the first event with TS >= e, which is its inputTS.

Both plans keep a table of records sorted by pane (pane j = [j*slide, (j+1)*slide)), so the window
ending at m*slide is the records of panes [m - k, m), k = range / slide, and state older than the
range is a prefix of the table:
- per-event plan (paned=False, Q3): one record per event, its raw values (MEDIAN needs them);
- paned plan (paned=True, Q4, the thesis' ref [59]): one record per (pane, group) holding the
  partials COUNT, SUM, M2 (squared deviations from the pane's mean), MAX and MIN, merged as
  micro-batches add events to a pane.
A closing window reduces its records by group. STDEV combines (count, mean, M2) with Chan's
formula instead of a sum of squares, which cancels when a group's values are close together.
"""

import numpy as np


class TimeWindowCore:
    """State: {"next": the first window end not yet closed, in panes (None before any event),
    "cols": the record table, column name -> list}."""

    def __init__(self, q):
        self.slide = int(q["slide_ms"])
        self.k = int(q["range_ms"]) // self.slide
        self.paned = bool(q["paned"])
        self.fields = list(q["fields"])
        self.aggs = [tuple(a) for a in q["aggregates"]]
        self.keys = ["g:" + g for g in q["group_by"]]
        types = dict(zip(q["fields"], q["types"]))
        if self.paned and any(func == "MEDIAN" for func, _, _ in self.aggs):
            raise ValueError(f"query {q['id']}: MEDIAN cannot be combined from pane partials")
        # Every value field keeps its sum: AVG needs it, and STDEV needs the mean.
        self.stats = {}
        for func, field, _ in self.aggs:
            if field is not None and func != "COUNT":
                self.stats.setdefault(field, {"sum"}).add(
                    {"STDEV": "m2", "MAX": "max", "MIN": "min", "MEDIAN": "median"}.get(func, "sum"))
        self.dtypes = {"pane": np.int64}
        for g, name in zip(q["group_by"], self.keys):
            self.dtypes[name] = np.int64 if types[g] in ("int", "long") else np.float64
        if self.paned:
            self.dtypes["n"] = np.int64
            for f, stats in self.stats.items():
                for s in sorted(stats):
                    self.dtypes[f + ":" + s] = np.float64
        else:
            for f in self.stats:
                self.dtypes["x:" + f] = np.float64

    def initial_state(self):
        return {"next": None, "cols": {c: [] for c in self.dtypes}}

    def process(self, state, events):
        if len(events) == 0:
            return []
        ts = events["TS"].to_numpy(np.int64)
        new = {"pane": ts // self.slide}
        for name in self.keys:
            new[name] = events[name[2:]].to_numpy(self.dtypes[name])
        values = {f: events[f].to_numpy(np.float64) for f in self.stats}
        last = int(new["pane"][-1])    # windows ending at m*slide close for every m <= last
        if state["next"] is None:
            state["next"] = int(new["pane"][0]) + 1
        cols = state["cols"]
        if not self.paned and last < state["next"]:
            # Nothing closes and nothing expires: append without rebuilding the table.
            for c, a in new.items():
                cols[c].extend(a.tolist())
            for f, v in values.items():
                cols["x:" + f].extend(v.tolist())
            return []
        old = {c: np.asarray(cols[c], dtype=dt) for c, dt in self.dtypes.items()}
        if self.paned:
            table = self._add_partials(old, new, values)
        else:
            new.update(("x:" + f, v) for f, v in values.items())
            table = {c: np.concatenate([old[c], new[c]]) for c in self.dtypes}
        rows = self._close(table, state["next"], last, ts)
        state["next"] = last + 1
        keep = int(np.searchsorted(table["pane"], last + 1 - self.k))
        state["cols"] = {c: a[keep:].tolist() for c, a in table.items()}
        return rows

    def _raw(self, values, size):
        """Records of single events, in the layout _reduce reads."""
        recs = {}
        for f in self.stats:
            recs[f + ":sum"] = recs[f + ":max"] = recs[f + ":min"] = values[f]
        return np.ones(size, np.int64), recs

    def _add_partials(self, old, new, values):
        n, recs = self._raw(values, len(new["pane"]))
        batch, _, _, _ = self._reduce(new, n, recs)
        # Events arrive in TS order, so only the table's last pane can be continued by the batch.
        at = int(np.searchsorted(old["pane"], new["pane"][0]))
        if at < len(old["pane"]):
            both = {c: np.concatenate([old[c][at:], batch[c]]) for c in self.dtypes}
            batch, _, _, _ = self._reduce({c: both[c] for c in ["pane"] + self.keys}, both["n"], both)
        return {c: np.concatenate([old[c][:at], batch[c]]) for c in self.dtypes}

    def _reduce(self, keys, n, recs):
        """Combine records by key (keys: name -> array; n: events per record; recs: partials).

        Returns the combined table (sorted by key), the order that groups the input records, and
        each group's start in that order and its number of records."""
        if keys:
            cols = list(keys.values())
            order = np.lexsort(cols[::-1])
            change = np.zeros(len(n), bool)
            change[0] = True
            for c in cols:
                c = c[order]
                change[1:] |= c[1:] != c[:-1]
            starts = np.flatnonzero(change)
        else:
            order, starts = np.arange(len(n)), np.zeros(1, np.int64)
        lens = np.diff(np.append(starts, len(n)))
        out = {name: c[order][starts] for name, c in keys.items()}
        n = n[order]
        total = np.add.reduceat(n, starts)
        out["n"] = total
        for f, stats in self.stats.items():
            s = recs[f + ":sum"][order]
            # Summing around the overall mean keeps running sums, and their rounding, small.
            center = s.sum() / n.sum()
            tot = np.add.reduceat(s - n * center, starts) + total * center
            out[f + ":sum"] = tot
            if "m2" in stats:
                # Chan et al.: M2 = sum of M2_i + n_i * (mean_i - mean)^2 over the combined records.
                dev = s / n - np.repeat(tot / total, lens)
                m2 = n * dev * dev
                if f + ":m2" in recs:
                    m2 += recs[f + ":m2"][order]
                out[f + ":m2"] = np.add.reduceat(m2, starts)
            if "max" in stats:
                out[f + ":max"] = np.maximum.reduceat(recs[f + ":max"][order], starts)
            if "min" in stats:
                out[f + ":min"] = np.minimum.reduceat(recs[f + ":min"][order], starts)
        return out, order, starts, lens

    def _close(self, table, first, last, ts):
        """Rows of the windows ending at m*slide, first <= m <= last, that hold records."""
        panes = table["pane"]
        if first > last or len(panes) == 0:
            return []
        uniq = panes[np.r_[True, panes[1:] != panes[:-1]]]
        # Window m holds panes [m - k, m): the non-empty windows are the union of [p + 1, p + k]
        # over the non-empty panes p, so a gap closes only the windows that still see an event.
        run = np.flatnonzero(np.r_[True, np.diff(uniq) > self.k])
        lo = np.maximum(uniq[run] + 1, first)
        hi = np.minimum(uniq[np.r_[run[1:] - 1, len(uniq) - 1]] + self.k, last)
        width = np.maximum(hi - lo + 1, 0)
        if width.sum() == 0:
            return []
        ms = np.arange(width.sum()) + np.repeat(lo - np.cumsum(width) + width, width)
        a = np.searchsorted(panes, ms - self.k)
        b = np.searchsorted(panes, ms)
        trigger = ts[np.searchsorted(ts, ms * self.slide)]
        parts = [self._window(table, int(i), int(j), int(m), int(t))
                 for m, i, j, t in zip(ms.tolist(), a.tolist(), b.tolist(), trigger.tolist())]
        columns = [np.concatenate([p[c] for p in parts]).tolist() for c in range(len(self.fields))]
        return list(zip(*columns))

    def _window(self, table, i, j, m, trigger):
        """Output columns (in field order) of one window: table records [i, j)."""
        keys = {c: table[c][i:j] for c in self.keys}
        if self.paned:
            n, recs = table["n"][i:j], {c: a[i:j] for c, a in table.items()}
        else:
            n, recs = self._raw({f: table["x:" + f][i:j] for f in self.stats}, j - i)
        out, order, starts, lens = self._reduce(keys, n, recs)
        total = out["n"]
        cols = {c[2:]: out[c] for c in self.keys}
        for func, f, alias in self.aggs:
            if func == "COUNT":
                cols[alias] = total
            elif func == "SUM":
                cols[alias] = out[f + ":sum"]
            elif func == "AVG":
                cols[alias] = out[f + ":sum"] / total
            elif func == "STDEV":
                cols[alias] = np.sqrt(np.maximum(out[f + ":m2"], 0.0) / total)
            elif func in ("MAX", "MIN"):
                cols[alias] = out[f + ":" + func.lower()]
            else:
                # MEDIAN (per-event plan only): sort each group's values, take the middle.
                x = recs[f + ":sum"][order]
                group = np.repeat(np.arange(len(starts)), lens)
                x = x[np.lexsort((x, group))]
                cols[alias] = (x[starts + (lens - 1) // 2] + x[starts + lens // 2]) / 2
        cols["windowEnd"] = np.full(len(total), m * self.slide, np.int64)
        cols["inputTS"] = np.full(len(total), trigger, np.int64)
        return [cols[name] for name in self.fields]
