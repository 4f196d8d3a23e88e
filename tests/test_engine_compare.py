"""benchmarks/engine_compare.py without an engine: outcomes (fakes of the pipelines' results)
turned into points, the side-by-side tables, the chart, the sustainable-throughput points, the
closing summary (highest SF under 1 s, sustainable rates) and the search options' checks."""

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


@pytest.fixture(scope="module")
def sc(ec):
    """benchmarks/sustainable_compare.py, as engine_compare.py imported it (its search points)."""
    return sys.modules["sustainable_compare"]


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


# -- the sustainable-throughput searches and the closing summary ---------------------------------

def _search(confirmed=True, rates=((4000, True), (16000, False), (8000, True), (7200, True))):
    """A SearchResult as the pipeline returns it: steps (rate per stream, kept up?), the last the confirmation."""
    from cepkit_app.pipelines.sustainable import SearchResult, Step

    steps = tuple(Step(n, float(rate), "confirm" if n == len(rates) else "explore", ok, "", "completed", "PASSED",
                       10, 100, 5, 9, 800.0, 90.0, f"runs/s/step-{n}")
                  for n, (rate, ok) in enumerate(rates, 1))
    best = max((s.rate_eps for s in steps if s.sustainable and s.purpose != "confirm"), default=None)
    return SearchResult("joins-j1-window-size-s100", best if confirmed else None, confirmed, steps)


def _j1():
    from kit.shipped import suite_path
    from kit.workload import read_suite

    return read_suite(suite_path("joins", quick=True)).workloads[0]


def test_a_search_point_gives_rates_over_all_streams(sc):
    from cepkit_app.pipelines.sustainable import SearchConfig

    search = SearchConfig(duration_s=5, max_steps=4)
    p = sc.search_point("flink", "joins", _j1(), _search(), search, 61.04, "runs/x/sustainable-j1/flink")
    assert p["bench"] == "sustainable" and p["streams"] == 2              # J1 joins two streams
    assert (p["sustainable_eps"], p["best_eps"], p["lowest_failing_eps"]) == (16000, 16000, 32000)
    assert p["confirmed"] and p["steps"] == 4 and p["verdict"] == "CONFIRMED" and p["wall_s"] == 61.0
    assert (p["step_seconds"], p["max_steps"]) == (5, 4)
    json.dumps(p)


def test_the_sustainable_cell_says_what_kind_of_figure_it_is(ec, sc):
    from cepkit_app.pipelines.sustainable import SearchConfig

    search_point = sc.search_point

    search, w = SearchConfig(duration_s=5, max_steps=4), _j1()
    found = search_point("spark", "joins", w, _search(), search, 1, "r")
    assert ec.SEARCH_MEASURES[0][1](found) == "16,000"
    # Every rate tried kept up (a 2-step search): the rate is a lower bound.
    up = search_point("spark", "joins", w, _search(rates=((4000, True), (3600, True))), search, 1, "r")
    assert ec.SEARCH_MEASURES[0][1](up) == "8,000 (lower bound: every rate tried kept up)"
    # The confirmation failed: the best step, marked.
    unconf = search_point("spark", "joins", w, _search(False, ((4000, True), (16000, False), (3600, False))),
                          search, 1, "r")
    assert ec.SEARCH_MEASURES[0][1](unconf) == "8,000 (not confirmed)"
    none = search_point("spark", "joins", w, _search(False, ((4000, False), (1000, False))), search, 1, "r")
    assert ec.SEARCH_MEASURES[0][1](none) == "none kept up (lowest tried 2,000)"
    err = ec.error_point("sustainable", "flink", {"suite": "joins", "workload": w.name}, OSError("disk"), 1, "r")
    rows = {r[1]: r[2:] for r in ec.side_by_side([found, err], "workload", ["spark", "flink"], ec.SEARCH_MEASURES)}
    assert rows["sustainable ev/s (all streams)"] == ["16,000", "–"]
    assert rows["confirmed"] == ["yes", "– (error)"] and rows["steps"] == ["4", "–"]
    assert rows["lowest failing ev/s"] == ["32,000", "–"]


def _pairs_at(ec, engine, sf, p99_ms, status="completed", verdict="PASSED"):
    pscore = {**PSCORE, "p99_latency_s": p99_ms / 1000} if p99_ms is not None else None
    return ec.pairs_point(engine, sf, _pairs_outcome(status, verdict, p99_ms=p99_ms), pscore, 1)


def test_the_highest_sf_under_one_second(ec):
    under = [_pairs_at(ec, "flink", sf, ms) for sf, ms in ((1, 113), (4, 144), (11, 175))]
    assert ec.highest_sf_under(under, "flink") == "above the largest tried (every SF under 1 s, up to SF 11)"
    knee = [_pairs_at(ec, "spark", sf, ms) for sf, ms in ((1, 656), (4, 1200), (11, 995))]
    assert ec.highest_sf_under(knee, "spark") == "SF 11"        # the highest under 1 s, as the sweep page says
    past = [_pairs_at(ec, "spark", sf, ms) for sf, ms in ((1, 656), (4, 999), (11, 1000))]
    assert ec.highest_sf_under(past, "spark") == "SF 4"         # 1,000 ms is not under 1 s
    # A run that did not complete or failed validation has no p99 to count; it is named.
    holes = [_pairs_at(ec, "flink", 1, 120), _pairs_at(ec, "flink", 4, 130, "completed", "FAILED"),
             _pairs_at(ec, "flink", 11, None, "unsustainable", "NOT VALIDATED")]
    assert ec.highest_sf_under(holes, "flink") == "SF 1; no valid p99 at SF 4, 11"
    err = ec.error_point("pairs", "flink", {"sf": 1}, RuntimeError("x"), 1, "r")
    assert ec.highest_sf_under([err], "flink") == "none (no SF tried had a valid p99 under 1 s); no valid p99 at SF 1"
    assert ec.highest_sf_under([_pairs_at(ec, "spark", 1, 1500)], "spark") == \
        "none (no SF tried had a valid p99 under 1 s)"
    assert ec.highest_sf_under(under, "spark") == "–"           # no Pairs runs on that engine


def test_the_closing_tables_end_with_the_summary(ec, sc):
    from cepkit_app.pipelines.sustainable import SearchConfig

    search_point = sc.search_point

    points = [_pairs_at(ec, e, sf, ms) for e, sf, ms in (("spark", 1, 656), ("spark", 4, 1747), ("flink", 1, 113),
                                                          ("flink", 4, 144))]
    points.append(search_point("flink", "joins", _j1(), _search(), SearchConfig(duration_s=5, max_steps=4), 1, "r"))
    text = ec.tables(points, ["spark", "flink"])
    assert "## Maximum sustainable throughput, first workload of each quick suite" in text
    summary = text.split("## Summary\n\n", 1)[1].splitlines()
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in summary if line.startswith("| ")]
    assert cells[0] == ["", "spark", "flink"]
    assert cells[1] == ["highest Pairs SF with MarketOrder p99 < 1 s", "SF 1",
                        "above the largest tried (every SF under 1 s, up to SF 4)"]
    assert cells[2] == ["sustainable ev/s: joins-j1-window-size-s100", "–", "16,000"]
    # Without Pairs runs the summary has only the searches; without either, no summary.
    assert "highest Pairs SF" not in ec.tables(points[-1:], ["flink"])
    assert "## Summary" not in ec.tables([ec.micro_point("spark", "filtering", _workload_result(), 1.0, 1, "r")],
                                         ["spark"])


def test_the_recorder_prints_a_search(ec, sc, tmp_path, capsys):
    from cepkit_app.pipelines.sustainable import SearchConfig

    search_point = sc.search_point

    rec = ec.Recorder(tmp_path)
    rec.add(search_point("flink", "joins", _j1(), _search(), SearchConfig(duration_s=5, max_steps=4), 1, "r"))
    assert "joins-j1-window-size-s100 (sustainable throughput) on flink: 16,000 ev/s, confirmed yes, 4 steps" in \
        capsys.readouterr().err
    assert json.loads((tmp_path / "engine_compare.jsonl").read_text())["bench"] == "sustainable"


def _script(*args, cwd):
    import subprocess

    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "engine_compare.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, message", [
    (("--search-max-steps", "1"), "max_steps must be >= 2"),
    (("--search-step-seconds", "0"), "duration_s must be > 0"),
    (("--search-start-rate", "-5"), "--search-start-rate: must be > 0"),
    (("--search-suites", "filtering,nope"), "--search-suites: unknown suite(s) nope"),
    (("--suites", "nope"), "--suites: unknown suite(s) nope"),
])
def test_bad_search_options_are_one_line_before_any_run(args, message, tmp_path):
    proc = _script(*args, "--runs", str(tmp_path / "runs"), cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "runs").exists()


def test_spark_in_real_time_mode_is_a_column_of_its_own(ec):
    assert ec.parse_columns("spark, spark-realtime,pyspark,flink") == ["spark", "spark-realtime", "flink"]
    assert ec.column_run("spark-realtime", ["run.shuffle_partitions=1"]) == (
        "spark", ["run.shuffle_partitions=1", 'run.trigger="realtime"'])
    assert ec.column_run("flink", []) == ("flink", [])
    with pytest.raises(ec.CepkitError, match="unknown engine|engine"):
        ec.parse_columns("spark,storm")
