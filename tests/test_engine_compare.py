"""benchmarks/engine_compare.py without an engine: outcomes (fakes of the pipelines' results)
turned into points, the side-by-side tables, the chart."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import SimpleNamespace

import pytest

from cepkit_app.pipelines.micro_summary import WorkloadResult
from tests.helpers import REPO


@pytest.fixture(scope="module")
def ec():
    # As `python benchmarks/engine_compare.py` runs it: its folder on the path (benchmarks_common).
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("engine_compare", REPO / "benchmarks" / "engine_compare.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return module


# A pscore block as report/summary.json holds it: p99 310 ms over 1,000 orders, CI 290-340 ms.
PSCORE = {"scale_factor": 1, "load": 3, "p99_latency_s": 0.31, "pscore": 3 / 0.31, "mi_rows": 1000,
          "mi_start_ms": 0, "mi_end_ms": 60_000, "p99_ci_low_ms": 290, "p99_ci_high_ms": 340,
          "pscore_ci_low": 3 / 0.34, "pscore_ci_high": 3 / 0.29}


def _pairs_outcome(status="completed", verdict="PASSED", pscore=3 / 0.31, p99_ms=310.0):
    engine = SimpleNamespace(mean_cpu_percent=151.26, peak_rss_bytes=1536 * 2**20, duration_s=142.04)
    return SimpleNamespace(run_dir="runs/x/pairs-sf1/spark", status=status, message="", verdict=verdict,
                           pscore=pscore, p99_ms=p99_ms, engine=engine)


def _workload_result(name="filtering-selectivity-5pct", **kw):
    fields = dict(workload=name, params={}, queries=1, status="completed", message="", verdict="PASSED",
                  events=10_000, input_eps=500.0, outputs=40, p50_ms=12, p99_ms=752, peak_rss_mib=900.4,
                  mean_cpu_percent=80.0, text="", latency_count=5, p99_ci_low_ms=402, p99_ci_high_ms=None)
    return WorkloadResult(**{**fields, **kw})


def test_a_pairs_point_takes_the_p99_and_its_interval_from_the_summary(ec):
    pt = ec.pairs_point("spark", 1, _pairs_outcome(), PSCORE, 200.04)
    assert pt["bench"] == "pairs" and pt["engine"] == "spark" and pt["sf"] == 1
    assert (pt["p99_ms"], pt["orders"], pt["p99_ci_low_ms"], pt["p99_ci_high_ms"]) == (310, 1000, 290, 340)
    assert pt["peak_rss_mib"] == 1536.0 and pt["mean_cpu_percent"] == 151.26 and pt["duration_s"] == 142.04
    assert pt["wall_s"] == 200.0 and pt["verdict"] == "PASSED"
    json.dumps(pt)      # one JSON line as it is


def test_an_unvalidated_pairs_run_has_no_interval(ec):
    pt = ec.pairs_point("flink", 4, _pairs_outcome("unsustainable", "NOT VALIDATED", None, None), None, 10)
    assert pt["p99_ms"] is None and pt["orders"] is None and pt["pscore"] is None
    rows = ec.side_by_side([pt], "sf", ["flink"], ec.PAIRS_MEASURES)
    cells = {r[1]: r[2] for r in rows}
    assert cells["verdict"] == "NOT VALIDATED (unsustainable)"
    assert cells["MarketOrder p99 ms (95 % CI)"] == "–" and cells["pscore (95 % CI)"] == "–"


def test_pairs_rows_are_sf_by_measure_with_one_column_per_engine(ec):
    points = [ec.pairs_point("spark", 1, _pairs_outcome(), PSCORE, 1),
              ec.pairs_point("flink", 1, _pairs_outcome(), PSCORE, 1),
              ec.pairs_point("spark", 4, _pairs_outcome(), PSCORE, 1)]
    rows = ec.side_by_side(points, "sf", ["spark", "flink"], ec.PAIRS_MEASURES)
    n = len(ec.PAIRS_MEASURES)
    assert len(rows) == 2 * n
    assert [r[0] for r in rows] == ["1"] + [""] * (n - 1) + ["4"] + [""] * (n - 1)
    by = {(r[0] or "?", r[1]): r[2:] for r in rows}
    assert rows[1][2:] == ["310 (CI 290–340)", "310 (CI 290–340)"]
    assert rows[2][2:] == ["1,000", "1,000"]
    assert rows[3][2] == "9.68 (CI 8.82–10.34)"
    assert by[("4", "verdict")] == ["PASSED", "–"]        # flink has no SF 4 point
    assert rows[n + 4:n + 7] == [["", "mean CPU (% of one core)", "151", "–"], ["", "peak RSS (MiB)", "1,536", "–"],
                                 ["", "duration (s)", "142.0", "–"]]


def test_micro_points_and_rows(ec):
    a = ec.micro_point("spark", "filtering", _workload_result(), 31.25, 40, "runs/x/m/spark")
    b = ec.micro_point("flink", "filtering", _workload_result(status="not translated", verdict="NOT VALIDATED",
                                                                p50_ms=None, p99_ms=None, latency_count=None,
                                                                p99_ci_low_ms=None, peak_rss_mib=None,
                                                                mean_cpu_percent=None, message="no Q7 yet"),
                       None, 1, "runs/x/m/flink")
    assert a["workload"] == "filtering-selectivity-5pct" and a["suite"] == "filtering" and a["latency_count"] == 5
    rows = {r[1]: r[2:] for r in ec.side_by_side([a, b], "workload", ["spark", "flink"], ec.MICRO_MEASURES)}
    assert rows["verdict"] == ["PASSED", "NOT VALIDATED (not translated)"]
    assert rows["latencies"] == ["5", "–"]
    assert rows["p50 ms"] == ["12", "–"]
    assert rows["p99 ms (95 % CI)"] == ["752 (max of 5: too few; CI ≥ 402)", "–"]
    assert rows["peak RSS (MiB)"] == ["900", "–"] and rows["duration (s)"] == ["31.2", "–"]


def test_the_tables_text_names_what_did_not_complete(ec):
    ok = ec.pairs_point("spark", 1, _pairs_outcome(), PSCORE, 1)
    err = ec.error_point("pairs", "flink", {"sf": 1}, RuntimeError("no JVM\nsecond line"), 3.0, "runs/x")
    assert err["status"] == "error" and err["message"] == "RuntimeError: no JVM"
    micro = ec.micro_point("spark", "joins", _workload_result("joins-j1-window-size-s100"), 5.0, 9, "runs/y")
    text = ec.tables([ok, err, micro], ["spark", "flink"])
    assert "## Pairs, quick profile" in text and "## Microbenchmarks" in text
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("| SF"))
    assert [c.strip() for c in head.split("|")[1:-1]] == ["SF", "", "spark", "flink"]
    assert "- Pairs SF 1 on flink: error: RuntimeError: no JVM" in lines
    assert any(line.startswith("| joins-j1-window-size-s100 | verdict") for line in lines)
    # Every row of a table has the same width (padded Markdown).
    table = [line for line in lines if line.startswith("|")]
    assert len({len(line) for line in table[:2 + len(ec.PAIRS_MEASURES)]}) == 1


def test_read_pscore_and_engine_duration(ec, tmp_path):
    assert ec.read_pscore(tmp_path) is None and ec.engine_duration(tmp_path) is None
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "summary.json").write_text(json.dumps({"pscore": PSCORE}))
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "run.json").write_text(json.dumps({"timings": {"duration_s": 12.5}}))
    assert ec.read_pscore(tmp_path) == PSCORE and ec.engine_duration(tmp_path) == 12.5
    (tmp_path / "engine" / "run.json").write_text("{not json")
    assert ec.engine_duration(tmp_path) is None


def test_the_chart(ec, tmp_path):
    assert ec.draw_chart([], ["spark"], tmp_path / "none.png") is None
    points = [ec.pairs_point(e, sf, _pairs_outcome(), PSCORE, 1) for e in ("spark", "flink") for sf in (1, 4)]
    points.append(ec.micro_point("spark", "filtering", _workload_result(), 1.0, 1, "r"))
    path = ec.draw_chart(points, ["spark", "flink"], tmp_path / "c.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
