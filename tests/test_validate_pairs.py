"""`cepkit validate pairs` end to end on a generated run and a synthetic engine log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from datagen.pairs import generate_pairs
from kit.cli import main
from querygen.output import write_strategies
from kit.workload import load_aux
from tests.helpers import pairs_config

RUN_START_WALL_MS = 1_790_000_000_000


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("validate")
    data = root / "data"
    # 5 minutes of the standard profile's shape: enough periods for signals and orders.
    generate_pairs(pairs_config(rate={"duration_s": 300.0}), data)
    strategies = root / "strategies.xml"
    write_strategies(load_aux(data), 42, strategies)
    expected = root / "expected"
    assert main(["validate", "pairs", "--data", str(data), "--strategies", str(strategies),
                 "--out", str(expected)]) == 0
    return data, strategies, expected


def write_log(directory: Path, frames: dict[str, pd.DataFrame], sim_start_ms: int) -> Path:
    out = directory / "outputs"
    out.mkdir(parents=True)
    files = {}
    for name, df in frames.items():
        df = df.copy()
        df["inputTS"] = RUN_START_WALL_MS + (df["inputTickTS"] - sim_start_ms)
        df["arrivalTS"] = df["inputTS"] + 80 + np.arange(len(df)) % 40   # 80..119 ms
        df.to_parquet(out / f"{name}-00001.parquet", index=False)
        files[name] = {"files": [f"{name}-00001.parquet"]}
    (out / "output-log.json").write_text(json.dumps({
        "kind": "cepkit.output-log", "schema_version": 1, "format": "parquet",
        "run_start_wall_ms": RUN_START_WALL_MS, "sim_start_ms": sim_start_ms, "speed": 1.0, "streams": files}))
    return out


def _expected(run):
    _, _, expected = run
    return {n: pd.read_parquet(expected / "expected" / f"{n}.parquet") for n in ("Indicator", "MarketOrder")}


def test_expected_answers_written(run):
    exp = _expected(run)
    assert len(exp["Indicator"]) > 50 and len(exp["MarketOrder"]) > 0
    assert (run[2] / "report.html").exists()


def test_log_equal_to_expected_passes(run, tmp_path, capsys):
    data, strategies, _ = run
    sim_start = json.loads((data / "manifest.json").read_text())["start_epoch_ms"]
    log = write_log(tmp_path, _expected(run), sim_start)
    assert main(["validate", "pairs", "--data", str(data), "--strategies", str(strategies), "--log", str(log),
                 "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr()
    assert "PASSED" in out.out + out.err
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["verdict"] == "PASSED"
    # Latencies are 80..119 ms, so the p99 is at most 119 ms and pscore = load(1) / p99 >= 3 / 0.119.
    assert summary["pscore"]["pscore"] >= 3 / 0.119


def test_dropped_extra_and_changed_rows_are_counted(run, tmp_path):
    data, strategies, _ = run
    sim_start = json.loads((data / "manifest.json").read_text())["start_epoch_ms"]
    exp = _expected(run)
    orders = exp["MarketOrder"].copy()
    assert len(orders) >= 3
    extra = orders.iloc[[0]].copy()
    extra["inputTickTS"] += 1                         # an order nobody expected
    orders.loc[orders.index[1], "price"] += 1         # a wrong price
    orders = pd.concat([orders.drop(orders.index[2]), extra], ignore_index=True)   # one missing
    exp["MarketOrder"] = orders
    log = write_log(tmp_path, exp, sim_start)
    assert main(["validate", "pairs", "--data", str(data), "--strategies", str(strategies), "--log", str(log),
                 "--out", str(tmp_path / "report")]) == 1
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    mo = next(c for c in summary["streams"] if c["stream"] == "MarketOrder")
    assert (mo["missing"], mo["undue"], mo["wrong"]) == (1, 1, 1)
    ind = next(c for c in summary["streams"] if c["stream"] == "Indicator")
    assert (ind["missing"], ind["undue"], ind["wrong"]) == (0, 0, 0)


def test_malformed_log_is_one_line(run, tmp_path):
    data, strategies, _ = run
    log = tmp_path / "outputs"
    log.mkdir()
    (log / "output-log.json").write_text('{"kind": "cepkit.output-log", "schema_version": 1')
    res = subprocess.run([sys.executable, "-m", "kit.cli", "validate", "pairs", "--data", str(data),
                          "--strategies", str(strategies), "--log", str(log), "--out", str(tmp_path / "r")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "output-log.json" in res.stderr
    assert "Traceback" not in res.stderr
