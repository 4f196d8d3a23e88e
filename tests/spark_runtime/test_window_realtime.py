"""The time-window logic in Java (spark_runtime/java/cepkit/spark/Window*.java) gives the
reference's rows (validator/micro_windows.py) for Q3 and Q4, with and without groups, every
aggregate function, tumbling and sliding windows and gaps in the input wider than a window,
however its events are cut into real-time tasks and its buckets' rows into runs with the state
written to bytes and read back between them, or cut into micro-batches read by several source
tasks each, a bucket's rows shuffled as a shuffle leaves them (cepkit.spark.WindowTrace runs the logic without
Spark; tests/cepkit_app/test_realtime_e2e.py runs it in Spark's real-time mode)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from harness.runtime_jar import build_jar
from kit.workload import Aggregate, TimeWindowAggregation, TwoLevelAggregation
from translators.micro_literal import query_literal
from validator.micro_windows import time_window

# In the e2e stage, beside the real-time runs: JVMs are slow to start, and the default run has no room.
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh installs")]
ALL = (Aggregate("AVG", "A1", "avgA1"), Aggregate("COUNT", None, "n"), Aggregate("SUM", "A2", "sumA2"),
       Aggregate("STDEV", "A1", "sdA1"), Aggregate("MAX", "A2", "maxA2"), Aggregate("MIN", "A1", "minA1"))
QUERIES = {
    "q3-whole-stream": TimeWindowAggregation("q3", "S1", 5000, 1000, ALL + (Aggregate("MEDIAN", "A1", "medA1"),)),
    "q3-by-id": TimeWindowAggregation("q3", "S1", 3000, 1000, ALL + (Aggregate("MEDIAN", "A2", "medA2"),), ("ID",)),
    "q3-tumbling": TimeWindowAggregation("q3", "S1", 1000, 1000, ALL, ("ID",)),
    "q4-by-id": TwoLevelAggregation("q4", "S1", 10000, 2000, ALL, ("ID",)),
}


@pytest.fixture(scope="module")
def jar():
    return build_jar(sys.executable)


def events(seed: int, n: int = 6000) -> pd.DataFrame:
    """n events in TS order: mostly a few ms apart, bursts on one TS, some pane boundaries hit
    exactly, and a few gaps longer than any window (their windows close with nothing)."""
    rng = np.random.default_rng(seed)
    step = rng.choice([0, 1, 3, 7, 40, 250], size=n, p=[0.2, 0.3, 0.2, 0.2, 0.08, 0.02])
    step[rng.choice(n, 4, replace=False)] = rng.integers(12_000, 40_000, 4)
    ts = 1_700_000_000_000 + np.cumsum(step)
    at = rng.choice(n, 30, replace=False)
    ts[at] = -(-ts[at] // 1000) * 1000          # on a pane's first ms (the next events may share it)
    ts = np.maximum.accumulate(ts)
    a1 = np.round(rng.uniform(1, 100, n), 2)
    a1[rng.random(n) < 0.1] = 50.0          # ties, for MEDIAN
    return pd.DataFrame({"TS": ts, "ingestTS": ts + 5, "offset": np.arange(n, dtype=np.int64),
                         "ID": rng.integers(1, 8, n).astype(np.int32), "A1": a1, "A2": rng.uniform(1, 100, n)})


def run_trace(jar, query, df: pd.DataFrame, buckets: int, seed: int, tmp_path, mode: str = "realtime") -> pd.DataFrame:
    import pyspark

    lit = query_literal(query)
    (tmp_path / "q.json").write_text(json.dumps(lit))
    df.to_csv(tmp_path / "e.csv", index=False, float_format="%.17g")
    cp = os.pathsep.join((str(jar), os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")))
    proc = subprocess.run(["java", "-cp", cp, "cepkit.spark.WindowTrace", str(tmp_path / "q.json"),
                           str(tmp_path / "e.csv"), str(buckets), str(seed), str(tmp_path / "out.csv"),
                           *(["micro"] if mode == "micro" else [])],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return pd.read_csv(tmp_path / "out.csv", header=None, names=["stream", *lit["fields"], "ingestTS"])


@pytest.mark.parametrize("mode", ["realtime", "micro"])
@pytest.mark.parametrize("name", list(QUERIES))
@pytest.mark.parametrize("buckets, seed", [(1, 5), (3, 6)])
def test_the_java_windows_match_the_reference(jar, name, buckets, seed, mode, tmp_path):
    """In real-time mode (rows in feed order, buckets fed in runs) and in micro-batches (each batch
    read by several source tasks, a bucket's rows shuffled and sorted back by their feed offset)."""
    query = QUERIES[name]
    df = events(seed)
    got = run_trace(jar, query, df, buckets, seed, tmp_path, mode)
    single = query.single_level() if isinstance(query, TwoLevelAggregation) else query
    ref = time_window(single, df)
    assert len(ref) > (200 if query.group_by else 50)
    keys = ["windowEnd", *query.group_by]
    got = got.sort_values(keys).reset_index(drop=True)
    assert len(got) == len(ref) and (got.stream == query.id).all()
    for col in ref.columns:
        if col in keys or col in ("inputTS", "n"):
            assert (got[col].to_numpy() == ref[col].to_numpy()).all(), col
        else:
            np.testing.assert_allclose(got[col].to_numpy(), ref[col].to_numpy(), rtol=1e-9, atol=1e-9, err_msg=col)
    assert (got.ingestTS == got.inputTS + 5).all()
