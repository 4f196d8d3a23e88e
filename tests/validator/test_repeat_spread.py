"""The spread of repeated runs (validator/compare_runs.py, specs/VALIDATION.md "Repetitions"): median
and range over the runs that count, odd and even counts, runs left out, no run at all, its words,
and the throughput a run's backlog.csv records. No engine."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.resources import BacklogLog
from kit.errors import CepkitError
from validator.compare_runs import RunFigures, Spread, spread, spreads, taken_eps
from validator.order_stats import Percentile


def test_an_odd_count_has_its_middle_value_as_median():
    s = spread([612, 580, 700])
    assert (s.median, s.low, s.high, s.n, s.of) == (612, 580, 700, 3, 3)
    assert s.text(unit="ms") == "612 ms [580–700 ms] (median of 3 runs)"


def test_an_even_count_has_the_mean_of_its_two_middle_values():
    s = spread([4.0, 1.0, 3.0, 2.0])
    assert (s.median, s.low, s.high, s.n) == (2.5, 1.0, 4.0, 4)
    s = spread([600, 611])
    assert s.median == 605.5 and (s.low, s.high) == (600, 611)
    assert s.text(lambda v: f"{v:,.1f}", "ms") == "605.5 ms [600.0–611.0 ms] (median of 2 runs)"


def test_one_value_and_none():
    assert spread([7.5]).to_dict() == {"median": 7.5, "min": 7.5, "max": 7.5, "n": 1, "of": 1}
    assert spread([7.5]).text() == "8 [8–8] (median of 1 run)"
    none = spread([], of=3)
    assert (none.median, none.low, none.high, none.n, none.of) == (None, None, None, 0, 3)
    assert none.text(unit="ms") == "– (no completed, PASSED run of 3)"
    assert none.text(noun=("search", "searches"), counted="confirmed") == "– (no confirmed search of 3)"


def test_runs_left_out_are_counted_in_the_words():
    s = spread([10, 30], of=3)
    assert s.basis() == "median of 2 of 3 runs"
    assert s.text(unit="ev/s") == "20 ev/s [10–30 ev/s] (median of 2 of 3 runs)"
    assert spread([5], of=4).basis(("search", "searches")) == "median of 1 of 4 searches"


def _figures(run: str, verdict: str, status: str, p99: int | None, pscore: float | None, eps: float | None):
    return RunFigures(Path(run), "spark", verdict, status, 1,
                      None if p99 is None else Percentile("p99", 50, p99, p99 - 10, None),
                      pscore, throughput_eps=eps, mean_cpu_percent=100.0, peak_rss_mib=1000.0)


def test_only_completed_and_passed_runs_enter_the_median():
    runs = [_figures("run-1", "PASSED", "completed", 500, 4.0, 6000.0),
            _figures("run-2", "FAILED", "completed", 100, 20.0, 9000.0),            # wrong answers
            _figures("run-3", "NOT VALIDATED", "unsustainable", 50, None, 9500.0),  # stopped
            _figures("run-4", "PASSED", "failed", 60, 33.0, 9900.0),                # its engine died
            _figures("run-5", "PASSED", "completed", 700, 2.0, 5000.0),
            _figures("run-6", "PASSED", "completed", 600, 3.0, None)]             # no backlog samples
    assert [f.counted for f in runs] == [True, False, False, False, True, True]
    s = spreads(runs)
    assert s["p99_ms"].to_dict() == {"median": 600, "min": 500, "max": 700, "n": 3, "of": 6}
    assert s["pscore"].to_dict() == {"median": 3.0, "min": 2.0, "max": 4.0, "n": 3, "of": 6}
    # A figure a counted run lacks leaves only that figure with fewer values.
    assert s["throughput_eps"].to_dict() == {"median": 5500.0, "min": 5000.0, "max": 6000.0, "n": 2, "of": 6}
    assert s["mean_cpu_percent"].n == 3


def test_no_run_passed_gives_no_median():
    runs = [_figures("run-1", "FAILED", "completed", 500, 4.0, 6000.0),
            _figures("run-2", "NOT VALIDATED", "unsustainable", None, None, None)]
    for s in spreads(runs).values():
        assert (s.median, s.low, s.high, s.n, s.of) == (None, None, None, 0, 2)


@pytest.mark.parametrize("values", [[1.0, math.nan], [math.inf], [True], ["612"], [None]])
def test_only_finite_numbers_are_spread(values):
    with pytest.raises(CepkitError, match="finite numbers"):
        spread(values)


def test_a_spread_checks_itself_and_reads_its_own_dict_back():
    s = spread([3, 1, 2], of=5)
    assert Spread.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    for bad in ({"n": 2, "of": 1, "median": 1, "min": 1, "max": 1},           # more counted than made
                {"n": 1, "of": 1, "median": 5, "min": 1, "max": 3},           # median outside the range
                {"n": 0, "of": 1, "median": 5, "min": None, "max": None},     # a median of nothing
                {"n": 1, "of": 1, "median": "5", "min": 1, "max": 9},
                {"n": 1, "of": 1, "median": 5}):
        with pytest.raises(CepkitError, match="spread"):
            Spread.from_dict(bad)


def _backlog(engine_dir: Path, samples) -> None:
    (engine_dir / "metrics").mkdir(parents=True)
    log = BacklogLog(engine_dir / "metrics" / "backlog.csv")
    for ts, released, pulled in samples:
        log.record({"released": released, "pulled": pulled, "backlog": released - pulled}, ts_ms=ts)
    log.close()


def test_throughput_is_what_the_engine_took_until_it_had_taken_the_most(tmp_path):
    start = 1_000_000
    rec = {"timings": {"run_start_wall_ms": start, "driver_finished_ms": start + 40_000},
           "events": {"pulled": 123}}
    # Pulled 2,000 a second for 20 s, then nothing more: 40,000 events over 20 s, not over the
    # 30 s the samples go on for, nor over the release interval run.json names.
    _backlog(tmp_path / "e", [(start - 1000, 0, 0)] + [(start + s * 1000, 2000 * s, 2000 * min(s, 20))
                                                       for s in range(31)])
    assert taken_eps(tmp_path / "e", rec) == pytest.approx(2000.0)
    # An engine behind its driver: pulls go on after the release ended.
    _backlog(tmp_path / "late", [(start + s * 1000, min(3000 * s, 60_000), 1500 * s) for s in range(1, 41)])
    assert taken_eps(tmp_path / "late", rec) == pytest.approx(1500.0)
    # Without samples: run.json's events pulled over its release interval.
    (tmp_path / "none").mkdir()
    assert taken_eps(tmp_path / "none", rec) == pytest.approx(123 / 40)
    assert taken_eps(tmp_path / "none", {"timings": {}, "events": {"pulled": 5}}) is None
    (tmp_path / "bad" / "metrics").mkdir(parents=True)
    (tmp_path / "bad" / "metrics" / "backlog.csv").write_text("ts_ms,released\n1,2\n")
    with pytest.raises(CepkitError, match="backlog.csv:1: missing or non-numeric column 'pulled'"):
        taken_eps(tmp_path / "bad", rec)
