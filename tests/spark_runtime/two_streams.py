"""Two-stream inputs for the core tests (window join, pattern): random streams S1 and S2 merged
in event order as a generated program hands them to a core, and the batchings they are cut into."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from validator.micro_inputs import merge_order

BATCHINGS = ("one", "seven", "random", "all")
DTYPES = {"int": "int64", "long": "int64", "double": "float64"}


def stream(seed, n, ids, span_ms, share_ts=None):
    rng = np.random.default_rng(seed)
    ts = rng.integers(0, span_ms, n)
    if share_ts is not None:                  # half of the timestamps also occur in another stream
        ts[: n // 2] = rng.choice(share_ts, n // 2)
    return pd.DataFrame({"ID": rng.integers(1, ids + 1, n).astype(np.int32), "A1": rng.uniform(1, 100, n),
                         "A2": rng.uniform(1, 100, n), "TS": np.sort(ts).astype(np.int64)})


@functools.lru_cache(maxsize=None)
def inputs(ids, seed=1, n=100, span_ms=2000):
    """Streams S1, S2 (with `_pos`) and the merged events; shared by the tests, never modified."""
    s1 = stream(seed, n, ids, span_ms)
    streams = merge_order({"S1": s1, "S2": stream(seed + 1, n - n // 10, ids, span_ms, s1["TS"].to_numpy())})
    return streams, events_of(streams)


def events_of(streams):
    """What a generated program hands a core: merged by offset, with `stream` and `ingestTS`."""
    ev = pd.concat([df.assign(stream=name) for name, df in streams.items()], ignore_index=True)
    ev = ev.rename(columns={"_pos": "offset"}).sort_values("offset", kind="stable").reset_index(drop=True)
    ev["ingestTS"] = ev["TS"] + 3
    return ev


def bounds(n, how, seed=0):
    if how == "all":
        return [(0, n)]
    if how in ("one", "seven"):
        step = 1 if how == "one" else 7
        return [(a, min(a + step, n)) for a in range(0, n, step)]
    rng, out, a = np.random.default_rng(seed), [], 0
    while a < n:                              # sizes 0..40: empty batches included
        b = min(n, a + int(rng.integers(0, 41)))
        out.append((a, b))
        a = b
    return out


def assert_reference_rows(query, streams, got, rows_expected=True):
    """The core's rows `got` are the reference's for `streams`: no row missing, undue or wrong, and
    in the reference's order with its inputTS (which compare_stream does not look at)."""
    from kit.workload import output_schema
    from validator.compare import compare_stream
    from validator.micro_reference import expected_for_query

    exp = expected_for_query(query, streams, None)
    res = compare_stream(exp, got, output_schema(query))
    assert (res.missing, res.undue, res.wrong) == (0, 0, 0), res.incorrect.head(10).to_string()
    assert len(got) == len(exp)
    pd.testing.assert_frame_equal(got, exp, check_dtype=False)
    assert len(exp) > 0 or not rows_expected     # the fixed cases are chosen to produce rows
