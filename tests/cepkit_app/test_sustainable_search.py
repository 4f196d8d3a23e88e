"""The maximum-sustainable-throughput search: which rates it tries, how it judges a step from the
harness's backlog samples, and what it records. The steps here are a deterministic model of an
engine with a fixed capacity (writing the harness's run.json and backlog.csv); the real engine runs
the same search in `cepkit micro --sustainable` and benchmarks/micro_all.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cepkit_app.pipelines.sustainable import (SearchConfig, SearchResult, Step, calibrated, choose_lambda,
                                 find_sustainable_rate, tail_backlog, tail_latency_ms)
from kit.errors import CepkitError
from kit.workload import Filter, QuerySet
from kit.workload.suite import Dataset, Load, Workload

WORKLOAD = Workload("w", "x", ("throughput",), Dataset(streams=1, attributes=1, max_id=10), Load("constant", 1000.0, 5000),
                    QuerySet("independent", (Filter("q", "S1", ("ID",)),)))


def _bound(behind: bool, part: str = "feed") -> dict:
    """A run's verdict as run.json carries it (harness/bound.py): kit-bound when it fell behind."""
    if behind:
        return {"bound": "kit", "part": part, "label": f"kit-bound ({part})", "why": f"{part} at 99 % of one core",
                "processes": [{"pid": 1, "part": part, "label": part, "cpu_percent": 99.0}]}
    return {"bound": "none", "part": None, "label": "kept up", "why": "kept up", "processes": []}


def capacity_model(capacity_eps: float, calls: list):
    """A step of `duration` seconds at `rate`: the backlog grows by (rate - capacity) per second."""

    def run_step(workload, step_dir: Path, run_changes, validate):
        rate, seconds = workload.load.rate_eps, workload.load.duration_ms // 1000
        calls.append((rate, validate, run_changes))
        engine = step_dir / "engine"
        (engine / "metrics").mkdir(parents=True)
        start = 1_800_000_000_000
        (engine / "run.json").write_text(json.dumps(
            {"timings": {"run_start_wall_ms": start, "driver_finished_ms": start + seconds * 1000}}))
        lines = ["ts_ms,released,pulled,backlog"]
        for t in range(seconds + 1):
            backlog = int(max(0.0, rate - capacity_eps) * t + 0.2 * rate)   # a batch's worth always waits
            lines.append(f"{start + t * 1000},{int(rate * t)},{int(rate * t) - backlog},{backlog}")
        (engine / "metrics" / "backlog.csv").write_text("\n".join(lines) + "\n")
        return SimpleNamespace(status="completed", message="", verdict="PASSED" if validate else "NOT VALIDATED",
                               p50_ms=100, p99_ms=200, peak_rss_mib=900.0, mean_cpu_percent=150.0,
                               state_mib=round(rate / 1000, 2), latency_count=int(rate * seconds // 100),
                               p99_ci_low_ms=190, p99_ci_high_ms=None, connectors={"source": "jvm", "sink": "jvm"},
                               bound=_bound(rate > capacity_eps))

    return run_step


def test_search_brackets_the_capacity_and_confirms_below_it(tmp_path):
    calls: list = []
    cfg = SearchConfig(duration_s=10, qa_s=2.0, precision=1.15, max_steps=10, validate_steps=False)
    result = find_sustainable_rate(capacity_model(23_000, calls), WORKLOAD, tmp_path / "s", cfg)
    # The backlog at the end is (rate - C) * 10 + 0.2 rate; q^a is 2 s of input (2 rate), so the
    # model keeps up to rate = 10 C / 8.2; the search must land within its precision below that.
    limit = 10 * 23_000 / 8.2
    assert result.confirmed and limit / 1.15 <= result.sustainable_eps <= limit
    rates = [c[0] for c in calls]
    assert rates[:5] == [1000, 2000, 4000, 8000, 16000]          # doubling from the nominal rate
    assert rates[-1] == pytest.approx(0.9 * result.sustainable_eps)  # the confirmation
    assert [c[1] for c in calls] == [False] * (len(calls) - 1) + [True]   # only the confirmation validates
    assert all(c[2]["max_backlog_s"] == 10.0 for c in calls)
    ups = [s for s in result.steps if s.purpose == "bisect"]
    assert ups and all(16_000 < s.rate_eps < 32_000 for s in ups)
    logged = [json.loads(line) for line in (tmp_path / "s" / "search.jsonl").read_text().splitlines()]
    assert [r["rate_eps"] for r in logged] == rates and all("reason" in r for r in logged)
    assert [r["state_mib"] for r in logged] == [round(r / 1000, 2) for r in rates]   # each step's own
    # The count behind each step's p99 and its interval travel with the step (honest tables).
    assert [r["latency_count"] for r in logged] == [int(r * 10 // 100) for r in rates]
    assert {(r["p99_ci_low_ms"], r["p99_ci_high_ms"]) for r in logged} == {(190, None)}
    assert json.loads((tmp_path / "s" / "search.json").read_text())["sustainable_eps"] == result.sustainable_eps


def test_a_search_keeps_the_verdict_of_its_first_failing_step_and_a_kit_limit_is_never_the_engines(tmp_path):
    from cepkit_app.pipelines.micro_summary import search_row, search_table

    cfg = SearchConfig(duration_s=10, qa_s=2.0, precision=1.15, max_steps=10, validate_steps=False)
    result = find_sustainable_rate(capacity_model(23_000, []), WORKLOAD, tmp_path / "s", cfg)
    # (The model's latency counts and intervals are not a real sample's: the table needs none.)
    result = dataclasses.replace(result, steps=tuple(dataclasses.replace(s, latency_count=None, p99_ci_low_ms=None)
                                                     for s in result.steps))
    first = result.first_failing()
    assert first is [s for s in result.steps if not s.sustainable][0]
    assert first.bound["label"] == "kit-bound (feed)" and "processes" not in first.bound
    assert result.kit_bound() and result.bound_text() == "kit-bound (feed)"
    row = search_row(result)
    assert row["bound"] == "kit-bound (feed)" and row["connectors"] == "jvm -> jvm"
    line = search_table([result]).splitlines()[2]
    assert f"{result.sustainable_eps:,.0f} (kit-bound (feed): the kit's limit, not the engine's)" in line
    # The same search limited by the engine publishes its rate plainly.
    engine = dataclasses.replace(result, steps=tuple(
        dataclasses.replace(s, bound={"bound": "engine", "part": None, "label": "engine", "why": "-"})
        if not s.sustainable else s for s in result.steps))
    assert not engine.kit_bound() and "the kit's limit" not in search_table([engine])


def test_nothing_sustainable_down_to_the_floor(tmp_path):
    calls: list = []
    cfg = SearchConfig(duration_s=5, min_rate_eps=250, max_steps=8, validate_steps=False)
    result = find_sustainable_rate(capacity_model(10, calls), WORKLOAD, tmp_path / "s", cfg)
    assert result.sustainable_eps is None and not result.confirmed
    assert [c[0] for c in calls] == [1000, 500, 250]
    assert all("q^a" in s.reason for s in result.steps)


def _failing(pulled: int, calls: list):
    """A step whose engine program dies: before reading an event (pulled 0) or after."""
    model = capacity_model(5000, calls)

    def run_step(workload, step_dir, run_changes, validate):
        res = model(workload, step_dir, run_changes, validate)
        (step_dir / "engine" / "logs").mkdir()
        (step_dir / "engine" / "logs" / "driver.json").write_text(json.dumps({"released": pulled, "pulled": pulled}))
        return SimpleNamespace(**{**vars(res), "status": "failed",
                                  "message": "the engine program exited before it started (exit code 1): sqlQuery"})

    return run_step


def test_an_engine_that_fails_before_reading_an_event_stops_the_search(tmp_path):
    """A program the engine refuses fails alike at every rate: searching down would report
    throughput "limits" that are start-up failures (the first Flink Q7 w600s search did: 15,000,
    7,500 and 3,750 ev/s "NOT sustainable" in 23 s)."""
    calls: list = []
    cfg = SearchConfig(duration_s=5, max_steps=8, validate_steps=False)
    with pytest.raises(CepkitError, match=r"w: step 1 at 1,000 ev/s: the engine read no event: .*sqlQuery"):
        find_sustainable_rate(_failing(0, calls), WORKLOAD, tmp_path / "s", cfg)
    assert len(calls) == 1 and not (tmp_path / "s" / "search.json").exists()
    assert json.loads((tmp_path / "s" / "search.jsonl").read_text())["reason"].startswith("run failed: ")


def test_an_engine_that_dies_under_load_is_a_failed_rate(tmp_path):
    calls: list = []
    cfg = SearchConfig(duration_s=5, min_rate_eps=250, max_steps=8, validate_steps=False)
    result = find_sustainable_rate(_failing(1234, calls), WORKLOAD, tmp_path / "s", cfg)
    assert [c[0] for c in calls] == [1000, 500, 250] and result.sustainable_eps is None
    assert all(s.reason.startswith("run failed: ") for s in result.steps)


def test_a_failed_confirmation_is_reported_not_hidden(tmp_path):
    """An engine whose capacity drops after a while: every confirmation fails, the search looks
    below each failed one while steps remain, and in the end nothing is claimed."""
    calls: list = []
    model = capacity_model(5000, calls)

    def flaky(workload, step_dir, run_changes, validate):
        res = model(workload, step_dir, run_changes, validate)
        return SimpleNamespace(**{**vars(res), "status": "unsustainable", "message": "q^b"}) if validate else res

    cfg = SearchConfig(duration_s=5, max_steps=12, validate_steps=False)
    result = find_sustainable_rate(flaky, WORKLOAD, tmp_path / "s", cfg)
    assert result.sustainable_eps is None and not result.confirmed and result.best_step() is not None
    confirms = [s for s in result.steps if s.purpose == "confirm"]
    assert len(confirms) >= 2 and all("unsustainable" in s.reason for s in confirms)
    assert len(result.steps) == 12                                     # max_steps, no more
    first = result.steps.index(confirms[0])
    assert all(s.rate_eps < confirms[0].rate_eps for s in result.steps[first + 1:])   # the search went below it


def test_after_a_failed_confirmation_the_search_settles_below_it(tmp_path):
    """A thin margin: validated runs (the confirmations) keep up only to 80 % of the capacity the
    exploring steps saw, so the first confirmation fails; the search bisects beneath it and the
    rate it then confirms is one the slower engine sustains, with that step reported as the best."""
    calls: list = []
    fast, slow = capacity_model(23_000, calls), capacity_model(0.8 * 23_000, calls)

    def thin(workload, step_dir, run_changes, validate):
        return (slow if validate else fast)(workload, step_dir, run_changes, validate)

    cfg = SearchConfig(duration_s=10, precision=1.15, max_steps=14, validate_steps=False)
    result = find_sustainable_rate(thin, WORKLOAD, tmp_path / "s", cfg)
    confirms = [s for s in result.steps if s.purpose == "confirm"]
    assert len(confirms) >= 2 and not confirms[0].sustainable and confirms[-1].sustainable
    slow_limit = 10 * 0.8 * 23_000 / 8.2
    assert result.confirmed and confirms[-1].rate_eps <= slow_limit
    assert result.sustainable_eps == pytest.approx(confirms[-1].rate_eps / 0.9)
    assert result.best_step().rate_eps == pytest.approx(result.sustainable_eps)
    assert result.lowest_failing_eps() <= confirms[0].rate_eps


def test_tail_backlog_reads_the_harness_files(tmp_path):
    calls: list = []
    capacity_model(100, calls)(WORKLOAD, tmp_path / "step", (), False)
    assert tail_backlog(tmp_path / "step" / "engine", 0.3) == int(900 * 5 + 200)     # WORKLOAD lasts 5 s
    assert tail_backlog(tmp_path / "missing", 0.3) is None


def _step_with_outputs(step_dir: Path, latencies_ms: list[int]) -> Path:
    """A step's harness files (10 s of release ending now, a small backlog) and a real output log
    (the harness's sink) of outputs arriving now at the given latencies: all in the steady tail."""
    import time

    import pyarrow as pa

    from harness.sink import SinkServer
    from kit.wire.sink_client import SinkClient

    engine = step_dir / "engine"
    (engine / "metrics").mkdir(parents=True)
    now = int(time.time() * 1000)
    start, end = now - 10_000, now + 1_000
    (engine / "run.json").write_text(json.dumps({"timings": {"run_start_wall_ms": start, "driver_finished_ms": end}}))
    (engine / "metrics" / "backlog.csv").write_text(
        "ts_ms,released,pulled,backlog\n" + "".join(f"{t},0,0,10\n" for t in range(start, end + 1, 1000)))
    with SinkServer(engine / "outputs") as sink:
        client = SinkClient(port=sink.port)
        client.emit("q", 0, pa.table({"inputTS": pa.array([now - lat for lat in latencies_ms], pa.int64())}))
        client.close()
        sink.finish({"run_start_wall_ms": start, "sim_start_ms": start, "speed": 1.0})
    return engine


def test_tail_latency_is_the_median_of_the_outputs_in_the_steady_tail(tmp_path):
    engine = _step_with_outputs(tmp_path / "step", [100, 200, 4000])
    assert 200 <= tail_latency_ms(engine, 0.3) < 700      # arrival is stamped a moment after "now"
    assert tail_latency_ms(tmp_path / "missing", 0.3) is None


def test_a_step_whose_outputs_queue_inside_the_engine_is_not_sustainable(tmp_path):
    def run_step(workload, step_dir, run_changes, validate):
        rate = workload.load.rate_eps
        _step_with_outputs(step_dir, [12_000 if rate > 1500 else 50] * 3)
        return SimpleNamespace(status="completed", message="", verdict="PASSED", p50_ms=100, p99_ms=200,
                               peak_rss_mib=900.0, mean_cpu_percent=150.0, state_mib=None, latency_count=3,
                               p99_ci_low_ms=None, p99_ci_high_ms=None, connectors=None, bound=None)

    result = find_sustainable_rate(run_step, WORKLOAD, tmp_path / "search",
                                   SearchConfig(start_rate_eps=1000, max_steps=6, precision=1.5))
    late = [s for s in result.steps if not s.sustainable]
    assert late and all("median latency 12," in s.reason and "> q^b = 10,000 ms" in s.reason for s in late)
    assert all(50 <= s.tail_p50_ms < 550 for s in result.steps if s.sustainable)
    assert result.confirmed and result.sustainable_eps <= 1500


def test_settings_check_themselves():
    with pytest.raises(CepkitError, match="qa_s"):
        SearchConfig(qa_s=20, qb_s=10)
    with pytest.raises(CepkitError, match="precision"):
        SearchConfig(precision=1.0)


def test_start_rate_and_growth_shape_the_exploration(tmp_path):
    calls: list = []
    cfg = SearchConfig(duration_s=10, start_rate_eps=4000, growth=4, precision=1.4, max_steps=8,
                       validate_steps=False)
    result = find_sustainable_rate(capacity_model(23_000, calls), WORKLOAD, tmp_path / "s", cfg)
    rates = [c[0] for c in calls]
    assert rates[:3] == [4000, 16000, 64000]
    assert [s.purpose for s in result.steps][:3] == ["explore"] * 3 and result.steps[-1].purpose == "confirm"
    limit = 10 * 23_000 / 8.2
    assert result.confirmed and limit / 1.4 <= result.sustainable_eps <= limit


def _search(sustainable_eps, points):
    """A finished search: (rate, mean CPU %, sustainable) per step."""
    steps = tuple(Step(n, rate, "explore", ok, "", "completed", "NOT VALIDATED", 0, 1, None, None, None, cpu, "")
                  for n, (rate, cpu, ok) in enumerate(points, 1))
    return SearchResult("w", sustainable_eps, True, steps)


def test_lambda_is_where_the_engine_uses_the_cpu_share_interpolated_between_steps():
    # 75 % of 2 cores = 150 %: reached between 8,000 (100 %) and 16,000 ev/s (180 %).
    found = _search(16_000, [(4000, 60.0, True), (8000, 100.0, True), (16000, 180.0, True), (32000, 195.0, False)])
    choice = choose_lambda(found, 0.75, 200.0)
    assert choice.rule == "cpu" and choice.lambda_eps == pytest.approx(8000 + 8000 * 50 / 80, abs=0.1)
    # Already past the share at the first step: the line through the origin.
    first = choose_lambda(_search(16_000, [(4000, 160.0, True), (16000, 190.0, True)]), 0.75, 200.0)
    assert first.rule == "cpu" and first.lambda_eps == pytest.approx(4000 * 150 / 160, abs=0.1)
    # Never above the sustainable rate, and an unsustainable step's CPU does not count.
    capped = choose_lambda(_search(10_000, [(10_000, 140.0, True), (20_000, 150.0, False)]), 0.75, 200.0)
    assert capped.rule == "capacity" and capped.lambda_eps == 7500.0


def test_an_engine_that_falls_behind_below_the_cpu_share_gets_a_share_of_its_capacity():
    found = _search(19_000, [(4000, 70.0, True), (16000, 120.0, True), (19000, 130.0, True), (22000, 140.0, False)])
    choice = choose_lambda(found, 0.75, 200.0)
    assert choice.rule == "capacity" and choice.lambda_eps == 14_250.0
    assert "at most 130 % CPU" in choice.note
    assert choose_lambda(_search(None, [(4000, 190.0, False)]), 0.75, 200.0) is None
    with pytest.raises(CepkitError, match="fraction"):
        choose_lambda(found, 1.5, 200.0)


def test_calibration_sets_a_burst_workloads_lambda():
    burst = Workload("b", "burst", ("max-latency",), Dataset(streams=1, attributes=1, max_id=10),
                     Load("adaptivity", 1000.0, 13420), QuerySet("independent", (Filter("q", "S1", ("ID",)),)))
    tuned = calibrated(burst, 15_000.0)
    assert tuned.load == Load("adaptivity", 15_000.0, 13420) and tuned.queries == burst.queries
    with pytest.raises(CepkitError, match="only adaptivity"):
        calibrated(WORKLOAD, 20_000.0)
    with pytest.raises(CepkitError, match="positive lambda"):
        calibrated(burst, 0.0)

def test_a_workloads_own_start_rate_comes_first(tmp_path):
    calls: list = []
    cfg = SearchConfig(duration_s=10, start_rate_eps=4000, start_rates=((WORKLOAD.name, 16_000.0), ("other", 1.0)),
                       growth=2, precision=1.5, max_steps=4, validate_steps=False)
    find_sustainable_rate(capacity_model(23_000, calls), WORKLOAD, tmp_path / "s", cfg)
    assert calls[0][0] == 16_000
    with pytest.raises(CepkitError, match="start rates"):
        SearchConfig(start_rates=(("w", 0.0),))
    with pytest.raises(CepkitError, match="start_rate_eps must be > 0"):
        SearchConfig(start_rate_eps=-1.0)



def test_a_step_the_search_finds_behind_is_judged_as_one_that_fell_behind():
    from cepkit_app.pipelines.sustainable import _step_bound

    # The harness saw the run complete (its backlog stayed under q^b), the search did not (q^a).
    ran = {"bound": "none", "part": None, "label": "kept up", "why": "kept up", "cores": 2,
           "cpu_percent": {"engine": 60.0, "kit_in_engine": 1.0, "feed": 97.0, "sink": 5.0},
           "processes": [{"pid": 7, "part": "feed", "label": "the feed", "cpu_percent": 97.0}],
           "machine_cpu_percent": 80.0}
    assert _step_bound(ran, sustainable=True)["label"] == "kept up"
    behind = _step_bound(ran, sustainable=False)
    assert (behind["bound"], behind["part"], behind["label"]) == ("kit", "feed", "kit-bound (feed)")
    assert "processes" not in behind and behind["cpu_percent"]["feed"] == 97.0
    assert _step_bound(None, sustainable=False) is None
