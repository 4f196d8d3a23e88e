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
from cepkit_app.cli import main
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
    res = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "validate", "pairs", "--data", str(data),
                          "--strategies", str(strategies), "--log", str(log), "--out", str(tmp_path / "r")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "output-log.json" in res.stderr
    assert "Traceback" not in res.stderr


# -- issue 14 --------------------------------------------------------------------------------

def _copy_dataset(data: Path, dst: Path) -> Path:
    import shutil
    shutil.copytree(data, dst)
    return dst


def _edit_manifest(ds: Path, change) -> None:
    m = json.loads((ds / "manifest.json").read_text())
    change(m)
    (ds / "manifest.json").write_text(json.dumps(m, indent=2))


def test_many_small_files_validate(tmp_path):
    """Finding 1: 1000 files of ~3 ticks at 50 ticks/s leave some read batches without a tick of
    any monitored symbol; on main `cepkit validate pairs` died in UFuncOutputCastingError."""
    data = tmp_path / "data"
    generate_pairs(pairs_config(file_count=1000, rate={"profile": "constant", "duration_s": 60.0,
                                                       "basis_rate_eps": 50.0}), data)
    strategies = tmp_path / "s.xml"
    write_strategies(load_aux(data), 42, strategies)
    assert main(["validate", "pairs", "--data", str(data), "--strategies", str(strategies),
                 "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "expected" / "Indicator.parquet").is_file()


def test_strategy_over_a_symbol_not_in_the_dataset(run, tmp_path):
    """Finding 8: on main the run validated (exit 0) against a strategy watching ZZZZZZ."""
    from tests.fuzz import expect_user_error
    data, strategies, _ = run
    text = strategies.read_text()
    sym = text.split('symbol1="', 1)[1].split('"', 1)[0]
    bad = tmp_path / "bad.xml"
    bad.write_text(text.replace(f'symbol1="{sym}"', 'symbol1="ZZZZZZ"', 1))
    line = expect_user_error(["validate", "pairs", "--data", str(data), "--strategies", str(bad),
                              "--out", str(tmp_path / "r")], watch=[data, bad, tmp_path],
                             names=[str(bad), "st_00001", "ZZZZZZ", "pairs-aux.json"])
    assert "is not a symbol of the dataset" in line
    # Without pairs-aux.json the dataset's symbols are those its ticks hold.
    ds = _copy_dataset(data, tmp_path / "noaux")
    (ds / "pairs-aux.json").unlink()
    _edit_manifest(ds, lambda m: m.update(aux_file=None))
    expect_user_error(["validate", "pairs", "--data", str(ds), "--strategies", str(bad),
                       "--out", str(tmp_path / "r")], watch=[ds, bad, tmp_path],
                      names=[str(bad), "st_00001", "ZZZZZZ", "no tick of it"])


def test_checksums_and_no_verify(run, tmp_path):
    """Finding 2: main never compared a file with its manifest's sha256."""
    from tests.fuzz import expect_user_error
    data, strategies, _ = run
    ds = _copy_dataset(data, tmp_path / "ds")
    _edit_manifest(ds, lambda m: m["files"][0].update(sha256="0" * 64))
    name = json.loads((ds / "manifest.json").read_text())["files"][0]["path"]
    expect_user_error(["validate", "pairs", "--data", str(ds), "--strategies", str(strategies),
                       "--out", str(tmp_path / "r")], watch=[ds, tmp_path], names=[name, "files[0].sha256"])
    # --no-verify trusts the checksums (and still checks presence, paths, sizes, Parquet rows).
    assert main(["validate", "pairs", "--data", str(ds), "--strategies", str(strategies), "--no-verify",
                 "--out", str(tmp_path / "r")]) == 0
    _edit_manifest(ds, lambda m: m["files"][0].update(rows=m["files"][0]["rows"] - 1))
    expect_user_error(["validate", "pairs", "--data", str(ds), "--strategies", str(strategies), "--no-verify",
                       "--out", str(tmp_path / "r2")], watch=[ds, tmp_path], names=[name, "files[0].rows"])


def test_duplicated_and_reordered_log_rows_are_counted(run, tmp_path):
    """Finding 4: repeated rows are undue answers marked "duplicate", reordered rows are fine."""
    data, strategies, _ = run
    sim_start = json.loads((data / "manifest.json").read_text())["start_epoch_ms"]
    exp = _expected(run)
    mo = exp["MarketOrder"]
    exp["MarketOrder"] = pd.concat([mo, mo.iloc[[0, 0, len(mo) - 1]]], ignore_index=True).iloc[::-1]
    exp["Indicator"] = exp["Indicator"].sample(frac=1.0, random_state=3)
    log = write_log(tmp_path, exp, sim_start)
    assert main(["validate", "pairs", "--data", str(data), "--strategies", str(strategies), "--log", str(log),
                 "--out", str(tmp_path / "report")]) == 1
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    streams = {c["stream"]: c for c in summary["streams"]}
    assert (streams["MarketOrder"]["undue"], streams["MarketOrder"]["duplicates"]) == (3, 3)
    assert streams["MarketOrder"]["missing"] == streams["MarketOrder"]["wrong"] == 0
    assert streams["Indicator"]["verdict"] == "PASSED"
    html = (tmp_path / "report" / "report.html").read_text()
    assert "3 (3 duplicates)" in html and 'class="outcome-duplicate"' in html


def test_malformed_log_leaves_no_report_behind(run, tmp_path):
    """On main the expected answers were written into --out before the log was read."""
    from tests.fuzz import expect_user_error
    data, strategies, _ = run
    sim_start = json.loads((data / "manifest.json").read_text())["start_epoch_ms"]
    exp = _expected(run)
    exp["MarketOrder"] = exp["MarketOrder"].drop(columns="size")
    log = write_log(tmp_path / "run", exp, sim_start)
    expect_user_error(["validate", "pairs", "--data", str(data), "--strategies", str(strategies), "--log", str(log),
                       "--out", str(tmp_path / "report")], watch=[tmp_path, data],
                      names=["MarketOrder-00001.parquet", "size"])
    assert not (tmp_path / "report").exists()
