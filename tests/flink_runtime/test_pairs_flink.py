"""Pairs on Flink in the JVM (flink_runtime/java/cepkit/flink/PairsFlink.java, with the Pairs logic
it shares with Spark's real-time plan, runtime_common/java/cepkit/logic) gives exactly the reference
answers, the very same doubles: the hand trace's worked-out orders, the trace near 2^31 cents and
the quick SF=1 dataset in 1 and 3 buckets.

Two ways (cepkit.flink.PairsFlinkTrace):
- in the default run, the calls the plan's functions make, without Flink, through Flink's recovery
  at random: checkpoints of the partials' state and the buckets' records, failures that drop the
  answers since the last checkpoint and read the ticks again from its position (dozens per trace);
- in the `flink` stage, `PairsFlink.plan` itself in a local Flink mini-cluster: its partials
  operator and keyed buckets over two subtasks, once failed on purpose and restored by Flink from a
  checkpoint (operator state, keyed state, the source's position), the answers collected exactly
  once.
The harness runs Flink Pairs in tests/cepkit_app/test_pairs_e2e.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.flink_jar import build_jar, class_path, flink_python, pyflink_home
from kit.workload import load_aux
from querygen.strategies import strategies_for
from tests.pairs_trace import (BIG_EXPECTED_ORDERS, BIG_STRATEGY_ROW, EXPECTED_INDICATORS, EXPECTED_ORDERS, STRATEGY_ROW,
                               T0, TRACE_TICK_COLUMNS, big_price_rows, read_trace_output, same_as_reference,
                               trace_rows, trace_ticks, write_dataset)
from validator.pairs_reference import StrategyParams, compute_reference

pytestmark = [pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh installs"),
              pytest.mark.skipif(flink_python() is None, reason="needs the Flink environment (.venv-flink)")]


@pytest.fixture(scope="module")
def flink_cp():
    """The Flink runtime jar and PyFlink's jars: the trace's class path."""
    return os.pathsep.join((str(build_jar()), class_path(pyflink_home(flink_python()))))


def run_trace(cp, mode: str, strategies, ticks: pd.DataFrame, buckets: int, args, tmp_path) -> pd.DataFrame:
    """PairsFlinkTrace over `ticks` (symbol, price, tickTS, TS, offset, ingestTS, in feed order); checks
    that it went through a restore."""
    (tmp_path / "s.json").write_text(json.dumps([list(s) for s in strategies]))
    ticks[TRACE_TICK_COLUMNS].to_csv(tmp_path / "t.csv", header=False, index=False)
    cmd = ["java", "-cp", cp, "cepkit.flink.PairsFlinkTrace", mode, str(tmp_path / "s.json"), str(tmp_path / "t.csv"),
           str(buckets), *map(str, args), str(tmp_path / "out.csv")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    restores = re.search(r"cepkit trace: (\d+) restores", proc.stderr)
    assert restores and int(restores.group(1)) > 0, proc.stderr[-2000:]
    return read_trace_output(tmp_path / "out.csv")


def check_hand_trace(got: pd.DataFrame) -> None:
    ind = got[got.stream == "Indicator"].sort_values("inputTickTS")
    assert (ind.inputTickTS - T0).tolist() == [e[0] for e in EXPECTED_INDICATORS]
    for col, j in (("ratio", 1), ("avgRatio", 2), ("upperBand", 3), ("lowerBand", 4)):
        np.testing.assert_allclose(ind[col].to_numpy(), [e[j] for e in EXPECTED_INDICATORS], rtol=0, atol=1e-12)
    orders = [(int(r.inputTickTS - T0), r.type, r.symbol, int(r.price), int(r.size))
              for r in got[got.stream == "MarketOrder"].sort_values("inputTickTS", kind="stable").itertuples()]
    assert orders == EXPECTED_ORDERS
    assert (ind.inputTS == ind.inputTickTS + 3).all() and (ind.ingestTS == ind.inputTickTS + 5).all()


def check_big_trace(got: pd.DataFrame, tmp_path) -> None:
    mine = got[(got.stream == "MarketOrder") & (got.strategy == BIG_STRATEGY_ROW[0])]
    assert [(int(r.inputTickTS - T0), r.type, r.symbol, int(r.price), int(r.size))
            for r in mine.sort_values("inputTickTS", kind="stable").itertuples()] == BIG_EXPECTED_ORDERS
    ref = compute_reference(write_dataset(tmp_path / "ref", big_price_rows()),
                            [StrategyParams(*BIG_STRATEGY_ROW), StrategyParams(*STRATEGY_ROW)])
    same_as_reference(got, ref)


def quick_spec_and_ticks(quick_pairs):
    """The quick SF=1 dataset's strategies (seed 7) plus 20 short ones that trade, and its ticks."""
    aux = load_aux(quick_pairs / "pairs-aux.json")
    spec = [(s.alias, s.symbol1, s.symbol2, s.available_funds, s.period_length, s.num_periods, s.bands_multiplier,
             s.stop_loss_perc) for s in strategies_for(aux, 7).strategies]
    spec += [(f"st_{900 + i:05d}", c.symbol1, c.symbol2, 1_000_000, 5, 5, 1.2, 0.1)
             for i, c in enumerate(aux.correlations[:20])]
    ticks = pd.concat([pq.read_table(f).to_pandas() for f in sorted(quick_pairs.glob("ticks-*.parquet"))],
                      ignore_index=True)
    ticks["TS"], ticks["offset"], ticks["ingestTS"] = ticks.tickTS + 3, np.arange(len(ticks)), ticks.tickTS + 5
    return spec, ticks


def check_quick(got: pd.DataFrame, quick_pairs, spec) -> None:
    ref = compute_reference(quick_pairs, [StrategyParams(*r) for r in spec])
    assert len(ref.indicators) > 400 and len(ref.orders) > 50
    same_as_reference(got, ref)


# -- the default run: the functions' calls through Flink's recovery, without Flink ------------------

@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_hand_trace_through_restores(flink_cp, seed, tmp_path):
    check_hand_trace(run_trace(flink_cp, "restore", [STRATEGY_ROW], trace_ticks(trace_rows()), 1, [seed], tmp_path))


def test_a_genuine_crossing_near_2_31_cents_through_restores(flink_cp, tmp_path):
    got = run_trace(flink_cp, "restore", [BIG_STRATEGY_ROW, STRATEGY_ROW], trace_ticks(big_price_rows()), 2, [27],
                    tmp_path)
    check_big_trace(got, tmp_path)


def test_generated_data_through_restores_matches_the_reference_exactly(flink_cp, quick_pairs, tmp_path):
    """3 buckets (one bucket is the hand traces' case)."""
    spec, ticks = quick_spec_and_ticks(quick_pairs)
    check_quick(run_trace(flink_cp, "restore", spec, ticks, 3, [4], tmp_path), quick_pairs, spec)


# -- the flink stage: the plan itself in a Flink mini-cluster, failed and restored once -------------

@pytest.mark.flink
def test_the_plan_in_flink_answers_the_hand_trace(flink_cp, tmp_path):
    """One strategy, one bucket; the hand trace is short, so the ticks after the first are slowed
    until two checkpoints have completed, then the job fails and Flink restores it."""
    check_hand_trace(run_trace(flink_cp, "job", [STRATEGY_ROW], trace_ticks(trace_rows()), 1, [2, 1], tmp_path))


@pytest.mark.flink
def test_the_plan_in_flink_over_two_subtasks_matches_the_reference_exactly(flink_cp, quick_pairs, tmp_path):
    """The quick SF=1 dataset in 3 buckets over 2 bucket subtasks, failed at its 200,000th tick
    (or once two checkpoints have completed after it) and restored."""
    spec, ticks = quick_spec_and_ticks(quick_pairs)
    check_quick(run_trace(flink_cp, "job", spec, ticks, 3, [2, 200_000], tmp_path), quick_pairs, spec)
