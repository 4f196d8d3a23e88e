"""Long-run health (validator/health.py): the growth-per-hour fit and its flags on synthetic series,
the strict reader of metrics/health.csv, and the section it gives the Pairs and micro reports."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import validator.health as vh
from harness.health import HEALTH_COLUMNS as HARNESS_COLUMNS
from kit.errors import CepkitError
from kit.profiles import standard_profile
from validator.health import (BY_DESIGN, FEW, GROWS, HEALTH_COLUMNS, NO_DATA, OK, health_growth, metrics_dir,
                              read_health, read_health_report, slope_per_h, table_rows)
from validator.health_plots import plot_health
from validator.micro_report import WorkloadPoint, write_suite_report
from validator.outputlog import Clocks
from validator.report_page import ReportInputs, write_report

MIB = 2**20
W0 = 1_790_000_000_000
HOUR_MS = 3_600_000


def frame(minutes: float, interval_s: float = 5.0, **series) -> pd.DataFrame:
    """A health.csv frame of `minutes`, one row per interval; each keyword a function of the hours
    since the first sample (columns not given are flat)."""
    t_ms = np.arange(0, minutes * 60_000 + 1, interval_s * 1000).astype(np.int64)
    h = t_ms / HOUR_MS
    flat = {"harness_rss_bytes": 200 * MIB, "driver_rss_bytes": 150 * MIB, "jvm_rss_bytes": 1500 * MIB,
            "python_rss_bytes": 400 * MIB, "state_bytes": 30 * MIB, "checkpoint_bytes": 40 * MIB,
            "checkpoint_files": 900, "output_bytes": 10 * MIB, "sample_ms": 3.0}
    cols = {"ts_ms": W0 + t_ms}
    for c in HEALTH_COLUMNS[1:]:
        cols[c] = np.asarray(series[c](h), np.float64) if c in series else np.full(len(t_ms), float(flat[c]))
    return pd.DataFrame(cols)


def growth_of(report, column):
    return next(g for g in report.series if g.series.column == column)


def write_csv(path, df: pd.DataFrame) -> None:
    """As the harness writes it: whole numbers but sample_ms, empty cells for NaN."""
    lines = [",".join(HEALTH_COLUMNS)]
    for row in df.itertuples(index=False):
        lines.append(",".join("" if np.isnan(v) else f"{v:.1f}" if c == "sample_ms" else str(int(round(v)))
                              for c, v in zip(HEALTH_COLUMNS, map(float, row))))
    path.write_text("\n".join(lines) + "\n")


# -- the fit and the flags ---------------------------------------------------------------------

def test_the_validator_reads_the_columns_the_harness_writes():
    assert HEALTH_COLUMNS == HARNESS_COLUMNS


def test_slope_is_the_least_squares_line_per_hour():
    ts = W0 + np.array([0, 1, 2, 3]) * HOUR_MS // 2           # every half hour
    slope, at0 = slope_per_h(ts, np.array([10.0, 12.0, 14.0, 16.0]))
    assert slope == pytest.approx(4.0) and at0 == pytest.approx(10.0)
    slope, _ = slope_per_h(ts, np.array([1.0, 3.0, 1.0, 3.0]))        # zigzag: 0.4 of its step per half hour
    assert slope == pytest.approx(np.polyfit(np.arange(4) / 2, [1, 3, 1, 3], 1)[0])


def test_flat_series_are_ok_and_their_level_is_the_median():
    report = health_growth(frame(120, jvm_rss_bytes=lambda h: 1500 * MIB + (np.arange(len(h)) % 2) * 8 * MIB))
    assert [g.flag for g in report.series] == [OK] * 7 + [OK]
    jvm = growth_of(report, "jvm_rss_bytes")
    assert abs(jvm.growth_per_h) < 0.1 * MIB and jvm.level in (1500 * MIB, 1504 * MIB, 1508 * MIB)
    assert not report.short and report.short_note() is None
    assert report.interval_s == 5.0 and report.fit_span_s == pytest.approx(0.75 * 7200)


def test_a_leak_is_flagged_with_its_growth_per_hour():
    # 100 MiB/h on a 1 GiB JVM (10 % of the level is ~107 MiB/h at the median: flagged only with a faster leak).
    report = health_growth(frame(120, jvm_rss_bytes=lambda h: 1024 * MIB + 200 * MIB * h,
                                 checkpoint_files=lambda h: 900 + 20_000 * h))
    jvm = growth_of(report, "jvm_rss_bytes")
    assert jvm.growth_per_h == pytest.approx(200 * MIB, rel=1e-6) and jvm.flag == GROWS
    assert jvm.growth_pct_per_h == pytest.approx(100 * 200 / (1024 + 200 * 1.25), rel=1e-3)
    files = growth_of(report, "checkpoint_files")
    assert files.flag == GROWS and files.growth_per_h == pytest.approx(20_000)
    assert [g.series.column for g in report.growing] == ["jvm_rss_bytes", "checkpoint_files"]


@pytest.mark.parametrize("column, per_h, flag", [
    ("harness_rss_bytes", 60 * MIB, OK),         # 30 % of its level per hour, but under the 64 MiB/h floor
    ("harness_rss_bytes", 70 * MIB, GROWS),
    ("jvm_rss_bytes", 100 * MIB, OK),            # over the floor, but under 10 % of 1.5 GiB
    ("state_bytes", 0.9 * MIB, OK),              # a tiny state: under the 1 MiB/h floor
    ("state_bytes", 4 * MIB, GROWS),
    ("checkpoint_files", 99, OK),
    ("output_bytes", 500 * MIB, BY_DESIGN),      # append-only: never a problem
])
def test_both_the_relative_and_the_absolute_threshold_must_be_passed(column, per_h, flag):
    base = {"harness_rss_bytes": 200 * MIB, "jvm_rss_bytes": 1500 * MIB, "state_bytes": 1 * MIB,
            "checkpoint_files": 50, "output_bytes": 10 * MIB}[column]
    report = health_growth(frame(120, **{column: lambda h: base + per_h * h}))
    g = growth_of(report, column)
    assert g.growth_per_h == pytest.approx(per_h, rel=1e-6) and g.flag == flag


def test_a_triangle_wave_load_with_no_trend_is_not_a_leak():
    """The standard profile: the JVM's RSS follows the rate (peak -> basis -> peak -> basis -> peak)
    with a 600 MiB swing, around no trend. After the warm-up the fit leaves a tilt of ~9 % of the
    swing per hour (the window starts near a trough and ends at a peak), far under 10 % of the level."""
    profile = standard_profile(1000.0, 2000.0)
    rate = lambda h: profile.rate_at(np.minimum(h * HOUR_MS, profile.duration_ms - 1))   # noqa: E731
    report = health_growth(frame(121, jvm_rss_bytes=lambda h: 1200 * MIB + 600 * MIB * (rate(h) - 1000) / 1000))
    jvm = growth_of(report, "jvm_rss_bytes")
    assert jvm.flag == OK
    assert abs(jvm.growth_per_h) == pytest.approx(0.088 * 600 * MIB, rel=0.1)
    # A real leak on top of the same wave is found.
    report = health_growth(frame(121, jvm_rss_bytes=lambda h: 1200 * MIB + 600 * MIB * (rate(h) - 1000) / 1000
                                 + 300 * MIB * h))
    assert growth_of(report, "jvm_rss_bytes").flag == GROWS


def test_the_warm_up_leaves_out_what_settles_early():
    # The heap grows for 25 minutes, then stays: not a leak. Without the warm-up it would look like one.
    report = health_growth(frame(120, jvm_rss_bytes=lambda h: 800 * MIB + 800 * MIB * np.minimum(h / (25 / 60), 1)))
    assert growth_of(report, "jvm_rss_bytes").flag == OK
    assert report.fit_from_ms - report.first_ms == 30 * 60_000


def test_a_short_run_says_its_figures_are_weak():
    report = health_growth(frame(2, jvm_rss_bytes=lambda h: 1000 * MIB + 600 * MIB * h))
    assert report.short and "2.0 min" in report.short_note() and "weak" in report.short_note()
    jvm = growth_of(report, "jvm_rss_bytes")
    assert jvm.growth_per_h == pytest.approx(600 * MIB) and jvm.flag == GROWS     # computed all the same
    rows = table_rows(report)
    assert all(r["weak"] for r in rows) and rows[2]["growth"] == "+600.0 MiB/h"


def test_too_few_samples_and_empty_columns():
    df = frame(0.25)                                          # 4 rows: 2 after the warm-up
    df["state_bytes"] = np.nan                                # a checkpoint this machine does not see
    report = health_growth(df)
    assert growth_of(report, "jvm_rss_bytes").flag == FEW and growth_of(report, "jvm_rss_bytes").level == 1500 * MIB
    assert growth_of(report, "state_bytes").flag == NO_DATA
    assert health_growth(df.iloc[:0]) is None
    # Gaps (a restarting engine) are skipped, not zeros.
    df = frame(60)
    df.loc[200:260, "jvm_rss_bytes"] = np.nan
    g = growth_of(health_growth(df), "jvm_rss_bytes")
    assert g.flag == OK and g.samples == len(df[df.ts_ms >= W0 + 15 * 60_000]) - 61


# -- the strict reader --------------------------------------------------------------------------

def test_read_health_round_trip_with_empty_cells(tmp_path):
    df = frame(10)
    df.loc[3, "driver_rss_bytes"] = np.nan
    write_csv(tmp_path / "health.csv", df)
    got = read_health(tmp_path / "health.csv")
    assert list(got.columns) == list(HEALTH_COLUMNS) and got["ts_ms"].dtype == np.int64
    assert np.isnan(got.loc[3, "driver_rss_bytes"]) and got.loc[4, "driver_rss_bytes"] == 150 * MIB
    assert read_health(tmp_path / "missing.csv") is None and read_health_report(tmp_path / "missing.csv") is None
    # Extra columns (a later harness) are ignored; an empty file of the right header has no report.
    (tmp_path / "extra.csv").write_text(",".join(HEALTH_COLUMNS) + ",later\n" + "1,2,3,4,5,6,7,8,9,1.5,x\n")
    assert read_health(tmp_path / "extra.csv").loc[0, "sample_ms"] == 1.5
    (tmp_path / "header.csv").write_text(",".join(HEALTH_COLUMNS) + "\n")
    assert read_health_report(tmp_path / "header.csv") is None


HEADER = ",".join(HEALTH_COLUMNS)
GOOD = "1790000000000,1,2,3,4,5,6,7,8,1.5"


@pytest.mark.parametrize("text, where, says", [
    ("", ":1:", "no header"),
    (HEADER.replace("state_bytes,", "") + "\n", ":1:", "missing column 'state_bytes'"),
    (HEADER + ",ts_ms\n", ":1:", "repeats"),
    (f"{HEADER}\n{GOOD}\n1790000005000,1,2\n", ":3:", "3 fields, the header has 10"),
    (f"{HEADER}\n{GOOD.replace(',5,', ',5.5,')}\n", ":2:", "column 'state_bytes': expected an integer >= 0"),
    (f"{HEADER}\n{GOOD.replace(',1,', ',-1,')}\n", ":2:", "column 'harness_rss_bytes'"),
    (f"{HEADER}\n{GOOD.replace(',1.5', ',fast')}\n", ":2:", "column 'sample_ms': expected a number >= 0"),
    (f"{HEADER}\n{GOOD}\n1789999999999,1,2,3,4,5,6,7,8,1\n", ":3:", "earlier than the row before"),
    (f"{HEADER}\n,1,2,3,4,5,6,7,8,1\n", ":2:", "column 'ts_ms': empty"),
])
def test_a_malformed_file_is_one_line_naming_the_file_and_line(tmp_path, text, where, says):
    path = tmp_path / "health.csv"
    path.write_text(text)
    with pytest.raises(CepkitError) as e:
        read_health(path)
    message = str(e.value)
    assert message.startswith(f"{path}{where}") and says in message and "\n" not in message


def test_the_reader_refuses_what_is_not_a_text_file(tmp_path, monkeypatch):
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(CepkitError, match="dir.csv"):
        read_health(tmp_path / "dir.csv")
    (tmp_path / "bin.csv").write_bytes(HEADER.encode() + b"\n\xff\xfe\n")
    with pytest.raises(CepkitError, match="bin.csv: not UTF-8"):
        read_health(tmp_path / "bin.csv")
    monkeypatch.setattr(vh, "MAX_ROWS", 3)
    (tmp_path / "long.csv").write_text(HEADER + "\n" + "".join(f"{1790000000000 + i},1,2,3,4,5,6,7,8,1\n"
                                                              for i in range(4)))
    with pytest.raises(CepkitError, match=r"long.csv:5: more than 3 rows"):
        read_health(tmp_path / "long.csv")


def test_metrics_lie_beside_the_outputs(tmp_path):
    run = tmp_path / "engine"
    (run / "outputs").mkdir(parents=True)
    assert metrics_dir(run / "outputs" / "output-log.json") == run / "metrics"
    assert metrics_dir(run / "outputs") == run / "metrics"
    assert metrics_dir(run) == run / "metrics"


# -- the reports ---------------------------------------------------------------------------------

def test_the_pairs_report_shows_the_health_section_and_summary(tmp_path):
    df = frame(120, jvm_rss_bytes=lambda h: 1024 * MIB + 300 * MIB * h, output_bytes=lambda h: 10 * MIB + 900 * MIB * h)
    write_csv(tmp_path / "health.csv", df)
    report = read_health_report(tmp_path / "health.csv")
    clocks = Clocks(W0, 1_767_623_400_000, 1.0, "tickts")
    page = write_report(ReportInputs(title="health", clocks=clocks, profile=standard_profile(1000.0, 2000.0),
                                     health=report), tmp_path / "report")
    html = page.read_text()
    section = html[html.index('<section id="health">'):html.index("</section>", html.index('<section id="health">'))]
    assert "Long-run health" in section and 'id="fig-health"' in section and "data:image/png;base64," in section
    assert re.search(r"engine JVMs RSS</td><td class=\"n\">[0-9.,]+ GiB</td>\s*<td class=\"n\">\+300\.0 MiB/h", section)
    assert '<span class="badge grows">grows</span>' in section
    assert '<span class="badge grows-by-design">grows by design</span>' in section
    assert "short run: weak" not in section and "Growing: engine JVMs RSS." in section
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    health = summary["health"]
    assert health["figure"] == "figures/health.png" and (tmp_path / "report" / "figures" / "health.png").stat().st_size
    jvm = next(s for s in health["series"] if s["column"] == "jvm_rss_bytes")
    assert jvm["flag"] == "grows" and jvm["growth_per_h"] == pytest.approx(300 * MIB)
    assert health["samples"] == len(df) and health["short"] is False and health["warmup_fraction"] == 0.25


def test_a_short_runs_section_says_so_and_no_health_file_no_section(tmp_path):
    write_csv(tmp_path / "health.csv", frame(2))
    page = write_report(ReportInputs(title="short", health=read_health_report(tmp_path / "health.csv")),
                        tmp_path / "short")
    html = page.read_text()
    assert "less than 10 min" in html and html.count("short run: weak") == 8
    page = write_report(ReportInputs(title="none"), tmp_path / "none")
    assert 'id="health"' not in page.read_text()
    assert json.loads((tmp_path / "none" / "summary.json").read_text())["health"] is None


def test_the_figure_draws_without_clocks_and_with_a_log_axis(tmp_path):
    report = health_growth(frame(30, state_bytes=lambda h: 4096 + 0 * h, output_bytes=lambda h: 1 + 2e9 * h))
    assert plot_health(tmp_path / "h.png", report).stat().st_size > 10_000


def test_the_micro_report_has_a_health_table_per_point(tmp_path):
    good, bad = tmp_path / "good" / "engine", tmp_path / "bad" / "engine"
    for d in (good, bad):
        (d / "metrics").mkdir(parents=True)
    write_csv(good / "metrics" / "health.csv", frame(3, python_rss_bytes=lambda h: 400 * MIB + 2048 * MIB * h))
    (bad / "metrics" / "health.csv").write_text(HEADER + "\nnope\n")
    points = [WorkloadPoint("w-good", "e", {}, 1, "completed", "PASSED", engine_dir=good),
              WorkloadPoint("w-bad", "e", {}, 1, "completed", "PASSED", engine_dir=bad),
              WorkloadPoint("w-none", "e", {}, 1, "completed", "PASSED")]
    html = write_suite_report("suite", "fixed-rate", points, tmp_path / "out").read_text()
    section = html[html.index('<section id="health">'):]
    assert "<h3>w-good</h3>" in section and "w-bad</h3>" not in section and 'id="health-1"' in section
    assert "engine Python processes RSS" in section and '<span class="badge grows">grows</span>' in section
    assert "less than 10 min" in section
    assert re.search(r"w-bad: no long-run health table, .*health\.csv:2: 1 fields, the header has 10", html)
