"""Core of a keyed pattern SEQ(a1, a2) WITHIN withinMs whose candidates are never consumed (ALL on
the first element: all-all, all-one), with its candidates in append-only chunks so that a batch
costs what its own events and outputs cost, not what the window holds.

`PatternCore` (pattern.py) keeps the candidates as one array set: every batch concatenates to it,
argsorts all of it by key and cuts its expired prefix, and the Spark operator stores and reads it
whole, so a batch's cost grows with the window: at Q7's thesis parameters (60 s, 10 k ids) and
100 K ev/s that is 6 M candidates sorted, copied and serialized per batch. Here:

- each batch's first-element events become one **chunk**: its candidates sorted by (key,
  position), position being the candidate's global number (event order), kept with its TS array
  in position order (TS grows with position: SEMANTICS.md section 1), its first element's selected
  fields in key order, and one composite (key segment, position) array for two searchsorted per
  lookup, as PatternCore does for the whole window;
- a second-element event y matches, in every chunk, the run of its key's candidates with position
  before y's (b: the candidates before it, so an event that is both never matches itself) and TS
  above `y.TS - withinMs` (a prefix of the run, found on the chunk's TS array): per chunk, four
  vectorized searchsorted over the batch's y's; all-one takes the first non-empty run (chunks are
  in position order, so it is the oldest candidate);
- a chunk is dropped whole once its newest TS is out of every later window (`TS <= latest -
  withinMs`); an older part of a chunk still held is outside y's window and never matched. When
  the chunks outnumber `MAX_CHUNKS` (batches much shorter than the window), the two adjacent ones
  with the fewest candidates are merged.

Rows come out in the reference order (y order, then candidate order) without a sort: each (y,
chunk) run's place in the output is a cumulative sum over the (y, chunk) counts, and each chunk
writes its runs there. Cost per batch: O(c log c) to sort the batch's c candidates, O(y x chunks x
log) to find the runs, O(rows) for the output; the window's candidates are neither copied nor
sorted again. State: {"next": the next candidate's position, "serial": the next chunk's id,
"last_ts", "chunks": [chunk dicts, oldest first, each with a unique "id"]}. A chunk never changes
after it is made (merging makes a new one), so a state store can keep chunks as separate values
and write only the new ones (spark_runtime/micro_plan.py).
"""

import numpy as np
import pandas as pd

from runtime_common.micro_cores.pattern import PatternCore, _pat_expand

# Chunks beyond this many are merged (two adjacent, fewest candidates first): the per-batch lookup
# costs a few vectorized searches per chunk.
MAX_CHUNKS = 256


def _pc_chunk(ident, pos0, keys, ts, xs):
    """A chunk of candidates given in position order (positions pos0, pos0 + 1, ...)."""
    m = len(ts)
    perm = np.argsort(keys, kind="stable")          # by key, position order within a key
    sk = keys[perm]
    seg_starts = np.concatenate([[0], np.flatnonzero(sk[1:] != sk[:-1]) + 1]).astype(np.int64)
    segs = np.repeat(seg_starts, np.diff(np.append(seg_starts, m)))
    span = m + 1                                    # > any local position: segments never overlap
    chunk = {"id": int(ident), "pos0": int(pos0), "n": m, "ts_max": int(ts[-1]), "ts": ts, "sk": sk,
             "comp": segs * span + perm}
    chunk.update({"x:" + f: a[perm] for f, a in xs.items()})
    return chunk


def _pc_positional(chunk, name):
    """A chunk's key-ordered column back in position order (the composite's remainder is the
    candidate's local position)."""
    out = np.empty_like(chunk[name])
    out[chunk["comp"] % (chunk["n"] + 1)] = chunk[name]
    return out


class ChunkedPatternCore(PatternCore):
    """PatternCore's answers for a keyed pattern with ALL on the first element, its candidates in
    chunks (module docstring)."""

    def __init__(self, q):
        super().__init__(q)
        if self.key is None or self.consume:
            raise ValueError(f"query {q['id']}: the chunked pattern core needs a key and ALL on the first element")

    def initial_state(self):
        return {"next": 0, "serial": 0, "last_ts": None, "chunks": []}

    def process(self, state, events):
        n = len(events)
        if n == 0:
            return self._empty()
        is_f, is_s, ts_ev = self._roles(events, state["last_ts"])
        key_ev = events[self.key].to_numpy(np.float64)
        fi, yi = np.flatnonzero(is_f), np.flatnonzero(is_s)
        base = state["next"]
        chunks = list(state["chunks"])
        if len(fi):
            xs = {f: events[f].to_numpy()[fi].astype(d) for f, d in self.xfields.items()}
            chunks.append(_pc_chunk(state["serial"], base, key_ev[fi], ts_ev[fi], xs))
            state["serial"] += 1
        out = None
        if len(yi) and chunks:
            # b: the candidates before each y (carried ones, then this batch's first-element
            # events strictly before it).
            b = base + (np.cumsum(is_f) - is_f)[yi]
            out = self._match_chunks(chunks, events, yi, b, ts_ev[yi], key_ev[yi])
        state["next"] = base + len(fi)
        state["last_ts"] = int(ts_ev[-1])
        horizon = int(ts_ev.max()) - self.within
        chunks = [c for c in chunks if c["ts_max"] > horizon]
        while len(chunks) > MAX_CHUNKS:
            chunks = self._merge_smallest(chunks, state)
        state["chunks"] = chunks
        return self._empty() if out is None else out

    def _runs(self, chunk, b, ty, ky):
        """Per y, the run [start, end) of the chunk's key-sorted candidates it matches."""
        m, span, pos0 = chunk["n"], chunk["n"] + 1, chunk["pos0"]
        sk, comp = chunk["sk"], chunk["comp"]
        lo = np.searchsorted(sk, ky, side="left")          # y's key segment (empty if absent)
        hi = np.searchsorted(sk, ky, side="right")
        la = np.searchsorted(chunk["ts"], ty - self.within, side="right")   # out of y's window: p < la
        lb = np.clip(b - pos0, 0, m)                        # before y: p < lb
        end = np.minimum(np.searchsorted(comp, lo * span + lb, side="left"), hi)
        start = np.minimum(np.searchsorted(comp, lo * span + la, side="left"), end)
        return start, end

    def _match_chunks(self, chunks, events, yi, b, ty, ky):
        ny, nc = len(yi), len(chunks)
        starts = np.empty((ny, nc), np.int64)
        counts = np.empty((ny, nc), np.int64)
        for c, chunk in enumerate(chunks):
            s, e = self._runs(chunk, b, ty, ky)
            starts[:, c], counts[:, c] = s, e - s
        if not self.take_all:
            # ONE on the second element: the oldest candidate, in the first chunk with a run.
            has = counts > 0
            first = np.argmax(has, axis=1)
            keep = np.zeros_like(has)
            keep[np.arange(ny), first] = has[np.arange(ny), first]
            counts = keep.astype(np.int64)
        flat = counts.ravel()                               # y-major: the reference order
        total = int(flat.sum())
        if total == 0:
            return None
        offsets = (np.cumsum(flat) - flat).reshape(ny, nc)
        cols = {name: np.empty(total, dtype) for name, dtype in zip(self.fields, self.dtypes)}
        per_y = counts.sum(axis=1)
        for (of_x, field), name, dtype in zip(self.plan, self.fields, self.dtypes):
            if not of_x:
                cols[name] = np.repeat(events[field].to_numpy()[yi].astype(dtype), per_y)
        cols[self.fields[-1]] = np.repeat(ty, per_y)        # inputTS: the triggering y's TS
        x_names = [(name, field) for (of_x, field), name in zip(self.plan, self.fields) if of_x]
        for c, chunk in enumerate(chunks):
            sel = np.flatnonzero(counts[:, c])
            if not len(sel):
                continue
            cnt = counts[sel, c]
            size = int(cnt.sum())
            src = _pat_expand(starts[sel, c], cnt, size)
            dst = _pat_expand(offsets[sel, c], cnt, size)
            for name, field in x_names:
                cols[name][dst] = chunk["x:" + field][src]
        return pd.DataFrame(cols, copy=False)

    def _merge_smallest(self, chunks, state):
        """The chunks with the two adjacent ones of fewest candidates merged into a new chunk."""
        sizes = np.array([c["n"] for c in chunks])
        i = int(np.argmin(sizes[:-1] + sizes[1:]))
        a, b = chunks[i], chunks[i + 1]
        if b["pos0"] != a["pos0"] + a["n"]:
            raise ValueError("pattern core: chunks to merge are not adjacent")
        keys = np.concatenate([_pc_positional(a, "sk"), _pc_positional(b, "sk")])
        xs = {f: np.concatenate([_pc_positional(a, "x:" + f), _pc_positional(b, "x:" + f)]) for f in self.xfields}
        merged = _pc_chunk(state["serial"], a["pos0"], keys, np.concatenate([a["ts"], b["ts"]]), xs)
        state["serial"] += 1
        return chunks[:i] + [merged] + chunks[i + 2:]
