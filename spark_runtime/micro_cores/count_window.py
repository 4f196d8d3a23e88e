"""Core of the count-window aggregation (Q2, kind CountWindowAggregation; specs/SEMANTICS.md section 4).

The contract of a core is in spark_runtime/micro_cores/__init__.py; the reference it must agree
with is `count_window` in validator/micro_windows.py.

The window is the last `rows` events of the whole input. At events rows, rows + slide, ... every
group with an event that entered since the previous evaluation gets one row, aggregated over its
events in the window, in group-key order, stamped with the triggering event's TS.

Tumbling windows (slide == rows) buffer the current block and aggregate it at once. Other windows
are maintained per group, O(1) amortized per event: a FIFO of the group's values (to know what
leaves), running sums shifted by a value of the group (SUM, AVG, STDEV), monotonic deques (MAX,
MIN) and a sorted list (MEDIAN). The state is plain lists and str-keyed dicts so it survives a
JSON round trip; lists consumed at the front keep a head index and are cut now and then.
"""

import bisect
import json
import math

import numpy as np
import pandas as pd

_cw_CUT = 64         # consumed list heads are cut only past this size, keeping cuts amortized O(1)
_cw_SLACK = 1e3      # re-sum when rounding (~1e-16 x this scale) could reach 1e-13 of the answer
_cw_PANDAS = {"SUM": "sum", "AVG": "mean", "MAX": "max", "MIN": "min", "MEDIAN": "median"}


def _cw_cut(lists, head):
    """Drop the consumed prefix `[:head]` of parallel lists once it is most of them."""
    if head > _cw_CUT and 2 * head > len(lists[0]):
        for lst in lists:
            del lst[:head]
        return 0
    return head


class CountWindowCore:
    def __init__(self, q):
        self.rows, self.slide = int(q["rows"]), int(q["slide"])
        self.group_by = list(q["group_by"])
        self.aggs = [tuple(a) for a in q["aggregates"]]
        self.fields = list(dict.fromkeys(f for _, f, _ in self.aggs if f is not None))
        pos = {f: i for i, f in enumerate(self.fields)}

        def using(*fns):
            return sorted({pos[f] for fn, f, _ in self.aggs if fn in fns})

        self.f_sum, self.f_sq, self.f_med = using("SUM", "AVG", "STDEV"), using("STDEV"), using("MEDIAN")
        # One monotonic deque per (field, sign): MIN is the MAX of the negated values (exact).
        self.mono = list(dict.fromkeys((pos[f], 1.0 if fn == "MAX" else -1.0)
                                       for fn, f, _ in self.aggs if fn in ("MAX", "MIN")))
        self.plan = [(fn, self.mono.index((pos[f], 1.0 if fn == "MAX" else -1.0)) if fn in ("MAX", "MIN")
                      else pos.get(f)) for fn, f, _ in self.aggs]
        self.tumbling = self.slide == self.rows
        self.buf_cols = list(dict.fromkeys(self.group_by + self.fields))

    def initial_state(self):
        if self.tumbling:
            return {"n": 0, "buf": {c: [] for c in self.buf_cols}}
        # groups[gid] is a group's record (None when free); gidx maps a group's JSON key to its gid;
        # win holds the gid of every event in the window from index wh on; ent the gids that had an
        # event enter since the last evaluation.
        return {"n": 0, "win": [], "wh": 0, "groups": [], "gidx": {}, "free": [], "ent": []}

    def process(self, state, events):
        if len(events) == 0:
            return []
        if self.tumbling:
            return self._blocks(state, events)
        rows, slide = self.rows, self.slide
        ev_keys, key_of = self._keys(events)
        cols = [events[f].to_numpy(np.float64).tolist() for f in self.fields]
        ts = events["TS"].to_numpy(np.int64).tolist()
        n, win, wh = state["n"], state["win"], state["wh"]
        groups, gidx, free = state["groups"], state["gidx"], state["free"]
        ent = set(state["ent"])
        out = []
        for j, ks in enumerate(ev_keys):
            n += 1
            vals = [c[j] for c in cols]
            gid = gidx.get(ks)
            if gid is None:
                gid = gidx[ks] = free.pop() if free else len(groups)
                if gid == len(groups):
                    groups.append(None)
                groups[gid] = g = self._new_group(ks, key_of[ks], vals)
            else:
                g = groups[gid]
            self._add(g, n, vals)
            win.append(gid)
            ent.add(gid)
            if n > rows:
                old = win[wh]
                wh += 1
                if wh >= rows:                        # cut after every `rows` departures
                    del win[:wh]
                    wh = 0
                og = groups[old]
                self._evict(og, n - rows)
                if og["c"] == 0:                      # its events all entered before the last evaluation
                    del gidx[og["ks"]]
                    groups[old] = None
                    free.append(old)
            if n >= rows and (n - rows) % slide == 0:
                for gid in sorted(ent, key=lambda x: groups[x]["key"]):
                    out.append(self._row(groups[gid]) + (ts[j],))
                ent.clear()
        state.update(n=n, wh=wh, ent=sorted(ent))
        return out

    def _keys(self, events):
        """Every event's group as a JSON string (a str dict key survives JSON), and string -> key."""
        if not self.group_by:
            return ["[]"] * len(events), {"[]": []}
        cols = [events[c].to_numpy() for c in self.group_by]
        codes = np.zeros(len(events), np.int64)
        for a in cols:                                # refactorized each time, so codes stay < len(events)
            c, u = pd.factorize(a)
            codes = pd.factorize(codes * len(u) + c)[0]
        first = np.unique(codes, return_index=True)[1]       # first event of codes 0, 1, ...
        keys = [list(k) for k in zip(*(a[first].tolist() for a in cols))]
        strs = [json.dumps(k) for k in keys]
        return [strs[c] for c in codes.tolist()], dict(zip(strs, keys))

    def _new_group(self, ks, key, vals):
        nf = len(self.fields)
        return {"ks": ks, "key": key, "c": 0, "h": 0, "d": 0, "v": [[] for _ in range(nf)],
                # sums of x - k, k a value of the group: small terms, and exactly 0 for a constant field;
                # e = sum of the squared terms since the last re-sum, a bound on s2's rounding
                "k": list(vals), "s1": [0.0] * nf, "s2": [0.0] * nf, "e": [0.0] * nf,
                "mq": [[0, [], []] for _ in self.mono],       # [head, event numbers, values]
                "md": [[] if i in self.f_med else None for i in range(nf)]}

    def _add(self, g, seq, vals):
        g["c"] += 1
        g["d"] += 1
        for lst, x in zip(g["v"], vals):
            lst.append(x)
        k, s1, s2 = g["k"], g["s1"], g["s2"]
        for i in self.f_sum:
            s1[i] += vals[i] - k[i]
        e = g["e"]
        for i in self.f_sq:
            d = vals[i] - k[i]
            s2[i] += d * d
            e[i] += d * d
        for (head, seqs, vs), (i, sign) in zip(g["mq"], self.mono):
            x = sign * vals[i]
            while len(vs) > head and vs[-1] <= x:     # a smaller older value can never be the max again
                vs.pop()
                seqs.pop()
            seqs.append(seq)
            vs.append(x)
        for i in self.f_med:
            bisect.insort(g["md"][i], vals[i])
        # Bound rounding drift: re-sum after ~2 * count updates (amortized O(1) per update).
        if self.f_sum and g["d"] > 2 * g["c"] + _cw_CUT:
            self._resum(g)

    def _evict(self, g, seq):
        """The group's oldest event (global number `seq`) leaves the window."""
        h = g["h"]
        v, k, s1, s2 = g["v"], g["k"], g["s1"], g["s2"]
        g["c"] -= 1
        g["d"] += 1
        for i in self.f_sum:
            s1[i] -= v[i][h] - k[i]
        e = g["e"]
        for i in self.f_sq:
            d = v[i][h] - k[i]
            s2[i] -= d * d
            e[i] += d * d
        for q in g["mq"]:
            if q[1][q[0]] == seq:
                q[0] = _cw_cut(q[1:], q[0] + 1)
        for i in self.f_med:
            sl = g["md"][i]
            del sl[bisect.bisect_left(sl, v[i][h])]
        g["h"] = _cw_cut(v, h + 1) if v else h + 1

    def _resum(self, g):
        h, k = g["h"], g["k"]
        for i in self.f_sum:
            xs = g["v"][i][h:]
            mean = math.fsum(xs) / len(xs)
            k[i] = ki = min(xs, key=lambda x: abs(x - mean))
            g["s1"][i] = math.fsum([x - ki for x in xs])
            if i in self.f_sq:
                g["s2"][i] = g["e"][i] = math.fsum([(x - ki) * (x - ki) for x in xs])
        g["d"] = 0

    def _conditioned(self, g):
        """False once the data's level moved far from the shift (SUM = s1 + c*k cancels) or large
        terms came and went (s2 - s1^2/c keeps their rounding): then the sums must be redone."""
        c = g["c"]
        for i in self.f_sum:
            s1, k = g["s1"][i], g["k"][i]
            if abs(k) * c > _cw_SLACK * (abs(s1 + c * k) + 1.0):
                return False
        for i in self.f_sq:
            if g["e"][i] > _cw_SLACK * (g["s2"][i] - g["s1"][i] ** 2 / c):
                return False
        return True

    def _row(self, g):
        if not self._conditioned(g):
            self._resum(g)
        c, out = g["c"], list(g["key"])
        for fn, i in self.plan:
            if fn == "COUNT":
                out.append(c)
            elif fn == "SUM":
                out.append(g["s1"][i] + c * g["k"][i])
            elif fn == "AVG":
                out.append(g["s1"][i] / c + g["k"][i])
            elif fn in ("MAX", "MIN"):
                q = g["mq"][i]
                out.append(self.mono[i][1] * q[2][q[0]])
            elif fn == "STDEV":
                s1 = g["s1"][i]
                out.append(math.sqrt(max(0.0, g["s2"][i] - s1 * s1 / c) / c))
            else:                                                        # MEDIAN
                sl = g["md"][i]
                out.append((sl[(c - 1) // 2] + sl[c // 2]) / 2)
        return tuple(out)

    def _blocks(self, state, events):
        """Tumbling: each complete block of `rows` events is a window where all groups emit. One
        groupby (block, group key) per batch; its sorted result is the output order."""
        rows, have = self.rows, state["n"] % self.rows
        buf = state["buf"]
        arrays = {c: np.concatenate([np.asarray(buf[c], dtype=events[c].dtype), events[c].to_numpy()])
                  for c in self.buf_cols}
        ts = events["TS"].to_numpy(np.int64)
        total = have + len(events)
        done = total - total % rows
        out = []
        if done:
            frame = pd.DataFrame({c: a[:done] for c, a in arrays.items()}, index=pd.RangeIndex(done))
            block = np.arange(done) // rows
            grouped = frame.groupby([block] + [frame[c] for c in self.group_by], sort=True)
            sizes = grouped.size()
            cols = []
            for fn, f, _ in self.aggs:
                s = (sizes if fn == "COUNT" else grouped[f].std(ddof=0) if fn == "STDEV"
                     else getattr(grouped[f], _cw_PANDAS[fn])())
                cols.append(s.tolist())
            trigger = ts[np.arange(rows, done + 1, rows) - have - 1].tolist()
            for r, k in enumerate(sizes.index.tolist()):
                k = k if isinstance(k, tuple) else (k,)
                out.append(k[1:] + tuple(c[r] for c in cols) + (trigger[k[0]],))
        state["buf"] = {c: a[done:].tolist() for c, a in arrays.items()}
        state["n"] += len(events)
        return out
