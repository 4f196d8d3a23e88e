"""Reference answers for joins: window-to-window (Q5/J1) and stream-to-table (Q6/J2/J3).

SEMANTICS.md sections 6 and 7. A window join pairs each arriving event with the matching events
among the other stream's last `rows` events before it (in the merged order), so every matching
pair appears once, triggered by its later event. Computed for all events at once: the other
stream's events are sorted by (key, arrival), each arriving event's window becomes a range of
that array, and ranges are expanded into pairs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.workload import TableJoin, WindowJoin
from kit.workload.query_base import INPUT_TS, out_name
from validator.micro_inputs import where_mask


def _qualified(df: pd.DataFrame, name: str) -> pd.DataFrame:
    return df.drop(columns=[c for c in ("_pos",) if c in df]).add_prefix(f"{name}_")


def _pairs_into(arriving: pd.DataFrame, a_key: str, window: pd.DataFrame, w_key: str, rows: int):
    """(arriving index, window index) for every match of an arriving event in the other window."""
    keys = pd.factorize(pd.concat([arriving[a_key], window[w_key]], ignore_index=True))[0]
    ka, kw = keys[: len(arriving)], keys[len(arriving):]
    n_w = len(window)
    before = np.searchsorted(window["_pos"].to_numpy(), arriving["_pos"].to_numpy())  # window events earlier
    order = np.lexsort((np.arange(n_w), kw))
    key_sorted = kw[order].astype(np.int64) * (n_w + 1) + order
    lo = np.searchsorted(key_sorted, ka * (n_w + 1) + np.maximum(before - rows, 0), side="left")
    hi = np.searchsorted(key_sorted, ka * (n_w + 1) + before, side="left")
    counts = hi - lo
    a_idx = np.repeat(np.arange(len(arriving)), counts)
    offs = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return a_idx, order[np.repeat(lo, counts) + offs]


def window_join(query: WindowJoin, left: pd.DataFrame, right: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for arr, a_key, win, w_key, arr_name, win_name in (
            (left, query.left_key, right, query.right_key, query.left, query.right),
            (right, query.right_key, left, query.left_key, query.right, query.left)):
        ai, wi = _pairs_into(arr, a_key, win, w_key, query.rows)
        a = _qualified(arr.iloc[ai].reset_index(drop=True), arr_name)
        w = _qualified(win.iloc[wi].reset_index(drop=True), win_name)
        joined = pd.concat([a, w], axis=1)
        joined["_trigger"] = arr["_pos"].to_numpy()[ai]
        joined["_other"] = win["_pos"].to_numpy()[wi]
        joined[INPUT_TS] = arr["TS"].to_numpy()[ai]
        parts.append(joined)
    out = pd.concat(parts, ignore_index=True)
    out = out[where_mask(out, query.where, out_name)]
    out = out.sort_values(["_trigger", "_other"], kind="stable")
    return out[[out_name(s) for s in query.select] + [INPUT_TS]].reset_index(drop=True)


def table_join(query: TableJoin, stream: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    s = _qualified(stream, query.input)
    s["_pos"] = stream["_pos"].to_numpy()
    s[INPUT_TS] = stream["TS"].to_numpy()
    t = _qualified(table, query.table)
    out = s.merge(t, left_on=f"{query.input}_{query.stream_key}", right_on=f"{query.table}_{query.table_key}")
    out = out[where_mask(out, query.where, out_name)]
    out = out.sort_values(["_pos", f"{query.table}_ID"], kind="stable")
    return out[[out_name(c) for c in query.select] + [INPUT_TS]].reset_index(drop=True)
