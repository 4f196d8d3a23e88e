"""Core of the count-window aggregation (Q2, kind CountWindowAggregation; specs/SEMANTICS.md section 4).

The contract of a core is in runtime_common/micro_cores/__init__.py; the reference it must agree
with is `count_window` in validator/micro_windows.py.

The window is the last `rows` events of the whole input. At events rows, rows + slide, ... every
group with an event that entered since the previous evaluation gets one row, aggregated over its
events in the window, in group-key order, stamped with the triggering event's TS.

Vectorized per micro-batch, for every slide (tumbling included). The state is the count so far
and the tail of the input that a later window can still reach: the events after the window start
of the next evaluation point (fewer than `rows`). A batch is appended to that tail, so the tail
starts exactly at the window of the batch's first evaluation point; the events are stable-sorted
by (group, number), and then every emitted row is the aggregate of one contiguous range
[lo, hi) of that sorted array (a range never longer than `rows`). `hi` follows from the group's
last event entered at that evaluation, `lo` from one `searchsorted`.

The ranges are aggregated all at once with a disjoint sparse table (`_Ranges`): a range is split
at a power-of-two boundary into a suffix of one block and a prefix of the next, both read from
per-level scans, so no prefix sums are ever subtracted (a large value outside a window cannot
spoil it). SUM, AVG and STDEV scan values shifted by an element of the scanned part, which keeps
Σ(x - k)² within (count + 1) times the part's squared deviations; the two parts are merged with
Chan's formula. MAX and MIN scan with np.maximum/np.minimum. MEDIAN uses a wavelet matrix over
the value ranks (`_medians`): k-th smallest of any range in O(log T).

Cost per batch of m events with a tail of t < rows events, T = t + m, L = log2 of the longest
range (at most log2 rows): factorizing and sorting O(T) (radix sort for < 65536 groups), O(T·L)
per SUM/AVG/STDEV/MAX/MIN field for the scans, O((T + rows emitted)·log T) per MEDIAN field, and
O(log T) per emitted row for its range. Memory O(T·L). The per-event cost is thus bounded when
batches are at least about as large as the window; with tiny batches and a huge window each batch
re-reads the tail (O(rows / m) per event).
"""

import numpy as np
import pandas as pd


def _bit_length(x):
    """Bit length of non-negative integers below 2**53, elementwise (frexp gives the exponent)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def _scan(X, kind, forward):
    """Prefix (forward) or suffix (backward) scans along the rows of X. Sums are of x - k, k the
    row's first element in scan order: an element of every scanned part, so the part's
    Σ(x - k)² stays within (count + 1) times its squared deviations (no cancellation later)."""
    if not forward:
        X = X[:, ::-1]
    if kind in ("s1", "s2"):
        d = X - X[:, :1]
        res = np.cumsum(d * d if kind == "s2" else d, axis=1)
    else:
        res = (np.maximum if kind == "max" else np.minimum).accumulate(X, axis=1)
    return res if forward else res[:, ::-1]


class _Ranges:
    """Aggregates of x[lo:hi] for many non-empty ranges of arrays of one length `size`.

    Disjoint sparse table: with B = 2**j >= the longest range, a range [l, r] with l, r in one
    B-block lies in a 2**k-block (k = bit_length(l ^ r)) whose left half holds l and right half r;
    otherwise it straddles one multiple of B. Either way it is a suffix [l, c) of a half (or
    block) ending at c - 1 plus a prefix [c, r] of the next one. Table rows 0..j-1 hold level
    k = 1..j (suffix scans on left halves, prefix scans on right halves); rows j and j+1 hold the
    suffix and prefix scans of every B-block. A one-element range has an empty left part."""

    def __init__(self, lo, hi, size):
        l, r = lo, hi - 1
        self.c = hi - lo
        self.j = j = int(self.c.max() - 1).bit_length()
        self.B = 1 << j
        self.P = -(-size // self.B) * self.B
        k = np.clip(_bit_length(l ^ r), 1, j + 1)
        split = r & ~((np.int64(1) << (k - 1)) - 1)           # first element of r's half
        self.ca, self.cb = split - l, r - split + 1
        self.ka_at, self.kb_at = np.maximum(split - 1, 0), split   # each part's shift: its element at the split
        self.iL = (k - 1) * self.P + l
        self.iR = np.where(k > j, j + 1, k - 1) * self.P + r

    def table(self, x, kind):
        """The scans of x at every level; returns each range's left- and right-part values."""
        P, j, B = self.P, self.j, self.B
        xp = np.zeros(P)
        xp[:len(x)] = x
        out = np.empty((j + 2, P))
        for k in range(1, j + 1):
            h = 1 << (k - 1)
            X, O = xp.reshape(-1, 2, h), out[k - 1].reshape(-1, 2, h)
            O[:, 0] = _scan(X[:, 0], kind, False)
            O[:, 1] = _scan(X[:, 1], kind, True)
        X = xp.reshape(-1, B)
        out[j].reshape(-1, B)[:] = _scan(X, kind, False)
        out[j + 1].reshape(-1, B)[:] = _scan(X, kind, True)
        flat = out.ravel()
        return flat.take(self.iL), flat.take(self.iR)

    def parts(self, x):
        """(shift, Σ(x - shift)) of the left part, then of the right part, of every range."""
        a, b = self.table(x, "s1")
        return x.take(self.ka_at), a, x.take(self.kb_at), b

    def sum(self, x):
        ka, a, kb, b = self.parts(x)
        return (self.ca * ka + a) + (self.cb * kb + b)      # an empty left part adds 0 * x + 0

    def extreme(self, x, kind):
        a, b = self.table(x, kind)                          # one element: both rows hold x[r]
        return np.maximum(a, b) if kind == "max" else np.minimum(a, b)

    def stdev(self, x):
        """Population stdev: each part's M2 = Σd² - (Σd)²/n (well conditioned, see _scan), merged
        with Chan's formula. The means' difference is (ka - kb) + the offsets of the means from the
        shifts, so a level common to both parts cancels exactly instead of rounding."""
        ka, a1, kb, b1 = self.parts(x)
        a2, b2 = self.table(x, "s2")
        ca, cb = np.maximum(self.ca, 1), self.cb              # ca = 0: a1 = a2 = 0, no term
        m2a = np.maximum(a2 - a1 * a1 / ca, 0.0)
        m2b = np.maximum(b2 - b1 * b1 / cb, 0.0)
        d = (ka - kb) + (a1 / ca - b1 / cb)
        m2 = m2a + m2b + d * d * (self.ca * cb / self.c)
        return np.sqrt(m2 / self.c)


def _medians(x, lo, hi):
    """Median of every x[lo:hi], from its middle order statistics (two for an even count) found in
    a wavelet matrix over the ranks of x: per bit level one stable partition and one prefix count
    of zeros, O((T + ranges)·log T) whatever the lengths. int32 and take/compress: this is the
    costliest aggregate and these halve its memory traffic."""
    T, Q = len(x), len(lo)
    order = np.argsort(x, kind="stable")
    cur = np.empty(T, np.int32)
    cur[order] = np.arange(T, dtype=np.int32)
    c = (hi - lo).astype(np.int32)
    even = np.flatnonzero(c % 2 == 0)
    k = np.concatenate([c // 2, (c[even] - 1) // 2])         # 0-based ranks within the range
    l = np.concatenate([lo, lo[even]]).astype(np.int32)
    r = np.concatenate([hi, hi[even]]).astype(np.int32)
    res = np.zeros(len(k), np.int32)
    zeros = np.zeros(T + 1, np.int32)
    for b in reversed(range(max(int(T - 1).bit_length(), 1))):
        zero = ((cur >> b) & 1) == 0
        np.cumsum(zero, out=zeros[1:])
        nz, zl, zr = zeros[T], zeros.take(l), zeros.take(r)
        z = zr - zl
        right = k >= z                                       # fewer than k + 1 zeros: the k-th has bit b
        k -= np.where(right, z, 0)
        l = np.where(right, l - zl + nz, zl)
        r = np.where(right, r - zr + nz, zr)
        res |= right.view(np.int8).astype(np.int32) << b
        cur = np.concatenate([cur.compress(zero), cur.compress(~zero)])
    v = x.take(order.take(res))
    out = v[:Q].copy()
    out[even] = (out[even] + v[Q:]) / 2
    return out


class CountWindowCore:
    """State: {"n": events so far, "tail": column -> array of the events after n - len(tail)}."""

    def __init__(self, q):
        self.rows, self.slide = int(q["rows"]), int(q["slide"])
        self.group_by = list(q["group_by"])
        self.aggs = [tuple(a) for a in q["aggregates"]]
        self.fields = list(q["fields"])
        self.dtypes = {f: np.int64 if t in ("int", "long") else np.float64
                       for f, t in zip(q["fields"], q["types"])}
        # tail columns: "k:" group keys (in their output dtype), "v:" aggregated values (doubles)
        self.values = list(dict.fromkeys(f for fn, f, _ in self.aggs if f is not None and fn != "COUNT"))
        self.cols = {"k:" + g: (g, self.dtypes[g]) for g in self.group_by}
        self.cols.update({"v:" + f: (f, np.float64) for f in self.values})

    def initial_state(self):
        return {"n": 0, "tail": {c: np.empty(0, dt) for c, (_, dt) in self.cols.items()}}

    def _empty(self):
        return pd.DataFrame({f: np.empty(0, self.dtypes[f]) for f in self.fields})

    def _next_eval(self, n):
        """The first evaluation point after event n."""
        return self.rows if n < self.rows else self.rows + ((n - self.rows) // self.slide + 1) * self.slide

    def process(self, state, events):
        rows, slide, m = self.rows, self.slide, len(events)
        n0 = state["n"]
        n1 = n0 + m
        tail, e_first = state["tail"], self._next_eval(n0)
        # The tail starts at e_first's window (event e_first - rows + 1), so evaluation j (event
        # e_first + j*slide) has the window positions [j*slide, j*slide + rows) of the concatenation.
        t = n0 - (e_first - rows)
        cols = {c: np.concatenate([tail[c], events[f].to_numpy(dt)]) if m else tail[c]
                for c, (f, dt) in self.cols.items()}
        # keep what the window of the next evaluation point after this batch can reach (< rows)
        keep = self._next_eval(n1) - e_first
        state["n"] = n1
        state["tail"] = {c: a[keep:].copy() for c, a in cols.items()}
        if m == 0 or e_first > n1:
            return self._empty()
        T = t + m
        n_eval = (n1 - e_first) // slide + 1
        codes, G = self._codes(cols, T)
        # events entering at evaluation j: positions (j*slide + rows - slide, j*slide + rows - 1]
        # (all of the first window when it is the stream's first evaluation)
        p0 = 0 if e_first == rows else rows - slide
        p1 = (n_eval - 1) * slide + rows
        pos = np.arange(p0, p1)
        key = np.maximum((pos - rows + slide) // slide, 0) * G + codes[p0:p1]   # (evaluation, group)
        if len(key) > 1 and (key[1:] > key[:-1]).all():       # slide 1 after the first window
            last = pos
        else:                                                # last event of each (evaluation, group)
            key, first_rev = np.unique(key[::-1], return_index=True)
            last = p1 - 1 - first_rev
        j, g = key // G, key % G
        # events sorted by (group, position); radix sort when the codes fit 16 bits
        order = np.argsort(codes.astype(np.uint16) if G < 1 << 16 else codes, kind="stable")
        inv = np.empty(T, np.int64)
        inv[order] = np.arange(T)
        hi = inv[last] + 1                       # the group's newest event at evaluation j ends its range
        lo = np.searchsorted(codes[order] * np.int64(T) + order, g * T + j * slide)
        out = {f: cols["k:" + f][last] for f in self.group_by}
        rng = _Ranges(lo, hi, T) if any(fn not in ("COUNT", "MEDIAN") for fn, _, _ in self.aggs) else None
        xs, done = {}, {}                                     # sorted values and results per field
        for fn, f, alias in self.aggs:
            if fn == "COUNT":
                res = hi - lo
            else:
                x = xs[f] if f in xs else xs.setdefault(f, cols["v:" + f].take(order))
                key = ("SUM" if fn == "AVG" else fn, f)           # AVG reuses SUM
                if key not in done:
                    done[key] = (rng.sum(x) if key[0] == "SUM" else rng.stdev(x) if fn == "STDEV"
                                 else _medians(x, lo, hi) if fn == "MEDIAN" else rng.extreme(x, fn.lower()))
                res = done[key] / (hi - lo) if fn == "AVG" else done[key]
            out[alias] = res.astype(self.dtypes[alias])        # a copy: columns never share memory
        out["inputTS"] = events["TS"].to_numpy(np.int64)[j * slide + rows - 1 - t]
        # a dict in field order, no copy: columns= would cost 0.3 ms per batch
        return pd.DataFrame({f: out[f] for f in self.fields}, copy=False)

    def _codes(self, cols, T):
        """Group code of every event, numbered in group-key order, and the number of groups."""
        if not self.group_by:
            return np.zeros(T, np.int64), 1
        code = None
        for g in self.group_by:
            c, u = pd.factorize(cols["k:" + g], sort=True)
            # lexicographic order of the columns, renumbered so that codes stay below T
            code, u = (c, u) if code is None else pd.factorize(code * len(u) + c, sort=True)
        return code.astype(np.int64), len(u)
