"""Events in and rows out of the microbenchmark cores, for every engine's runtime.

`routed` picks the events a query reads from a batch of the feed's events (its input streams; for
a pattern, only events that can be one of its elements); `output_rows` turns a core's result into
rows of the program's output row type, with the triggering event's `ingestTS`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

NUMPY_OPS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
              "ne": np.not_equal}


def routed(q, events: pd.DataFrame) -> np.ndarray:
    """Which events query q reads: those of its input streams, and for a pattern only those that
    can be its first or its second element (the operator plan's routing, micro_plan._routed_to)."""
    stream = events["stream"].to_numpy()
    if q["kind"] != "pattern":
        return np.isin(stream, q["inputs"])
    keep = np.zeros(len(events), dtype=bool)
    for element in (q["first"], q["second"]):
        mask = stream == element["stream"]
        for field, op, value in element["where"]:
            mask &= NUMPY_OPS[op](events[field].to_numpy(), value)
        keep |= mask
    return keep


def output_rows(q, out, events: pd.DataFrame, out_columns) -> pd.DataFrame:
    """A core's result for query q as rows of the output row type: `stream` = q's id, `ingestTS` of
    the triggering event (the row's inputTS names it, and TS is unique enough for a latency stamp:
    the latest ingest of the batch's events with that TS), other queries' columns null. Both plans
    use it (here and micro_plan.MicroProcessor)."""
    frame = out if isinstance(out, pd.DataFrame) else pd.DataFrame.from_records(out, columns=q["fields"])
    frame["stream"] = q["id"]
    frame["ingestTS"] = frame["inputTS"].map(events.groupby("TS")["ingestTS"].max()).astype("Int64")
    for column in out_columns:
        if column not in frame:
            frame[column] = None        # another query's column: null, whatever its type
    return frame[list(out_columns)]
