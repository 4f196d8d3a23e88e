"""Spark's Pairs JVM plan (runtime_common/java/cepkit/logic/Pairs*.java, shared with Flink's plan, and
spark_runtime/java/cepkit/spark/PairsRealTime.java) gives exactly the reference answers, with the
very same doubles, in both of Spark's modes: real-time (ticks cut into real-time tasks, its buckets'
rows into runs with the state written to bytes and read back between them) and micro-batches
(ticks cut into batches and each batch into several source tasks at random boundaries, a bucket's
rows of a batch from every task in random order, batches failed at random and run again from the
last batch's state): the hand trace's worked-out orders, the trace near 2^31 cents, and the quick
SF=1 dataset in 1 and 3 buckets (cepkit.spark.PairsTrace runs the logic without Spark;
tests/cepkit_app/test_realtime_e2e.py and test_pairs_e2e.py run it in Spark)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.runtime_jar import build_jar
from kit.workload import load_aux
from querygen.strategies import strategies_for
from tests.pairs_trace import (BIG_EXPECTED_ORDERS, BIG_STRATEGY_ROW, EXPECTED_INDICATORS, EXPECTED_ORDERS, STRATEGY_ROW,
                               T0, TRACE_TICK_COLUMNS, big_price_rows, read_trace_output, same_as_reference,
                               trace_rows, trace_ticks, write_dataset)
from validator.pairs_reference import StrategyParams, compute_reference

# In the e2e stage, beside the real-time runs: JVMs are slow to start, and the default run has no room.
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh installs")]


@pytest.fixture(scope="module")
def jar():
    return build_jar(sys.executable)


MODES = ("realtime", "micro")


def run_trace(jar, strategies, ticks: pd.DataFrame, buckets: int, seed: int, tmp_path, mode: str) -> pd.DataFrame:
    """The Java logic over `ticks` (symbol, price, tickTS, TS, offset, ingestTS, in feed order), cut
    as Spark's `mode` cuts them (PairsTrace's doc)."""
    import pyspark

    (tmp_path / "s.json").write_text(json.dumps([list(s) for s in strategies]))
    ticks[TRACE_TICK_COLUMNS].to_csv(tmp_path / "t.csv", header=False, index=False)
    cp = os.pathsep.join((str(jar), os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")))
    proc = subprocess.run(["java", "-cp", cp, "cepkit.spark.PairsTrace", str(tmp_path / "s.json"),
                           str(tmp_path / "t.csv"), str(buckets), str(seed), str(tmp_path / "out.csv"), mode],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_trace_output(tmp_path / "out.csv")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_hand_trace(jar, seed, mode, tmp_path):
    got = run_trace(jar, [STRATEGY_ROW], trace_ticks(trace_rows()), 1, seed, tmp_path, mode)
    ind = got[got.stream == "Indicator"].sort_values("inputTickTS")
    assert (ind.inputTickTS - T0).tolist() == [e[0] for e in EXPECTED_INDICATORS]
    for col, j in (("ratio", 1), ("avgRatio", 2), ("upperBand", 3), ("lowerBand", 4)):
        np.testing.assert_allclose(ind[col].to_numpy(), [e[j] for e in EXPECTED_INDICATORS], rtol=0, atol=1e-12)
    orders = [(int(r.inputTickTS - T0), r.type, r.symbol, int(r.price), int(r.size))
              for r in got[got.stream == "MarketOrder"].itertuples()]
    assert orders == EXPECTED_ORDERS
    assert (ind.inputTS == ind.inputTickTS + 3).all() and (ind.ingestTS == ind.inputTickTS + 5).all()


@pytest.mark.parametrize("mode", MODES)
def test_a_genuine_crossing_near_2_31_cents(jar, mode, tmp_path):
    rows = big_price_rows()
    got = run_trace(jar, [BIG_STRATEGY_ROW, STRATEGY_ROW], trace_ticks(rows), 2, 27, tmp_path, mode)
    mine = got[(got.stream == "MarketOrder") & (got.strategy == BIG_STRATEGY_ROW[0])]
    assert [(int(r.inputTickTS - T0), r.type, r.symbol, int(r.price), int(r.size)) for r in mine.itertuples()] \
        == BIG_EXPECTED_ORDERS
    ref = compute_reference(write_dataset(tmp_path / "ref", rows), [StrategyParams(*BIG_STRATEGY_ROW),
                                                                     StrategyParams(*STRATEGY_ROW)])
    same_as_reference(got, ref)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("buckets, seed", [(1, 3), (3, 4)])
def test_generated_data_matches_the_reference_exactly(jar, quick_pairs, buckets, seed, mode, tmp_path):
    aux = load_aux(quick_pairs / "pairs-aux.json")
    spec = [(s.alias, s.symbol1, s.symbol2, s.available_funds, s.period_length, s.num_periods, s.bands_multiplier,
             s.stop_loss_perc) for s in strategies_for(aux, 7).strategies]
    spec += [(f"st_{900 + i:05d}", c.symbol1, c.symbol2, 1_000_000, 5, 5, 1.2, 0.1)
             for i, c in enumerate(aux.correlations[:20])]
    ticks = pd.concat([pq.read_table(f).to_pandas() for f in sorted(quick_pairs.glob("ticks-*.parquet"))],
                      ignore_index=True)
    ticks["TS"], ticks["offset"], ticks["ingestTS"] = ticks.tickTS + 3, np.arange(len(ticks)), ticks.tickTS + 5
    got = run_trace(jar, spec, ticks, buckets, seed, tmp_path, mode)
    ref = compute_reference(quick_pairs, [StrategyParams(*r) for r in spec])
    assert len(ref.indicators) > 400 and len(ref.orders) > 50
    same_as_reference(got, ref)
