"""Core of the pattern SEQ(a1, a2) WITHIN withinMs (Q7, kind Pattern; specs/SEMANTICS.md section 8),
under the four ALL/ONE consumption policies.

The contract of a core is in spark_runtime/micro_cores/__init__.py; the reference it must agree
with is validator/micro_patterns.py.

Candidates are the unconsumed events that satisfied the first element, per key, oldest first. An
event satisfying the second element drops its key's candidates that fell out of the window, pairs
with all of the rest (second = all) or the oldest (second = one), consumes those it paired with
(first = one), and then, if it satisfies the first element, becomes a candidate itself.
"""

import numpy as np

_pat_OPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}
_pat_COMPACT = 32       # used-up entries a candidate list may carry before it is compacted


def _pat_settle(cands, key, lst, head):
    """`lst[head:]` are the candidates of `key` still alive; record that.

    `cands[key]` is `[gone, c1, c2, ...]`, the first `gone` entries expired or consumed: moving a
    counter keeps taking from the front O(1) on a plain (JSON-able) list.
    """
    if head >= len(lst):
        del cands[key]                                 # so keys seen once do not pile up
    elif head > _pat_COMPACT and 2 * head >= len(lst):
        del lst[1:head]
        lst[0] = 0
    else:
        lst[0] = head - 1


def _pat_alive(lst, limit):
    """Index of the first candidate with TS > limit (the older ones can never match again, since
    events arrive in TS order)."""
    h, end = lst[0] + 1, len(lst)
    while h < end and lst[h][0] <= limit:
        h += 1
    return h


def _pat_mask(events, stream, element):
    ok = events["stream"].to_numpy() == stream
    for field, op, value in element["where"]:
        ok &= _pat_OPS[op](events[field].to_numpy(), value)
    return ok


class PatternCore:
    """State: `cands`, key -> `[gone, (TS, first's selected values...), ...]`; `sweep`, the TS from
    which all keys are next purged of expired candidates (a key may never see a second event
    again, so waiting for one would let memory grow with the input)."""

    def __init__(self, q):
        self.within = int(q["within_ms"])
        first_policy, second_policy = q["consumption"].split("-")
        self.take_all = second_policy == "all"
        self.consume = first_policy == "one"
        self.first, self.second, self.key = q["first"], q["second"], q["key"]
        self.fields = ([], [])
        picks = []
        for name in q["select"]:
            alias, field = name.split(".", 1)
            e = 0 if alias == self.first["alias"] else 1
            if field not in self.fields[e]:
                self.fields[e].append(field)
            # A candidate's TS comes first in its entry.
            picks.append((e == 0, self.fields[e].index(field) + (e == 0)))
        self.plan = tuple(picks)

    def initial_state(self):
        return {"cands": {}, "sweep": None}

    def process(self, state, events):
        if len(events) == 0:
            return []
        is_first = _pat_mask(events, self.first["stream"], self.first)
        is_second = _pat_mask(events, self.second["stream"], self.second)
        rel = np.flatnonzero(is_first | is_second)
        n = len(rel)
        if n == 0:
            return []
        ts = events["TS"].to_numpy()[rel].tolist()
        if self.key is None:
            keys = [""] * n
        else:
            keys = [repr(k) for k in events[self.key].to_numpy(np.float64)[rel].tolist()]
        xs = list(zip(ts, *[events[f].to_numpy()[rel].tolist() for f in self.fields[0]]))
        ycols = [events[f].to_numpy()[rel].tolist() for f in self.fields[1]]
        ys = list(zip(*ycols)) if ycols else [()] * n
        cands, within, plan, out = state["cands"], self.within, self.plan, []
        take_all, consume, sweep = self.take_all, self.consume, state["sweep"]
        for t, k, f, s, x, y in zip(ts, keys, is_first[rel].tolist(), is_second[rel].tolist(), xs, ys):
            if sweep is None or t >= sweep:
                for key in list(cands):
                    lst = cands[key]
                    _pat_settle(cands, key, lst, _pat_alive(lst, t - within))
                sweep = t + within
            if s:
                lst = cands.get(k)
                if lst is not None:
                    h = _pat_alive(lst, t - within)
                    if h < len(lst):
                        chosen = lst[h:] if take_all else lst[h:h + 1]
                        for c in chosen:
                            out.append(tuple([c[j] if of_x else y[j] for of_x, j in plan]) + (t,))
                        if consume:
                            h += len(chosen)
                    _pat_settle(cands, k, lst, h)
            if f:
                cands.setdefault(k, [0]).append(x)
        state["sweep"] = sweep
        return out
