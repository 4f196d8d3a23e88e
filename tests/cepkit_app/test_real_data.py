"""A user's own market data end to end (issue 14, finding 0): a CSV of monthly closes as people find
it (dates as text, prices in dollars, no sizes, grouped by symbol) is converted, gets strategies,
is validated without an engine and, on Spark, replayed through `cepkit pairs --data` to a verdict.
"""

from __future__ import annotations

import pytest

import json
import subprocess
import sys
from pathlib import Path

from kit.workload import load_aux, read_strategies
from tests.fuzz import run_cli
from tests.helpers import TESTS_DIR

REAL = TESTS_DIR / "data" / "real"


def _convert(tmp_path: Path) -> Path:
    out = tmp_path / "closes"
    code, _, err = run_cli(["datagen", "convert", str(REAL / "monthly-closes.csv"), "--kind", "ticks",
                            "--ts-column", "date", "--ts-format", "%b %d %Y", "--price-unit", "dollars",
                            "--default-size", "100", "--sort", "--correlations", str(REAL / "pairs.csv"),
                            "--out", str(out)])
    assert code == 0, err
    return out


def test_converted_closes_get_strategies_and_expected_answers(tmp_path):
    data = _convert(tmp_path)
    aux = load_aux(data)
    # 25 x SF = 25 would not fit two pairs (10 each): the converter asks for what fits.
    assert aux.num_strategies == 20 and len(aux.correlations) == 2
    strategies = tmp_path / "strategies.xml"
    code, _, err = run_cli(["querygen", "pairs", "--aux", str(data), "--seed", "3", "--out", str(strategies)])
    assert code == 0, err
    assert len(read_strategies(strategies).strategies) == 20
    # --count asks for another number; more than fits is one line saying how many do.
    fewer = tmp_path / "fewer.xml"
    assert run_cli(["querygen", "pairs", "--aux", str(data), "--count", "7", "--out", str(fewer)])[0] == 0
    assert len(read_strategies(fewer).strategies) == 7
    code, _, err = run_cli(["querygen", "pairs", "--aux", str(data), "--count", "21", "--out", str(tmp_path / "x.xml")])
    assert code == 2 and "at most 20" in err and not (tmp_path / "x.xml").exists()
    # Without an engine log: the expected answers of a dataset that has no rate profile (this died
    # with KeyError: 'profile' before).
    report = tmp_path / "report"
    code, out, err = run_cli(["validate", "pairs", "--data", str(data), "--strategies", str(strategies),
                              "--out", str(report)])
    assert code == 0, err
    summary = json.loads((report / "summary.json").read_text())
    assert summary["verdict"] == "NOT VALIDATED"
    assert (report / "expected" / "MarketOrder.parquet").is_file()


@pytest.mark.spark
@pytest.mark.e2e
def test_real_closes_through_cepkit_pairs_pass(tmp_path):
    """`cepkit pairs --data` on the converted closes at their recorded pace x 6e6 (23 months in
    about 10 s): every Indicator and MarketOrder right, the whole run measured, a pscore."""
    data = _convert(tmp_path)
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "pairs", "--data", str(data), "--speed", "6e6",
                           "--master", "local[2]", "--out", str(run)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["verdict"] == "PASSED"
    streams = {s["stream"]: s for s in summary["streams"]}
    assert streams["MarketOrder"]["expected"] > 0
    for s in streams.values():
        assert s["missing"] == s["undue"] == s["wrong"] == 0
    said = proc.stdout + proc.stderr
    assert "pscore: " in said and " orders" in said        # with the count behind the p99
    assert "recorded pace x 6e+06" in said
