"""`cepkit micro --sustainable --repeat K` (cepkit_app/pipelines/sustainable.py, micro.py,
micro_summary.py): the same search K times over the same inputs, each search's rate, their median and
range, the representative search, the suite's summary.json and summary.md, and `cepkit compare`
reading the result. The steps are models of an engine (tests/cepkit_app/test_sustainable_search.py's,
and tests/validator/test_compare_page.py's, which write real engine directories). No engine."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cepkit_app.pipelines.micro import MicroSuiteRequest, run_micro_suite
from cepkit_app.pipelines.micro_summary import search_table, write_summary
from cepkit_app.pipelines.sustainable import RepeatedSearch, SearchConfig, find_sustainable_rate, repeat_search
from kit.config import load_config
from kit.errors import CepkitError
from kit.workload import write_spec
from tests.cepkit_app.test_sustainable_search import WORKLOAD, capacity_model
from tests.validator.test_compare_page import (ENGINES, SUITE, cells, micro_frames, write_engine_dir,
                                               write_run_config)
from validator.compare_page import write_comparison
from validator.latency import latency_stats

CFG = SearchConfig(duration_s=10, qa_s=2.0, precision=1.15, max_steps=10, validate_steps=False)


def model(capacity_eps: float):
    """test_sustainable_search's model of an engine of that capacity, its steps' p99 behind 50
    latencies (its interval, 190 ms and open above, is then what 50 samples give)."""
    step = capacity_model(capacity_eps, [])
    return lambda *args: SimpleNamespace(**{**vars(step(*args)), "latency_count": 50})


def by_search(capacities: dict[str, float]):
    """A step model whose capacity is that of the search it belongs to (its directory, run-i): an
    engine whose capacity moves from search to search, as a real one's does."""
    models = {run: model(c) for run, c in capacities.items()}
    return lambda workload, step_dir, *rest: models[Path(step_dir).parent.name](workload, step_dir, *rest)


def test_three_searches_give_their_rates_median_and_range(tmp_path):
    stages = []
    result = repeat_search(by_search({"run-1": 20_000, "run-2": 30_000, "run-3": 25_000}), WORKLOAD, tmp_path / "w",
                           CFG, 3, stages.append)
    assert isinstance(result, RepeatedSearch) and result.dirs == ("run-1", "run-2", "run-3")
    alone = [find_sustainable_rate(capacity_model(c, []), WORKLOAD, tmp_path / f"alone-{c}", CFG)
             for c in (20_000, 30_000, 25_000)]
    # The same search over the same inputs: each repetition finds what a search alone finds.
    assert [s.sustainable_eps for s in result.searches] == [s.sustainable_eps for s in alone]
    found = [s.sustainable_eps for s in result.searches]
    assert found[0] < found[2] < found[1]
    sp = result.spread()
    assert (sp.median, sp.low, sp.high, sp.n, sp.of) == (found[2], found[0], found[1], 3, 3)
    # The representative is the median search: its figures stand for the workload.
    assert result.representative == 2 and result.sustainable_eps == found[2]
    assert result.steps == result.searches[2].steps and result.best_step() == result.searches[2].best_step()
    assert result.confirmed and result.all_confirmed
    for run, s in zip(result.dirs, result.searches):
        doc = json.loads((tmp_path / "w" / run / "search.json").read_text())
        assert doc["sustainable_eps"] == s.sustainable_eps
        assert all(Path(step["run_dir"]).parent == tmp_path / "w" / run for step in doc["steps"])
    assert "search 2 of 3" in " ".join(stages) and stages[-1].endswith("(median of 3 searches)")
    assert result.to_dict() == {
        "searches": [{"run": f"run-{i + 1}", "sustainable_eps": found[i], "confirmed": True,
                      "steps": len(result.searches[i].steps)} for i in range(3)],
        "search_dir": "run-3"}
    assert sp.to_dict() == {"median": found[2], "min": found[0], "max": found[1], "n": 3, "of": 3}


def test_an_even_count_and_a_search_that_found_nothing(tmp_path):
    two = repeat_search(by_search({"run-1": 30_000, "run-2": 20_000}), WORKLOAD, tmp_path / "two", CFG, 2)
    a, b = (s.sustainable_eps for s in two.searches)
    assert two.spread().median == (a + b) / 2
    assert two.representative == 1 and two.sustainable_eps == b      # the lower middle: a search that was made
    # Nothing sustainable down to the floor in one search: it counts for nothing.
    some = repeat_search(by_search({"run-1": 10, "run-2": 20_000, "run-3": 10}), WORKLOAD, tmp_path / "some", CFG, 3)
    assert [s.confirmed for s in some.searches] == [False, True, False]
    sp = some.spread()
    assert (sp.n, sp.of, sp.median) == (1, 3, some.searches[1].sustainable_eps)
    assert some.representative == 1 and some.confirmed and not some.all_confirmed
    none = repeat_search(by_search({"run-1": 10, "run-2": 10}), WORKLOAD, tmp_path / "none", CFG, 2)
    assert none.representative == 0 and none.sustainable_eps is None and none.spread().median is None
    assert none.spread().to_dict()["median"] is None and none.spread().to_dict()["n"] == 0
    assert none.to_dict()["search_dir"] == "run-1"
    with pytest.raises(CepkitError, match="repeat must be a whole number >= 1"):
        repeat_search(by_search({}), WORKLOAD, tmp_path / "zero", CFG, 0)


def test_the_suite_summary_keeps_its_keys_and_adds_the_repetitions(tmp_path):
    suite = SUITE
    results = [repeat_search(by_search({"run-1": 20_000, "run-2": 30_000, "run-3": 25_000}), w,
                             tmp_path / "run" / w.name, CFG, 3) for w in suite.workloads]
    write_summary(suite, results, tmp_path / "run")
    doc = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (doc["kind"], doc["schema_version"], doc["mode"], doc["repeat"]) == (
        "cepkit.micro-summary", 1, "sustainable", 3)
    for row, r in zip(doc["workloads"], results):
        assert {"workload", "sustainable_eps", "confirmed", "steps", "p50_ms", "p99_ms", "latency_count",
                "peak_rss_mib", "verdicts"} <= set(row)
        assert row["sustainable_eps"] == r.sustainable_eps and row["steps"] == len(r.steps)
        assert row["repeat"] == r.to_dict() and row["repeat"]["search_dir"] == "run-3"
        found = sorted(s.sustainable_eps for s in r.searches)
        assert row["sustainable_eps_spread"] == {"median": found[1], "min": found[0], "max": found[2], "n": 3,
                                                 "of": 3}
    md = (tmp_path / "run" / "summary.md").read_text()
    head = md.splitlines()[0]
    assert head.endswith("| each search's ev/s | median [min–max] ev/s |")
    found = [f"{s.sustainable_eps:,.0f}" for s in results[0].searches]
    assert f"| {', '.join(found)} | {found[2]} [{found[0]}–{found[1]}] (median of 3 searches) |" in md
    # One search per workload, as before: no repeat key, no extra columns.
    single = [find_sustainable_rate(model(20_000), w, tmp_path / "one" / w.name, CFG)
              for w in suite.workloads]
    write_summary(suite, single, tmp_path / "one")
    plain = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert "repeat" not in plain and all("repeat" not in row and "sustainable_eps_spread" not in row
                                         for row in plain["workloads"])
    assert "each search" not in search_table(single)


def test_repeating_is_for_the_search_only(tmp_path):
    req = MicroSuiteRequest(load_config(), SUITE, tmp_path / "run")
    with pytest.raises(CepkitError, match="repeating \\(2 times\\) is for the sustainable-throughput search only"):
        run_micro_suite(req, repeat=2)
    with pytest.raises(CepkitError, match="repeat must be a whole number >= 1"):
        run_micro_suite(req, search=CFG, repeat=0)
    assert not (tmp_path / "run").exists()


def test_compare_reads_the_representative_search_and_shows_the_spread(tmp_path):
    """A repeated sustainable suite run with real engine directories per step (the model of
    tests/validator/test_compare_page.py, its capacity moving from search to search)."""
    engine = "spark"
    _, cpu, rss, _ = ENGINES[engine]
    run = tmp_path / "sus"
    write_run_config(run, engine)
    write_spec(SUITE, run / "suite.xml")
    capacities = {"run-1": 3_000.0, "run-2": 5_000.0}

    def run_step(workload, step_dir: Path, run_changes, validate):
        capacity = capacities[Path(step_dir).parent.name]
        rate = workload.load.rate_eps * workload.dataset.streams
        frames, lat = micro_frames(engine, 5, min(rate, capacity), seed=int(rate))
        rec = write_engine_dir(step_dir / "engine", frames, seconds=5, cpu=cpu * min(1.0, rate / capacity),
                               rss_mib=rss, release_eps=rate, pull_eps=min(rate, capacity))
        stats = latency_stats(lat)
        return SimpleNamespace(
            status="completed", message="", verdict="PASSED" if validate else "NOT VALIDATED",
            p50_ms=stats.p50_ms, p99_ms=stats.p99_ms, peak_rss_mib=round(rec["resources"]["peak_rss_bytes"] / 2**20, 1),
            mean_cpu_percent=rec["resources"]["mean_cpu_percent"], state_mib=None,
            latency_count=stats.count, p99_ci_low_ms=stats.p99_ci_low_ms, p99_ci_high_ms=stats.p99_ci_high_ms)

    cfg = SearchConfig(duration_s=5, max_steps=10, precision=1.5, validate_steps=False, min_rate_eps=100.0)
    workload = SUITE.workloads[0]
    result = repeat_search(run_step, workload, run / workload.name, cfg, 2)
    write_summary(SUITE, [result], run)
    write_comparison([run], tmp_path / "cmp")
    doc = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    c = cells(doc, workload.name)
    a, b = (s.sustainable_eps for s in result.searches)
    assert a < b and c["sustainable_eps"][0]["value"] == a          # the representative: the lower middle
    assert c["sustainable_eps_spread"][0]["spread"] == {"median": (a + b) / 2, "min": a, "max": b, "n": 2, "of": 2}
    assert c["sustainable_eps_spread"][0]["text"].endswith("(median of 2 searches)")
    assert c["search_steps"][0]["value"] == len(result.searches[0].steps)
    best = result.best_step()
    # The other figures are the representative's best step's, read from its directory under run-1/.
    assert Path(best.run_dir).parent.name == "run-1"
    assert c["peak_rss_mib"][0]["value"] == best.peak_rss_mib
