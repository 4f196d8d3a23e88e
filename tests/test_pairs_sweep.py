"""benchmarks/pairs_sweep.py without an engine: the engine and plan options, how a run is named and
labelled per engine, the stop rule, older sweeps' points, and the page's title."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from kit.errors import CepkitError
from tests.helpers import REPO


@pytest.fixture(scope="module")
def sw():
    # As `python benchmarks/pairs_sweep.py` runs it: its folder on the path (benchmarks_common).
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("pairs_sweep", REPO / "benchmarks" / "pairs_sweep.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return module


def test_the_plans_default_to_every_plan_of_the_engine(sw):
    assert sw.parse_plans(None, "spark") == ["keyed", "shared", "per-strategy"]      # as before --engine
    assert sw.parse_plans(None, "flink") == list(sw.PLANS_BY_ENGINE["flink"])
    assert sw.parse_plans("keyed, keyed", "flink") == ["keyed"]
    with pytest.raises(CepkitError, match="not a Pairs plan of flink"):
        sw.parse_plans("keyed,bogus", "flink")
    with pytest.raises(CepkitError, match="at least one"):
        sw.parse_plans(" , ", "spark")


def test_spark_keeps_its_names_and_flink_is_labelled(sw):
    assert (sw.series_name("keyed", "spark"), sw.run_name(4, "keyed", "spark")) == ("keyed", "sf4-keyed")
    assert (sw.series_name("keyed", "flink"), sw.run_name(4, "keyed", "flink")) == ("keyed (flink)", "sf4-keyed-flink")
    assert sw.sweep_title([{"engine": "spark"}]) == "Pairs scalability sweep on Spark"
    assert sw.sweep_title([{}, {"engine": "flink"}]) == "Pairs scalability sweep on Spark and Flink"


def test_each_run_is_on_the_engine_asked_whatever_set_says(sw):
    cfg = sw.sweep_config(["run.engine='spark'", "run.plan='shared'"], 11, "keyed", "flink")
    assert (cfg.run.engine, cfg.run.plan, cfg.pairs.scale_factor, cfg.pairs.rate.quick) == ("flink", "keyed", 11, True)
    assert sw.sweep_config([], 1, "per-strategy").run.engine == "spark"


def test_a_plan_stops_at_its_knee(sw):
    assert not sw.stops({"status": "completed", "order_p99_ms": 1999.0}, 2000)
    assert sw.stops({"status": "completed", "order_p99_ms": 2001.0}, 2000)
    assert not sw.stops({"status": "completed", "order_p99_ms": None}, 2000)
    assert sw.stops({"status": "unsustainable", "order_p99_ms": None}, 2000)
    assert sw.stops({"status": "failed", "order_p99_ms": 10.0}, 2000)


def test_points_of_an_older_sweep_are_spark_points(sw, tmp_path, capsys):
    old = tmp_path / "old.jsonl"
    old.write_text("progress line\n" + json.dumps({"sf": 1, "plan": "shared", "mean_eps": 6000, "peak_eps": 7500,
                                                    "strategies": 25, "cpu": 150, "rss_mib": 900, "status": "completed",
                                                    "verdict": "PASSED", "order_p99_ms": 700}) + "\n"
                   + json.dumps({"sf": 2, "series": "keyed (flink)", "engine": "flink", "mean_eps": 12000,
                                 "peak_eps": 15000, "strategies": 50, "status": "completed", "verdict": "PASSED"})
                   + "\n")
    rows = sw.read_points(old, None)
    assert [(r["series"], r["engine"]) for r in rows] == [("shared", "spark"), ("keyed (flink)", "flink")]
    assert rows[0]["cores"] == 1.5 and rows[0]["peak_rss_mib"] == 900
    sw.print_table(rows)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| engine | series | SF |")
    assert lines[2].startswith("| spark | shared | 1 | 6,000 / 7,500 | 25 |")
    assert lines[3].startswith("| flink | keyed (flink) | 2 |")


@pytest.mark.parametrize("args, message", [
    (("--engine", "storm"), "engine 'storm' is not known"),
    (("--engine", "flink", "--plans", "keyed,bogus"), "not a Pairs plan of flink"),
    (("--sfs", "1,x"), "invalid literal"),
    (("--set", "run.nope=1"), "nope"),
])
def test_bad_options_stop_before_any_run(args, message, tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "pairs_sweep.py"), *args, "--runs",
                           str(tmp_path / "runs")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "runs").exists()
