"""benchmarks/pairs_sweep.py --repeat K without an engine: a point of repeated runs is their median
and range over the runs that completed and PASSED, valid only when every run was, and the stop rule
reads its median; a bad --repeat stops the sweep before any run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO
from tests.test_pairs_sweep import sw  # noqa: F401 (fixture)
from validator.compare_runs import spread
from validator.sweep_page import SweepPoint


def _row(i: int, p99: float | None, pscore: float | None, verdict: str = "PASSED", status: str = "completed") -> dict:
    return {"series": "keyed", "engine": "spark", "sf": 4, "plan": "keyed", "mean_eps": 24_000.0, "peak_eps": 30_000.0,
            "strategies": 100, "order_p99_ms": p99, "pscore": pscore, "cores": 1.0 + i / 10, "peak_rss_mib": 1000.0 + i,
            "status": status, "verdict": verdict, "wall_s": 100.0, "run": f"runs/sf4-keyed/run-{i}"}


def _doc(rows: list[dict]) -> dict:
    """The spread part of a repeat.json over `rows` (as cepkit_app.pipelines.repeat writes it)."""
    counted = [r for r in rows if r["status"] == "completed" and r["verdict"] == "PASSED"]
    return {"spread": [{"engine": "spark", **{key: spread([r[name] for r in counted if r[name] is not None],
                                                          len(rows)).to_dict()
                                              for key, name in (("p99_ms", "order_p99_ms"), ("pscore", "pscore"))}}]}


def test_a_point_of_repeated_runs_is_their_median_and_range(sw):  # noqa: F811
    rows = [_row(1, 640.0, 30.0), _row(2, 580.0, 33.0), _row(3, 700.0, 27.0)]
    point = sw.repeated_row(rows, _doc(rows), Path("runs/sf4-keyed"))
    assert (point["order_p99_ms"], point["order_p99_low"], point["order_p99_high"]) == (640.0, 580.0, 700.0)
    assert (point["pscore"], point["pscore_low"], point["pscore_high"]) == (30.0, 27.0, 33.0)
    assert point["order_p99_text"] == "640 [580–700] (median of 3 runs)"
    assert point["pscore_text"] == "30.00 [27.00–33.00] (median of 3 runs)"
    assert (point["repeat"], point["counted"], point["status"], point["verdict"]) == (3, 3, "completed", "PASSED")
    assert point["cores"] == 1.2 and point["wall_s"] == 300.0 and point["runs"] == rows
    assert SweepPoint.from_dict(point).valid and not sw.stops(point, 2000)


def test_a_run_that_did_not_pass_leaves_the_median_and_marks_the_point(sw):  # noqa: F811
    rows = [_row(1, 640.0, 30.0), _row(2, 50.0, 400.0, verdict="FAILED"), _row(3, 3000.0, None, "NOT VALIDATED",
                                                                                "unsustainable")]
    point = sw.repeated_row(rows, _doc(rows), Path("runs/sf4-keyed"))
    assert (point["order_p99_ms"], point["counted"], point["repeat"]) == (640.0, 1, 3)
    assert point["order_p99_text"] == "640 [640–640] (median of 1 of 3 runs)"
    assert (point["status"], point["verdict"]) == ("unsustainable", "FAILED")
    assert not SweepPoint.from_dict(point).valid and sw.stops(point, 2000)     # the plan ends here
    none = [_row(1, 640.0, 30.0, verdict="FAILED")]
    p = sw.repeated_row(none, _doc(none), Path("x"))
    assert p["order_p99_ms"] is None and p["order_p99_text"] == "– (no completed, PASSED run of 1)"
    assert SweepPoint.from_dict(p).order_p99_low is None


def test_a_bad_repeat_stops_before_any_run(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "pairs_sweep.py"), "--repeat", "0", "--runs",
                           str(tmp_path / "runs")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--repeat: must be a whole number >= 1, got '0'" in proc.stderr
    assert not (tmp_path / "runs").exists()
