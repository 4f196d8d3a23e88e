"""The microbenchmark suite report: points built by hand, output logs written by the real harness
sink (arrival stamps pinned by patching its clock), resources.csv files, adaptivity metrics from a
synthetic burst under the adaptivity profile. No Spark.
"""

from __future__ import annotations

import base64
import io
import re

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import harness.sink
from harness.sink import SinkServer
from kit.wire.sink_client import SinkClient
from kit.errors import CepkitError
from kit.profiles import adaptivity_profile
from validator.adaptivity import adaptivity_metrics
from validator.micro_report import WorkloadPoint, sweep_axis, write_suite_report
from validator.outputlog import read_output_log

W0 = 1_790_000_000_000
T0 = 1_767_623_400_000
CLOCKS = {"run_start_wall_ms": W0, "sim_start_ms": T0, "speed": 1.0}
# The adaptivity profile's shape in 67 s: warm-up 6 s, steady 30 s, peak 1 s at 1.5 lambda, recovery 30 s.
BURST = adaptivity_profile(20.0).scaled_to(67_000)
STEP_MS = 250


def burst_latencies() -> tuple[np.ndarray, np.ndarray]:
    """One input every 250 ms. Latency: warm-up 400 ms; steady 20/40 (mean 30); peak 600..900 ms;
    recovery falls from 900 ms to 25 ms over 3 s, then 20/40 again."""
    t = np.arange(0, BURST.duration_ms, STEP_MS)
    lat = np.where(np.arange(len(t)) % 2, 40, 20)
    lat[t < 6_000] = 400
    peak = (t >= 36_000) & (t < 37_000)
    lat[peak] = np.linspace(600, 900, peak.sum()).astype(int)
    falling = (t >= 37_000) & (t < 40_000)
    lat[falling] = np.linspace(900, 25, falling.sum()).astype(int)
    return t, lat


def table(input_ts) -> pa.Table:
    input_ts = np.atleast_1d(np.asarray(input_ts, dtype=np.int64))
    return pa.table({"ID": pa.array(np.arange(len(input_ts)), pa.int32()), "inputTS": pa.array(input_ts)})


def write_log(outputs, frames, streams=None) -> None:
    """Send (stream, arrival wall ms, rows) frames through the real sink, its clock set to each arrival."""
    now = {"ms": W0}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness.sink, "now_ms", lambda: now["ms"])
        with SinkServer(outputs, streams=streams) as sink, SinkClient(port=sink.port) as client:
            for batch, (stream, arrival, rows) in enumerate(frames):
                now["ms"] = int(arrival)
                client.emit(stream, batch, rows)
            sink.finish(CLOCKS)


def write_resources(run_dir, seconds: int, memory_columns: bool = True) -> None:
    s = np.arange(seconds)
    df = pd.DataFrame({"ts_ms": W0 + s * 1000, "cpu_percent": 50 + s % 7, "rss_bytes": (900 + 3 * s) * 2**20})
    if memory_columns:
        df["jvm_rss_bytes"] = (600 + 2 * s) * 2**20
        df["python_rss_bytes"] = (300 + s) * 2**20
    (run_dir / "metrics").mkdir(parents=True)
    df.to_csv(run_dir / "metrics" / "resources.csv", index=False)


def point(workload, experiment, params, **kw) -> WorkloadPoint:
    base = dict(queries=1, status="completed", verdict="PASSED", p50_ms=12, p99_ms=48, peak_rss_mib=1500.0,
                mean_cpu_percent=61.5, input_eps=1000.0, sustainable_eps=None, adaptivity=None,
                engine_dir=None, profile=None)
    return WorkloadPoint(workload, experiment, params, **(base | kw))


def none_point(workload, experiment, params) -> WorkloadPoint:
    return WorkloadPoint(workload, experiment, params, queries=1, status="failed", verdict="NOT VALIDATED",
                         p50_ms=None, p99_ms=None, peak_rss_mib=None, mean_cpu_percent=None, input_eps=None,
                         sustainable_eps=None, adaptivity=None, engine_dir=None, profile=None)


@pytest.fixture(scope="module")
def burst_run(tmp_path_factory):
    """A run directory with a two-stream output log of the burst and a full resources.csv."""
    run = tmp_path_factory.mktemp("burst")
    t, lat = burst_latencies()
    frames = [("Q2", W0 + ti + li, table(W0 + ti)) for ti, li in zip(t, lat)]
    frames += [("Q2b", W0 + ti + li + 5, table(W0 + ti)) for ti, li in zip(t[::4], lat[::4])]
    write_log(run / "outputs", sorted(frames, key=lambda f: f[1]))
    write_resources(run, 67)
    log = read_output_log(run / "outputs")
    return run, adaptivity_metrics(log.stream("Q2"), BURST, log.clocks)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, burst_run):
    run, metrics = burst_run
    quiet = tmp_path_factory.mktemp("quiet")        # a run whose query never matched
    write_log(quiet / "outputs", [], streams={"Q2": table([]).schema})
    write_resources(quiet, 10, memory_columns=False)
    sus = lambda eps, **kw: dict(sustainable_eps=eps, input_eps=None, **kw)  # noqa: E731
    points = [
        point("filter-sel-0.1", "selectivity", {"selectivity": "0.001", "attributes": "5"}, **sus(41_234.4)),
        point("filter-sel-1", "selectivity", {"selectivity": "0.01", "attributes": "5"}, **sus(38_000.0)),
        point("filter-sel-10", "selectivity", {"selectivity": "0.1", "attributes": "5"}, **sus(12_345.6)),
        none_point("filter-sel-50", "selectivity", {"selectivity": "0.5", "attributes": "5"}),
        *[point(f"cw-{rows}-{fn}", "functions", {"rows": str(rows), "expiration": "sliding", "function": fn},
                **sus(9_000.0 - rows - 100 * k, verdict="FAILED" if fn == "MEDIAN" and rows == 500 else "PASSED"))
          for rows in (50, 500) for k, fn in enumerate(("SUM", "MEDIAN"))],
        *[point(f"pat-{c}", "consumption", {"consumption": c}, **sus(5_000.0 + 250 * k))
          for k, c in enumerate(("all-all", "one-one", "all-one"))],
        point("tw-big", "big-window", {"range_ms": "3600000"}, **sus(777_777.0)),
        none_point("broken-a", "broken", {"n": "1"}),
        none_point("broken-b", "broken", {"n": "2"}),
        point("adaptivity-sliding", "adaptivity", {"expiration": "sliding"}, **sus(
            20.0, adaptivity=metrics, engine_dir=run, profile=BURST)),
        point("adaptivity-quiet", "adaptivity-quiet", {}, **sus(None, adaptivity=metrics, engine_dir=quiet,
                                                                profile=BURST)),
        point("adaptivity-gone", "adaptivity-gone", {}, **sus(None, adaptivity=metrics,
                                                              engine_dir=quiet / "missing", profile=None)),
    ]
    out = tmp_path_factory.mktemp("report")
    (out / "other.txt").write_text("kept")
    path = write_suite_report("Micro suite (synthetic)", "sustainable", points, out)
    return path, path.read_text(encoding="utf-8"), points, metrics


def images(html: str) -> list[np.ndarray]:
    srcs = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    return [mpimg.imread(io.BytesIO(base64.b64decode(s)), format="png") for s in srcs]


def table_rows(html: str, table_id: str) -> list[list[str]]:
    body = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S)]


def test_burst_metrics_come_from_the_sink_log(burst_run):
    _, m = burst_run
    assert m.steady_mean_ms == 30.0 and m.max_peak_latency_ms == 900
    assert m.tau_peak_wall_ms == W0 + 37_000 and m.recovered and 0 < m.recovery_time_ms < 5_000


def test_report_is_one_file_with_every_workload(suite):
    path, html, points, _ = suite
    assert path.name == "report.html" and (path.parent / "other.txt").read_text() == "kept"
    assert sorted(p.name for p in path.parent.iterdir()) == ["other.txt", "report.html"]
    assert "<h1>Micro suite (synthetic)</h1>" in html and "mode sustainable" in html
    for p in points:
        assert f"<td>{p.workload}</td>" in html
    rows = table_rows(html, "points-table")
    assert [r[0] for r in rows] == [p.workload for p in points]
    cards = dict(re.findall(r'<div class="label">(\w+)</div><div class="value">(\d+)</div>', html))
    assert cards == {"points": "17", "passed": "13", "failed": "1", "other": "3"}


def test_sustainable_numbers_and_missing_values(suite):
    _, html, _, _ = suite
    rows = {r[0]: r for r in table_rows(html, "points-table")}
    assert "<th class=\"n\">sustainable ev/s</th>" in html
    # No latency count (not validated): the latencies cell is a dash and the p99 a bare value.
    assert rows["filter-sel-0.1"][6:] == ["41,234", "–", "12", "48", "61.5", "1,500.0", "–"]
    assert rows["filter-sel-10"][6] == "12,346"
    # All-None points render with dashes everywhere a number goes.
    assert rows["broken-a"][3:] == ["1", "failed", "NOT VALIDATED", "–", "–", "–", "–", "–", "–", "–"]
    single = {r[1]: r for r in table_rows(html, "single-table")}
    assert set(single) == {"tw-big", "adaptivity-sliding", "adaptivity-quiet", "adaptivity-gone"}
    assert single["tw-big"][3] == "777,777"


def test_one_figure_per_chart_with_numeric_and_categorical_axes(suite):
    _, html, _, _ = suite
    # selectivity, functions and consumption sweeps; one burst scatter; one memory figure.
    pngs = images(html)
    assert len(pngs) == html.count("<img") == 5
    assert all(img.shape[0] > 200 and img.shape[1] > 800 for img in pngs)
    assert "x: selectivity (numeric, log scale)" in html
    assert "x: rows (numeric); one line per function" in html
    assert "x: consumption (categorical)" in html
    assert "Experiment broken: no point has a value to chart." in html
    assert html.index('id="exp-1"') < html.index("x: selectivity") < html.index("x: rows") < html.index("x: consum")


def test_adaptivity_section(suite):
    _, html, _, m = suite
    section = html.split('id="adaptivity"', 1)[1].split("</section>", 1)[0]
    for name in ("Maximum peak latency", "Peak latency degradation ratio", "Recovery time",
                 "Post-peak latency variation ratio"):
        assert section.count(f"<td>{name}</td>") == 3
    assert f"{m.recovery_time_ms / 1000:,.2f} s" in section and "900 ms" in section
    # The quiet run (empty outputs) and the missing one keep their metrics but get no scatter.
    assert section.count("<img") == 1 and "Latency around the peak (Fig 4.17)" in section
    assert "adaptivity-gone: no latency scatter, the output log cannot be read" in html
    assert "Memory over time" in html


def test_refuses_to_overwrite(suite):
    path, html, points, _ = suite
    with pytest.raises(CepkitError, match="already exists"):
        write_suite_report("again", "sustainable", points[:2], path.parent)
    assert path.read_text(encoding="utf-8") == html


def test_fixed_rate_mode_charts_p99(tmp_path):
    # A p99 of 6 latencies is their maximum, with only a lower 95 % bound; 1,000 give both bounds.
    counts = {"0.05": dict(latency_count=6, p99_ci_low_ms=900),
              "0.25": dict(latency_count=1000, p99_ci_low_ms=1_900, p99_ci_high_ms=2_100), "0.5": {}}
    points = [point(f"sel-{s}", "selectivity", {"selectivity": s}, p99_ms=p99, input_eps=10_000.0, **counts[s])
              for s, p99 in (("0.05", 1_234), ("0.25", 2_000), ("0.5", None))]
    points.append(none_point("alone", "alone", {}))
    # Two runs of the same workload: nothing varies, so each workload is a category.
    points += [point(f"again-{i}", "repeat", {"selectivity": "0.05"}, p99_ms=50 + i) for i in range(2)]
    html = write_suite_report("Fixed", "fixed-rate", points, tmp_path).read_text(encoding="utf-8")
    assert "<th class=\"n\">input ev/s</th>" in html and "p99 event-time latency (top)" in html
    assert "x: selectivity (numeric)" in html and "x: workload (categorical)" in html
    assert len(images(html)) == html.count("<img") == 2
    rows = {r[0]: r for r in table_rows(html, "points-table")}
    assert rows["sel-0.05"][6:10] == ["10,000", "6", "12", "1,234 (max of 6: too few; CI ≥ 900)"]
    assert rows["sel-0.25"][7:10] == ["1,000", "12", "2,000 (CI 1,900–2,100)"] and rows["sel-0.5"][9] == "–"
    with pytest.raises(CepkitError, match="6 samples give a 95 % interval with ranks"):
        point("bad", "e", {}, latency_count=6, p99_ci_low_ms=900, p99_ci_high_ms=2_000)
    assert "Memory over time" not in html and 'id="adaptivity"' not in html


def test_state_memory_gets_a_column_and_a_third_panel(tmp_path):
    # Tables 4.3-4.4: Q3 keeps every window's events, Q4 only pane partials.
    points = [point(f"{q}-{r}", "rate", {"query": q, "rate": r}, state_mib=mib, p99_ms=900)
              for q, r, mib in (("Q3", "500", 3.25), ("Q3", "5000", 30.5), ("Q4", "500", 0.5), ("Q4", "5000", 0.75))]
    points.append(point("stateless-a", "filter", {"s": "1"}))
    points.append(point("stateless-b", "filter", {"s": "2"}))
    html = write_suite_report("State", "fixed-rate", points, tmp_path).read_text(encoding="utf-8")
    rows = {r[0]: r for r in table_rows(html, "points-table")}
    assert rows["Q3-5000"][-1] == "30.50" and rows["Q4-500"][-1] == "0.50" and rows["stateless-a"][-1] == "–"
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html, re.S)
    assert ["state-store memory" in c for c in captions] == [True, False]
    three, two = images(html)[:2]
    # Same panel height: the figure with the state panel is half as tall again.
    assert abs(three.shape[0] / two.shape[0] - 1.5) < 0.05


def test_all_none_suite_renders_without_figures(tmp_path):
    points = [none_point(f"w{i}", "e", {"k": str(i)}) for i in range(3)]
    html = write_suite_report("Nothing measured", "sustainable", points, tmp_path).read_text(encoding="utf-8")
    assert "<img" not in html and "Experiment e: no point has a value to chart." in html
    assert [r[0] for r in table_rows(html, "points-table")] == ["w0", "w1", "w2"]
    assert "The suite has no points." in write_suite_report("Empty", "fixed-rate", [], tmp_path / "x").read_text()


def test_bad_arguments(tmp_path):
    with pytest.raises(CepkitError, match="mode must be one of"):
        write_suite_report("t", "fast", [], tmp_path)
    with pytest.raises(CepkitError, match="title must not be empty"):
        write_suite_report(" ", "sustainable", [], tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_sweep_axis_rules():
    pts = lambda *params, **kw: [point(f"w{i}", "e", p, **kw) for i, p in enumerate(params)]  # noqa: E731
    log = sweep_axis(pts({"rows": "500"}, {"rows": "50000"}, {"rows": "5000"}))
    assert (log.param, log.kind, log.labels, log.series) == ("rows", "log", ("500", "5000", "50000"), ())
    lin = sweep_axis(pts({"rows": "10", "f": "AVG"}, {"rows": "99", "f": "AVG"}, {"rows": "10", "f": "SUM"}))
    assert (lin.param, lin.kind, lin.series) == ("rows", "linear", ("f",))
    cat = sweep_axis(pts({"policy": "b"}, {"policy": "a"}, {"policy": "b"}))
    assert (cat.kind, cat.labels) == ("categorical", ("b", "a"))
    # rows_min follows queries one to one, so it does not make lines of its own.
    det = sweep_axis(pts({"queries": "1", "rows_min": "400"}, {"queries": "4", "rows_min": "425"}))
    assert (det.param, det.series) == ("queries", ())
    by_queries = sweep_axis([point("a", "e", {}, queries=1), point("b", "e", {}, queries=64)])
    assert (by_queries.param, by_queries.kind) == ("queries", "linear")
    assert sweep_axis(pts({}, {})).param == "workload"


def test_micro_summary_rows_give_the_count_and_p99_interval():
    """summary.md/summary.json of `cepkit micro`: per workload the number of latencies and the p99
    with its 95 % interval, in the words of validator.order_stats."""
    from types import SimpleNamespace

    from cepkit_app.pipelines.micro_summary import WorkloadResult, search_table, summary_table
    from validator.latency import latency_stats

    def result(name, latencies) -> WorkloadResult:
        s = latency_stats(np.asarray(latencies))
        return WorkloadResult(name, {"selectivity": "0.1"}, 1, "completed", "", "PASSED", 1000, 100.0, len(latencies),
                              s.p50_ms, s.p99_ms, 900.0, 50.0, "", latency_count=s.count,
                              p99_ci_low_ms=s.p99_ci_low_ms, p99_ci_high_ms=s.p99_ci_high_ms)

    few, many = result("few", [609, 402, 300, 250, 500, 200]), result("many", np.arange(1, 1001))
    unvalidated = WorkloadResult("sink", {}, 1, "completed", "", "NOT VALIDATED", 10, 1.0, 5, 7, 48, None, None, "")
    rows = summary_table([few, many, unvalidated]).splitlines()
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    cells = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")] for r in rows[2:]}
    n, p99 = head.index("latencies"), head.index("p99 ms (95 % CI)")
    assert (cells["few"][n], cells["few"][p99]) == ("6", "609 (max of 6: too few; CI ≥ 500)")
    assert (cells["many"][n], cells["many"][p99]) == ("1,000", "990 (CI 983–997)")
    assert (cells["sink"][n], cells["sink"][p99]) == ("-", "48")      # not validated: the sink's p99 alone
    row = few.to_dict()                                              # a summary.json row
    assert (row["latency_count"], row["p99_ms"], row["p99_ci_low_ms"], row["p99_ci_high_ms"]) == (6, 609, 500, None)
    # The search mode's rows come from the best step; one without the count shows the bare p99.
    step = SimpleNamespace(rate_eps=100.0, sustainable=True, p50_ms=3, p99_ms=9, peak_rss_mib=1.0, state_mib=None,
                           verdict="PASSED", latency_count=6, p99_ci_low_ms=8, p99_ci_high_ms=None,
                           connectors={"source": "jvm", "sink": "jvm"}, bound=None)
    search = SimpleNamespace(workload="w", sustainable_eps=100.0, confirmed=True, steps=(step,),
                             best_step=lambda: step, lowest_failing_eps=lambda: None, first_failing=lambda: None,
                             bound_text=lambda: "-", kit_bound=lambda: False)
    line = search_table([search]).splitlines()[2]
    assert "| 6 | 3 | 9 (max of 6: too few; CI ≥ 8) |" in line
    assert line.startswith("| w | 100 | none: every step kept up | yes |")


def test_the_page_leads_with_each_points_verdict_and_rate_and_folds_the_full_table_last(suite):
    _, html, points, _ = suite
    assert html.index('id="counts"') < html.index('id="headline-table"') < html.index('id="exp-1"') \
        < html.index('id="adaptivity"') < html.index('id="points-table"') < html.index('id="notes"')
    assert re.search(r'<section id="points">\s*<details class="long">', html)
    rows = {r[0]: r for r in table_rows(html, "headline-table")}
    assert list(rows) == [p.workload for p in points]
    assert rows["filter-sel-0.1"][1:] == ["PASSED", "41,234", "48", "not recorded", "not recorded"]
    assert rows["cw-500-MEDIAN"][1] == "FAILED"


def test_a_points_plan_and_bound_come_from_its_run_json_or_from_the_point(tmp_path):
    import json

    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "run.json").write_text(json.dumps({"plan": "by-kind", "verdict": {"verdict": "kit-bound", "part": "feed"}}))
    points = [point("w-recorded", "e", {"n": "1"}, engine_dir=engine),
              point("w-given", "e", {"n": "2"}, plan="driver", bound="engine"),
              point("w-none", "e", {"n": "3"}, engine_dir=tmp_path / "gone")]
    html = write_suite_report("facts", "fixed-rate", points, tmp_path / "out").read_text()
    rows = {r[0]: r[-2:] for r in table_rows(html, "headline-table")}
    assert rows == {"w-recorded": ["by-kind", "kit-bound (feed)"], "w-given": ["driver", "engine"],
                    "w-none": ["not recorded", "not recorded"]}
