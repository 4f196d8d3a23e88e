"""Core of the pattern SEQ(a1, a2) WITHIN withinMs (Q7, kind Pattern; specs/SEMANTICS.md section 8),
under the four ALL/ONE consumption policies, vectorized with numpy.

The contract of a core is in runtime_common/micro_cores/__init__.py; the reference it must agree
with is validator/micro_patterns.py (event by event, a deque of candidates per key).

Candidates (events that satisfied the first element and are not consumed) are kept as arrays in
event order: key, TS and the first element's selected fields; an entry's position is its order.
Each batch appends its first-element events, so position p < b is "before" a second-element
event y whose b = candidates before it (an event that is both is appended after its own b: it
never matches itself). Since events come in TS order, the candidates out of y's window are the
prefix p < a (TS <= y.TS - withinMs). With a key, a stable sort by key groups each key's
candidates in order; y's matches are then the contiguous run [start, end) of its key's segment
with positions in [a, b), found by two searchsorted on one composite (segment, position) array.
Per policy, every y gets a run [s, e) of that key-sorted array:
- all-all: the whole run; all-one: its first element (the oldest);
- one-all: the run minus what the key's previous y took (everything before that y's end is
  consumed or expired), so still vectorized;
- one-one: y takes the oldest live one, which the previous y of its key may have consumed: a
  Python loop over the second-element events whose run is non-empty, O(1) each (a pointer per key).
The rows are the runs expanded with cumsum/repeat, y order then x order (the reference order).

Cost per batch: O((window + batch) log) for the key sort, O(#second-element events) for the
searches (plus one Python step each for one-one), and O(rows) time and memory for the output,
built column by column without per-row Python objects. For Q7 quick in 1 s batches at 100 K ev/s
that is ~20 ms of matching, and for all-all ~0.9 s to write its 1e8 rows (~110 M rows/s, bound by
memory bandwidth): all-all's output, not the matching, is what limits it at high rates.
State is bounded by the window: after each batch the candidates with TS <= latest TS - withinMs
(never matchable again) and the consumed ones are cut. TS must not decrease in event order
(SEMANTICS.md section 1; the reference assumes it too); the core checks it.
"""

import numpy as np
import pandas as pd

_pat_OPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}
_pat_DTYPES = {"int": np.int64, "long": np.int64, "double": np.float64}


def _pat_mask(events, streams, element):
    ok = streams == element["stream"]
    for field, op, value in element["where"]:
        ok &= _pat_OPS[op](events[field].to_numpy(), value)
    return ok


def _pat_expand(s, cnt, total):
    """The indices s[j], s[j]+1, ..., s[j]+cnt[j]-1 for every j, concatenated: one int64 array of
    `total` built in place (ones, then each run's first index as a jump, then a cumsum), so the
    memory of the expansion is one index per output row."""
    idx = np.ones(total, dtype=np.int64)
    nz = np.flatnonzero(cnt)
    first = np.cumsum(cnt[nz]) - cnt[nz]             # where each non-empty run starts in idx
    jumps = s[nz].astype(np.int64)
    jumps[1:] -= s[nz[:-1]] + cnt[nz[:-1]] - 1         # from the previous run's last index
    idx[first] = jumps
    return np.cumsum(idx, out=idx)


class PatternCore:
    """State: "key" (float64; all 0 with no key), "ts" (int64) and "x:<field>" (the first
    element's selected fields, in their output dtype): the live candidates, in event order."""

    def __init__(self, q):
        self.within = int(q["within_ms"])
        first_policy, second_policy = q["consumption"].split("-")
        self.take_all = second_policy == "all"
        self.consume = first_policy == "one"
        self.first, self.second, self.key = q["first"], q["second"], q["key"]
        self.fields = list(q["fields"])
        self.dtypes = [_pat_DTYPES[t] for t in q["types"]]
        self.plan = []              # per selected field: (of the first element?, field)
        self.xfields = {}           # the first element's selected fields -> dtype
        self._no_rows = None
        for name, dtype in zip(q["select"], self.dtypes):
            alias, field = name.split(".", 1)
            of_x = alias == self.first["alias"]
            self.plan.append((of_x, field))
            if of_x:
                self.xfields[field] = dtype

    def initial_state(self):
        state = {"key": np.zeros(0, np.float64), "ts": np.zeros(0, np.int64)}
        state.update({"x:" + f: np.zeros(0, d) for f, d in self.xfields.items()})
        return state

    def _empty(self):
        if self._no_rows is None:       # built once: building a DataFrame costs ~100 us
            self._no_rows = pd.DataFrame({f: np.zeros(0, d) for f, d in zip(self.fields, self.dtypes)})
        return self._no_rows.copy()

    def _roles(self, events, last_ts):
        """(is_f, is_s, ts_ev) of a batch: which events can be the first and the second element,
        and their TS, checked to go on in TS order after `last_ts` (None: nothing seen yet)."""
        ts_ev = events["TS"].to_numpy(np.int64)
        # Every search relies on TS growing with the order; a broken input must not pass as a
        # wrong answer.
        if (ts_ev[1:] < ts_ev[:-1]).any() or (last_ts is not None and ts_ev[0] < last_ts):
            raise ValueError("pattern core: events must come in TS order (SEMANTICS.md section 1)")
        streams = events["stream"].to_numpy()
        return _pat_mask(events, streams, self.first), _pat_mask(events, streams, self.second), ts_ev

    def process(self, state, events):
        n = len(events)
        if n == 0:
            return self._empty()
        is_f, is_s, ts_ev = self._roles(events, state["ts"][-1] if len(state["ts"]) else None)
        key_ev = (events[self.key].to_numpy(np.float64) if self.key is not None
                  else np.zeros(n, np.float64))
        fi, yi = np.flatnonzero(is_f), np.flatnonzero(is_s)
        nc = len(state["ts"])
        if len(fi):                                     # this batch's candidates, appended
            state["key"] = np.concatenate([state["key"], key_ev[fi]])
            state["ts"] = np.concatenate([state["ts"], ts_ev[fi]])
            for f, d in self.xfields.items():
                state["x:" + f] = np.concatenate([state["x:" + f], events[f].to_numpy()[fi].astype(d)])
        out, keep = None, None
        if len(yi) and len(state["ts"]):
            # b: the candidates before y (carried ones, then this batch's first-element events
            # strictly before it, so an event that is both never pairs with itself).
            b = nc + (np.cumsum(is_f) - is_f)[yi]
            out, keep = self._match(state, events, yi, b, ts_ev[yi], key_ev[yi])
        # Candidates with TS <= latest - within can match no later event (a prefix, as TS grows
        # with the order); cut only now, since this batch's earlier y's needed them.
        cut = int(np.searchsorted(state["ts"], int(ts_ev.max()) - self.within, side="right"))
        if cut or keep is not None:
            sel = slice(cut, None) if keep is None else np.flatnonzero(keep[cut:]) + cut
            for name in state:
                state[name] = state[name][sel].copy()   # copy: no view pinning the old array
        return self._empty() if out is None else out

    def _match(self, state, events, yi, b, ty, ky):
        """The rows of the second-element events `yi` (b: candidates before each; ty, ky: TS and
        key), and for ONE on the first element the mask of candidates not consumed."""
        cts = state["ts"]
        m = len(cts)
        a = np.searchsorted(cts, ty - self.within, side="right")  # out of y's window: p < a
        if self.key is None:
            perm, segs = None, None
            lo = np.zeros(len(yi), np.int64)
            start, end = np.minimum(a, b), b
        else:
            perm = np.argsort(state["key"], kind="stable")  # by key, event order within a key
            sk = state["key"][perm]
            seg_starts = np.concatenate([[0], np.flatnonzero(sk[1:] != sk[:-1]) + 1])
            segs = np.repeat(seg_starts, np.diff(np.append(seg_starts, m)))
            span = m + 1                       # > any position, so segments never overlap
            comp = segs * span + perm          # strictly increasing: (segment, position)
            lo = np.searchsorted(sk, ky, side="left")       # y's key segment, if any
            hi = np.searchsorted(sk, ky, side="right")
            end = np.minimum(np.searchsorted(comp, lo * span + b, side="left"), hi)
            start = np.minimum(np.searchsorted(comp, lo * span + a, side="left"), end)
        # Per policy, the run [s, e) of key-sorted candidates each y pairs with, and for ONE on
        # the first element, per key segment the index below which everything is gone.
        gone = None
        if not self.consume:
            s, e = start, (end if self.take_all else np.minimum(start + 1, end))
        elif self.take_all:
            # Before a y's end all is consumed or expired: the key's next y starts there. Only
            # y's with end > lo take part (the others have an empty run, and a y whose key has no
            # candidate shares its lo with the next key's segment).
            act = np.flatnonzero(end > lo)
            act = act[np.argsort(lo[act], kind="stable")]  # by key, in event order per key
            lo_a, end_a = lo[act], end[act]
            prev = np.empty_like(end_a)
            prev[1:] = end_a[:-1]
            first_of_key = np.ones(len(act), bool)
            first_of_key[1:] = lo_a[1:] != lo_a[:-1]
            prev[first_of_key] = lo_a[first_of_key]
            s, e = start.copy(), end
            s[act] = np.minimum(np.maximum(start[act], prev), end_a)
            gone = (lo_a, end_a)
        else:
            s, e, gone = self._one_one(lo, start, end)
        keep = None
        if gone is not None:
            floor = np.arange(m + 1, dtype=np.int64)        # by default a segment keeps all
            np.maximum.at(floor, *gone)
            keep_sorted = np.arange(m) >= floor[0 if segs is None else segs]
            keep = keep_sorted if perm is None else np.empty(m, bool)
            if perm is not None:
                keep[perm] = keep_sorted
        cnt = (e - s).astype(np.int64)
        total = int(cnt.sum())
        if total == 0:
            return None, keep
        xs = _pat_expand(s, cnt, total)                     # key-sorted candidate indices
        cols = {}
        for (of_x, field), name, dtype in zip(self.plan, self.fields, self.dtypes):
            if of_x:    # permuting the m candidates first saves a pass over the output's xs
                cols[name] = (state["x:" + field] if perm is None else state["x:" + field][perm])[xs]
            else:
                cols[name] = np.repeat(events[field].to_numpy()[yi].astype(dtype), cnt)
        cols[self.fields[-1]] = np.repeat(ty, cnt)         # inputTS: the triggering y's TS
        return pd.DataFrame(cols, copy=False), keep

    @staticmethod
    def _one_one(lo, start, end):
        """ONE-ONE: y takes its key's first candidate at or after both its window start and the
        key's pointer (past what earlier y's consumed). Sequential per key, hence a loop, but
        only over the y's with a non-empty run, O(1) each. Skipping the others is safe: a y acts
        on the pointer only as max(pointer, start), and a later y's start is no smaller."""
        live = np.flatnonzero(end > start)
        s = np.zeros(len(lo), np.int64)
        e = np.zeros(len(lo), np.int64)
        ptr = {}
        for j, k, st, en in zip(live.tolist(), lo[live].tolist(), start[live].tolist(), end[live].tolist()):
            r = max(ptr.get(k, st), st)
            if r < en:
                s[j], e[j] = r, r + 1
                r += 1
            ptr[k] = r
        gone = (np.fromiter(ptr.keys(), np.int64, len(ptr)), np.fromiter(ptr.values(), np.int64, len(ptr)))
        return s, e, gone
