"""Reference answers for patterns: SEQ(first, second) WITHIN an interval, under the four
ALL/ONE consumption policies (SEMANTICS.md section 8, thesis 4.2.2).

Processed event by event, per key, exactly as the spec's operational rule says: a second-element
event pairs with every (ALL) or the oldest (ONE) unconsumed candidate of its key still inside the
window; with ONE on the first element, the candidates it paired with are consumed; then the event
itself may become a candidate. A per-key deque keeps candidates in arrival order.
"""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np
import pandas as pd

from kit.workload import Pattern
from kit.workload.query_base import INPUT_TS, out_name, split_qualified
from validator.micro_inputs import where_mask


def pattern_matches(query: Pattern, streams: dict[str, pd.DataFrame]) -> pd.DataFrame:
    first, second = query.first, query.second
    names = sorted({first.stream, second.stream})
    merged = pd.concat([streams[n].assign(_stream=n) for n in names], ignore_index=True)
    merged = merged.sort_values("_pos", kind="stable").reset_index(drop=True)
    is_first = (merged["_stream"] == first.stream).to_numpy() & where_mask(merged, first.where)
    is_second = (merged["_stream"] == second.stream).to_numpy() & where_mask(merged, second.where)
    keys = merged[query.key].to_numpy() if query.key else np.zeros(len(merged), dtype=np.int64)
    ts = merged["TS"].to_numpy(np.int64)
    take_all = query.consumption.endswith("-all")
    consume = query.consumption.startswith("one-")
    within = query.within_ms
    candidates: dict = defaultdict(deque)
    pairs: list[tuple[int, int]] = []
    for i in np.flatnonzero(is_first | is_second):
        k = keys[i]
        cands = candidates[k]
        if is_second[i] and cands:
            while cands and ts[cands[0]] + within <= ts[i]:   # out of the window for good
                cands.popleft()
            if cands:
                chosen = list(cands) if take_all else [cands[0]]
                pairs.extend((int(x), int(i)) for x in chosen)
                if consume:
                    if take_all:
                        cands.clear()
                    else:
                        cands.popleft()
        if is_first[i]:
            cands.append(i)
    x = np.array([p[0] for p in pairs], dtype=np.int64)
    y = np.array([p[1] for p in pairs], dtype=np.int64)
    cols = {}
    for name in query.select:
        alias, field = split_qualified(name)
        cols[out_name(name)] = merged[field].to_numpy()[x if alias == first.alias else y]
    cols[INPUT_TS] = ts[y]
    return pd.DataFrame(cols)
