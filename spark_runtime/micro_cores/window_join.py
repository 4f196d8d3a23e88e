"""Core of the count-window join (Q5 / J1, kind WindowJoin; specs/SEMANTICS.md section 6).

The contract of a core is in spark_runtime/micro_cores/__init__.py; the reference it must agree
with is validator/micro_joins.py.

Each side keeps its last `rows` events. An arriving event is joined with the other side's current
window (equal key, all `where` comparisons true), emitting one row per match in the matched events'
arrival order, and then enters its own window, pushing out that side's oldest event. Every
comparison of `where` names one field of one stream, so it is a filter on that stream's events:
an event failing it still takes a slot in its window but is never indexed, never probes.
"""

import numpy as np

_wj_OPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
           "eq": np.equal, "ne": np.not_equal}
_wj_COMPACT = 32        # departed entries a key list may carry before it is compacted


def _wj_depart(idx, key):
    """The oldest indexed event of `key` leaves its window.

    `idx[key]` is `[gone, e1, e2, ...]`: the first `gone` entries have left. Bumping a counter
    instead of deleting the head keeps an eviction O(1) on a plain (JSON-able) list; the dead
    prefix is cut once it is a sizeable share of the list.
    """
    lst = idx[key]
    gone = lst[0] + 1
    if gone == len(lst) - 1:
        del idx[key]                                   # keeps the index as small as the window
    elif gone >= _wj_COMPACT and 2 * gone >= len(lst):
        del lst[1:1 + gone]
        lst[0] = 0
    else:
        lst[0] = gone


def _wj_tuples(cols, n):
    return list(zip(*cols)) if cols else [()] * n


class WindowJoinCore:
    """State: per side ("0" left, "1" right) `n`, the number of events that entered its window;
    `ring`, the key of event s at `ring[s % rows]` (None for an event its where rejected), which
    says whose entry leaves when event s + rows enters; and `idx`, key -> entries of the window's
    indexed events with that key, oldest first, each the side's selected values."""

    def __init__(self, q):
        if q["left"] == q["right"]:
            # The model rejects it too: with one stream, `S1.A1` could not say which side it means.
            raise ValueError(f"query {q['id']}: a window join needs two different streams, "
                             f"both are {q['left']}")
        self.rows = int(q["rows"])
        self.streams = (q["left"], q["right"])
        self.keys = (q["left_key"], q["right_key"])
        self.fields = ([], [])
        picks = []
        for name in q["select"]:
            stream, field = name.split(".", 1)
            side = self.streams.index(stream)
            if field not in self.fields[side]:
                self.fields[side].append(field)
            picks.append((side, self.fields[side].index(field)))
        # Per arriving side: each output column from the arriving event (True) or the matched one.
        self.plans = tuple(tuple((side == a, j) for side, j in picks) for a in (0, 1))
        self.where = []
        for name, op, value in q["where"]:
            stream, field = name.split(".", 1)
            self.where.append((stream, field, _wj_OPS[op], value))

    def initial_state(self):
        return {str(a): {"n": 0, "ring": [], "idx": {}} for a in (0, 1)}

    def process(self, state, events):
        n = len(events)
        if n == 0:
            return []
        stream = events["stream"].to_numpy()
        ok = np.ones(n, dtype=bool)
        for s, field, op, value in self.where:
            ok &= (stream != s) | op(events[field].to_numpy(), value)
        is_left = stream == self.streams[0]
        side_of = np.where(is_left, 0, np.where(stream == self.streams[1], 1, -1)).tolist()
        # Keys as strings (JSON object keys are strings); through float so that an int key on one
        # side equals the same number held as a double on the other.
        keycol = np.where(is_left, events[self.keys[0]].to_numpy(np.float64),
                          events[self.keys[1]].to_numpy(np.float64))
        keys = [repr(k) if o else None for k, o in zip(keycol.tolist(), ok.tolist())]
        vals = tuple(_wj_tuples([events[f].tolist() for f in self.fields[a]], n) for a in (0, 1))
        sides = (state["0"], state["1"])
        rows, plans, out = self.rows, self.plans, []
        for i, (a, k, t) in enumerate(zip(side_of, keys, events["TS"].tolist())):
            if a < 0:
                continue
            mine = sides[a]
            if k is not None:
                e = vals[a][i]
                lst = sides[1 - a]["idx"].get(k)
                if lst is not None:
                    plan = plans[a]
                    for x in lst[1 + lst[0]:]:
                        out.append(tuple([e[j] if own else x[j] for own, j in plan]) + (t,))
                mine["idx"].setdefault(k, [0]).append(e)
            m, ring = mine["n"], mine["ring"]
            if m < rows:
                ring.append(k)
            else:
                old = ring[m % rows]
                if old is not None:
                    _wj_depart(mine["idx"], old)
                ring[m % rows] = k
            mine["n"] = m + 1
        return out
