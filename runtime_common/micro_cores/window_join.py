"""Core of the count-window join (Q5 / J1, kind WindowJoin; specs/SEMANTICS.md section 6).

The contract of a core is in runtime_common/micro_cores/__init__.py; the reference it must agree
with is validator/micro_joins.py.

Each side keeps its last `rows` events. An arriving event is joined with the other side's current
window (equal key, all `where` comparisons true), emitting one row per match in the matched events'
arrival order, and then enters its own window. Every comparison of `where` names one field of one
stream, so it is a filter on that stream's events: an event failing it still takes a slot in its
window (it is counted) but can never be in a pair, so it is not stored.

A micro-batch is joined at once, without a Python loop per event. Each side's events are numbered
(their per-side index); an event with k events of the other side before it (in the batch's merged
order) sees that side's window as the index range [k - rows, k). Each side's kept events plus its
new ones are sorted by (key, index), so a trigger's matches are one contiguous run, found by two
binary searches on a composite key code * span + index; the runs are expanded into pairs in the
order of their triggers, each run already in arrival order: the reference's row order.

Cost of a batch of b events, with w <= rows events kept per side and p output rows: O(w + b log b
+ p) numpy work (the kept part is already sorted: a stable sort only merges it, and few distinct
keys sort by radix) plus a fixed ~0.3 ms of numpy/pandas calls. With rows 100, 100 keys and about
one row per event that is ~0.2 us per event in 100 K-event batches, ~0.5 us in 1 K-event ones.
The O(w) part (copying the kept window) matters only for large windows in small batches. The
state is at most `rows` events per side.
"""

import numpy as np
import pandas as pd

_wj_OPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}
_wj_DTYPES = {"int": np.int64, "long": np.int64, "double": np.float64}
_wj_COMP_MAX = 1 << 62      # bound on composite keys (key code * span + index), far from overflow


def _wj_empty():
    # Concatenated with a batch column, an empty int64 array takes that column's type (int32 ->
    # int64, float64 -> float64): the state keeps ints as ints.
    return np.empty(0, np.int64)


def _wj_codes(k0, k1, span):
    """Integer codes of the keys of both sides, equal iff the keys are equal and ordered like them,
    small enough that code * span stays below _wj_COMP_MAX; and how many there can be."""
    if k0.dtype.kind in "iu" and k1.dtype.kind in "iu":
        # Integer keys (IDs): an offset is enough, no sort of the values.
        lo = min(int(k.min()) for k in (k0, k1) if len(k))
        hi = max(int(k.max()) for k in (k0, k1) if len(k))
        if (hi - lo + 1) * span < _wj_COMP_MAX:
            return k0.astype(np.int64) - lo, k1.astype(np.int64) - lo, hi - lo + 1
    # Doubles (an int key on one side equals the same number as a double on the other), or ints
    # spread too widely: rank the distinct values.
    both = np.concatenate((k0.astype(np.float64), k1.astype(np.float64)))
    uniq, inv = np.unique(both, return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    return inv[:len(k0)], inv[len(k0):], len(uniq)


class WindowJoinCore:
    """State: per side ("0" left, "1" right) `n`, the number of that side's events so far, and the
    events of its window that passed `where`, sorted by (key, index): `idx`, their per-side index
    (event i leaves the window when event i + rows of its side enters), `key`, and `vals`, one
    array per field the query selects from that side (self.fields[side])."""

    def __init__(self, q):
        if q["left"] == q["right"]:
            # The model rejects it too: with one stream, `S1.A1` could not say which side it means.
            raise ValueError(f"query {q['id']}: a window join needs two different streams, "
                             f"both are {q['left']}")
        self.rows = int(q["rows"])
        self.streams = (q["left"], q["right"])
        self.keys = (q["left_key"], q["right_key"])
        self.fields = ([], [])
        self.picks = []                 # per selected field: (side, position in self.fields[side])
        for name in q["select"]:
            stream, field = name.split(".", 1)
            side = self.streams.index(stream)
            if field not in self.fields[side]:
                self.fields[side].append(field)
            self.picks.append((side, self.fields[side].index(field)))
        self.out = [(f, _wj_DTYPES[t]) for f, t in zip(q["fields"], q["types"])]
        self.where = []
        for name, op, value in q["where"]:
            stream, field = name.split(".", 1)
            self.where.append((stream, field, _wj_OPS[op], value))

    def initial_state(self):
        return {str(a): {"n": 0, "idx": _wj_empty(), "key": _wj_empty(),
                         "vals": [_wj_empty() for _ in self.fields[a]]} for a in (0, 1)}

    def process(self, state, events):
        nb = len(events)
        cols = None
        if nb:
            stream = events["stream"].to_numpy()
            ok = np.ones(nb, dtype=bool)
            for s, field, op, value in self.where:
                ok &= (stream != s) | op(events[field].to_numpy(), value)
            sides = [self._side(state[str(a)], events, stream == self.streams[a], ok, a) for a in (0, 1)]
            if len(sides[0]["idx"]) + len(sides[1]["idx"]):
                self._sort(sides)
                if len(sides[0]["idx"]) and len(sides[1]["idx"]):
                    cols = self._pairs(sides, events["TS"].to_numpy())
            for a in (0, 1):
                self._keep(state[str(a)], sides[a])
        if cols is None:
            return pd.DataFrame({f: np.empty(0, t) for f, t in self.out})
        # copy=False: the columns are fresh arrays; consolidating them into blocks would copy.
        return pd.DataFrame({f: c.astype(t, copy=False) for (f, t), c in zip(self.out, cols)}, copy=False)

    def _side(self, st, events, mine, ok, a):
        """One side's kept events followed by its new ones (those passing `where`), in index order."""
        cnt = np.cumsum(mine)
        pos = np.flatnonzero(mine & ok)
        # at[i]: how many of this side's events precede batch position i (absolute), i.e. the
        # index of the next one; for an event of this side, its own index.
        at = cnt - mine + st["n"]
        return {"n0": st["n"], "n1": st["n"] + int(cnt[-1]), "kept": len(st["idx"]), "at": at,
                "pos": pos, "idx": np.concatenate((st["idx"], at[pos])),
                "key": np.concatenate((st["key"], events[self.keys[a]].to_numpy()[pos])),
                "vals": [np.concatenate((v, events[f].to_numpy()[pos]))
                         for v, f in zip(st["vals"], self.fields[a])]}

    def _sort(self, sides):
        """Sort each side by (key, index); add `comp` (sorted composite keys), `base` and `span`
        (index i is at i - base in [0, span)), `new_code` (key codes of the new events), and
        `trig`, `own`: the new events in sorted order (their rank among the new ones) and their
        sorted positions."""
        for sd in sides:
            # Indices still in a window during this batch: [max(n0 - rows, 0), n1]; one more
            # slot so that every clipped window bound fits below the next key's codes.
            sd["base"] = max(sd["n0"] - self.rows, 0)
            sd["span"] = sd["n1"] - sd["base"] + 1
        span = max(sides[0]["span"], sides[1]["span"])
        codes = _wj_codes(sides[0]["key"], sides[1]["key"], span)
        for sd, code in zip(sides, codes[:2]):
            kept = sd["kept"]
            comp = code * sd["span"] + (sd["idx"] - sd["base"])
            sd["new_code"] = code[kept:]
            sd["trig"] = sd["own"] = np.empty(0, np.int64)
            if len(comp) > kept:
                # The kept part is sorted by (key, index) and every new index is larger, so a
                # stable sort on the key code alone sorts by (key, index). With few codes a radix
                # sort (uint16) is O(n); when the new part is small, timsort merges it into the
                # sorted run in about O(n) too, and faster.
                small = codes[2] <= 1 << 16 and 4 * (len(comp) - kept) > len(comp)
                order = np.argsort(code.astype(np.uint16) if small else code, kind="stable")
                comp = comp[order]
                sd["idx"], sd["key"] = sd["idx"][order], sd["key"][order]
                sd["vals"] = [v[order] for v in sd["vals"]]
                sd["own"] = np.flatnonzero(order >= kept)
                sd["trig"] = order[sd["own"]] - kept
            sd["comp"] = comp

    def _pairs(self, sides, ts):
        """The output columns of the batch's pairs (None without any), in the reference order."""
        nb = len(ts)
        # Per batch position (filled at the triggers, the new events of both sides): the first
        # matched position in the other side's sorted arrays, the number of matches, the trigger's
        # own sorted position, and its side. Scattering by position merges the sides in O(b).
        lo, cnt, own = np.empty(nb, np.int64), np.zeros(nb, np.int64), np.empty(nb, np.int64)
        is1 = np.zeros(nb, dtype=bool)
        for a in (0, 1):
            me, other = sides[a], sides[1 - a]
            # Window of each new event of this side: the other side's indices [k - rows, k),
            # relative to its base: k <= n1 - base < span, only k - rows needs a bound. Taken in
            # (key, index) order the bounds ascend, and binary searches for ascending values are
            # several times faster (numpy narrows each from the previous one).
            pos = me["pos"][me["trig"]]
            k = other["at"][pos] - other["base"]
            head = me["new_code"][me["trig"]] * other["span"]
            first = np.searchsorted(other["comp"], head + np.maximum(k - self.rows, 0))
            lo[pos] = first
            cnt[pos] = np.searchsorted(other["comp"], head + k) - first
            own[pos] = me["own"]
            is1[pos] = a == 1
        trig = np.flatnonzero(cnt)
        if len(trig) == 0:
            return None
        lo, cnt, own, is1 = lo[trig], cnt[trig], own[trig], is1[trig]
        # Pair j of trigger t: matched position lo[t] + (j - first pair of t).
        n = int(cnt.sum())
        other = np.arange(n) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        own, is1 = np.repeat(own, cnt), np.repeat(is1, cnt)
        at = (np.where(is1, other, own), np.where(is1, own, other))   # positions in side 0, side 1
        cols = [sides[s]["vals"][j][at[s]] for s, j in self.picks]
        cols.append(np.repeat(ts[trig], cnt))
        return cols

    def _keep(self, st, sd):
        """Store the side's window: drop the events that left it during the batch."""
        keep = sd["idx"] >= sd["n1"] - self.rows
        if keep.all():
            st["idx"], st["key"], st["vals"] = sd["idx"], sd["key"], sd["vals"]
        else:
            st["idx"], st["key"] = sd["idx"][keep], sd["key"][keep]
            st["vals"] = [v[keep] for v in sd["vals"]]
        st["n"] = sd["n1"]
