"""`cepkit pairs --repeat K` (cepkit_app/pipelines/repeat.py, cepkit_app/cli/pairs_cmd.py): the
plan's layout and order, the inputs each run gets, repeat.json and repeat.md as the runs come in,
the command's argument errors; without an engine (run directories built as
tests/validator/test_compare_repeat.py builds them). One end-to-end run on Spark behind `e2e`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from cepkit_app.cli import main
from cepkit_app.pipelines.repeat import (RepeatPlan, RunInputs, repeat_count, repeat_document, repeat_text,
                                         run_repeats, write_repeat_summary)
from kit.errors import CepkitError
from tests.helpers import SHORT_PAIRS, cepkit_command
from tests.validator.test_compare_page import cells
from tests.validator.test_compare_repeat import make_run, pairs_inputs, repeated  # noqa: F401 (fixtures)
from validator.compare_page import write_comparison
from validator.compare_runs import read_repeat


@pytest.mark.parametrize("given, k", [("1", 1), ("3", 3), (" 12 ", 12), (2, 2)])
def test_repeat_counts(given, k):
    assert repeat_count(given) == k


@pytest.mark.parametrize("given", ["0", "-1", "x", "1.5", "", True])
def test_a_bad_repeat_count_is_one_line(given):
    with pytest.raises(CepkitError, match=r"^--repeat: must be a whole number >= 1, got "):
        repeat_count(given)


def test_the_plans_layout_and_order(tmp_path):
    one = RepeatPlan(tmp_path / "r1", 3, ("spark",))
    assert [one.run_dir(e, i).relative_to(tmp_path).as_posix() for i, e in one.order()] == [
        "r1/run-1", "r1/run-2", "r1/run-3"]
    both = RepeatPlan(tmp_path / "r2", 2, ("spark", "flink"))
    # Run i of every engine before run i + 1 of any: a drift of the machine falls on both alike.
    assert both.order() == [(1, "spark"), (1, "flink"), (2, "spark"), (2, "flink")]
    assert both.run_dir("flink", 2) == tmp_path / "r2" / "flink" / "run-2"
    (tmp_path / "taken").mkdir()
    with pytest.raises(CepkitError, match="taken: directory already exists"):
        RepeatPlan(tmp_path / "taken", 2, ("spark",))
    with pytest.raises(CepkitError, match="whole number of runs >= 1"):
        RepeatPlan(tmp_path / "r3", 0, ("spark",))
    with pytest.raises(CepkitError, match="distinct engines"):
        RepeatPlan(tmp_path / "r3", 2, ("spark", "spark"))


def test_later_runs_take_the_first_runs_inputs(tmp_path):
    first = tmp_path / "run-1"
    assert RunInputs(None, None, 10, True).reused(first) == RunInputs(first / "data", first / "strategies.xml",
                                                                      None, False)
    given = RunInputs(tmp_path / "mine", tmp_path / "s.xml", 5, True)
    assert given.reused(first) == RunInputs(tmp_path / "mine", first / "strategies.xml", None, False)


def test_each_run_gets_its_directory_and_the_same_inputs(repeated):
    parent, calls, doc = repeated
    assert [(e, i, d.relative_to(parent).as_posix()) for e, i, d, _ in calls] == [
        ("spark", 1, "spark/run-1"), ("flink", 1, "flink/run-1"), ("spark", 2, "spark/run-2"),
        ("flink", 2, "flink/run-2"), ("spark", 3, "spark/run-3"), ("flink", 3, "flink/run-3")]
    assert calls[0][3] == RunInputs()               # the first run generates its inputs
    first = parent / "spark" / "run-1"
    for _, _, _, inputs in calls[1:]:               # every other run, of either engine, takes them
        assert inputs == RunInputs(first / "data", first / "strategies.xml", None, False)
    assert sorted(p.name for p in parent.iterdir()) == ["flink", "repeat.json", "repeat.md", "spark"]
    assert json.loads((parent / "repeat.json").read_text()) == doc


def test_repeat_json_holds_each_run_and_the_spread_per_engine(repeated):
    parent, _, doc = repeated
    assert (doc["kind"], doc["schema_version"], doc["benchmark"], doc["repeat"]) == ("cepkit.repeat", 1, "pairs", 3)
    assert doc["engines"] == ["spark", "flink"] and doc["complete"] and not doc["passed"]
    runs = {r["run_dir"]: r for r in doc["runs"]}
    assert [r["index"] for r in doc["runs"]] == [1, 1, 2, 2, 3, 3]
    assert (runs["spark/run-2"]["verdict"], runs["spark/run-2"]["counted"]) == ("FAILED", False)
    assert (runs["flink/run-3"]["status"], runs["flink/run-3"]["p99_ms"]) == ("unsustainable", None)
    for r in doc["runs"]:
        summary = parent / r["run_dir"] / "report" / "summary.json"
        if summary.exists():       # every p99 with its order count and interval
            ps = json.loads(summary.read_text())["pscore"]
            assert (r["orders"], r["p99_ci_low_ms"], r["p99_ci_high_ms"]) == (
                ps["mi_rows"], ps["p99_ci_low_ms"], ps["p99_ci_high_ms"])
            assert r["p99_text"].startswith(f"p99 = {r['p99_ms']:,} ms (")
    spark, flink = doc["spread"]
    assert (spark["engine"], spark["runs"], spark["counted"], spark["passed"]) == ("spark", 3, 2, False)
    counted = sorted(runs[f"spark/run-{i}"]["p99_ms"] for i in (1, 3))
    assert spark["p99_ms"] == {"median": sum(counted) / 2, "min": counted[0], "max": counted[1], "n": 2, "of": 3}
    assert spark["throughput_eps"] == {"median": 5750.0, "min": 5500.0, "max": 6000.0, "n": 2, "of": 3}
    assert flink["pscore"]["n"] == 2 and flink["pscore"]["median"] > spark["pscore"]["median"]
    assert read_repeat(parent).repeat == 3


def test_the_text_lists_every_run_then_the_median_lines(repeated):
    parent, _, doc = repeated
    text = repeat_text(doc)
    lines = text.splitlines()
    assert lines[0].startswith("| run | engine | verdict | status | MarketOrder p99")
    assert sum(line.startswith("| spark/run-") or line.startswith("| flink/run-") for line in lines) == 6
    spark_p99 = doc["spread"][0]["p99_ms"]
    assert (f"spark: MarketOrder p99 {spark_p99['median']:,.0f} ms [{spark_p99['min']:,}–{spark_p99['max']:,} ms] "
            f"(median of 2 of 3 runs)") in lines
    assert any(line.startswith("flink: pscore ") and line.endswith("(median of 2 of 3 runs)") for line in lines)
    assert "spark: throughput 5,750 ev/s [5,500–6,000 ev/s] (median of 2 of 3 runs)" in lines
    assert "spark: not counted: spark/run-2 FAILED" in lines
    assert "flink: not counted: flink/run-3 NOT VALIDATED (unsustainable)" in lines
    assert (parent / "repeat.md").read_text() == f"# Repeated Pairs runs\n\n{text}"


def test_the_summary_follows_the_runs_and_a_failing_run_keeps_it(tmp_path, pairs_inputs):  # noqa: F811
    plan = RepeatPlan(tmp_path / "rep", 3, ("spark",))
    seen = []

    def run_one(engine, i, run_dir, inputs):
        if i == 3:
            raise CepkitError("the engine could not start")
        make_run(run_dir, engine, pairs_inputs, base_ms=100 * i)
        # After run 1 the summary is there already, of that run alone.
        seen.append(json.loads((plan.parent / "repeat.json").read_text())["runs"] if i == 2 else None)

    with pytest.raises(CepkitError, match="could not start"):
        run_repeats(plan, RunInputs(), run_one)
    assert [r["run_dir"] for r in seen[1]] == ["run-1"]
    doc = json.loads((plan.parent / "repeat.json").read_text())
    assert [r["run_dir"] for r in doc["runs"]] == ["run-1", "run-2"]
    assert not doc["complete"] and not doc["passed"] and doc["spread"][0]["p99_ms"]["n"] == 2
    assert "incomplete: 2 of the 3 runs asked" in (plan.parent / "repeat.md").read_text()
    # Written atomically: no staging file is left beside them.
    assert sorted(p.name for p in plan.parent.iterdir()) == ["repeat.json", "repeat.md", "run-1", "run-2"]
    # Every run passed: the repetition passed, and its summary says so.
    whole = RepeatPlan(tmp_path / "whole", 2, ("spark",))
    for i in (1, 2):
        make_run(whole.run_dir("spark", i), "spark", pairs_inputs, base_ms=50 * i)
    done = [("spark", i, whole.run_dir("spark", i)) for i in (1, 2)]
    assert write_repeat_summary(whole, done)["passed"]
    # `cepkit compare` reads the one-engine layout too: one column, every run counted.
    write_comparison([whole.parent], tmp_path / "cmp")
    c = cells(json.loads((tmp_path / "cmp" / "compare.json").read_text()), "Pairs")
    assert (c["runs"][0]["text"], c["verdict"][0]["text"], c["p99_ms"][0]["spread"]["n"]) == ("2 of 2", "PASSED", 2)
    # A run of another engine than the plan's is refused.
    with pytest.raises(CepkitError, match="ran on spark, but the repetition asked for flink"):
        repeat_document(RepeatPlan(tmp_path / "other", 1, ("flink",)), [("flink", 1, whole.run_dir("spark", 1))])


def test_no_run_passed_no_median(tmp_path, pairs_inputs):  # noqa: F811
    plan = RepeatPlan(tmp_path / "rep", 2, ("spark",))
    run_repeats(plan, RunInputs(),
                lambda engine, i, run_dir, inputs: make_run(run_dir, engine, pairs_inputs, base_ms=100, drop_orders=i))
    doc = json.loads((plan.parent / "repeat.json").read_text())
    assert doc["spread"][0]["p99_ms"] == {"median": None, "min": None, "max": None, "n": 0, "of": 2}
    assert not doc["passed"] and all(r["verdict"] == "FAILED" for r in doc["runs"])
    assert "MarketOrder p99 – (no completed, PASSED run of 2)" in repeat_text(doc)


# -- the command line ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, line", [
    (["pairs", "--repeat", "0"], "cepkit: error: --repeat: must be a whole number >= 1, got '0'"),
    (["pairs", "--repeat", "two", "--quick"], "cepkit: error: --repeat: must be a whole number >= 1, got 'two'"),
    (["pairs", "--repeat", "2", "--out", ""], "cepkit: error: --out: must name a file or directory"),
    (["micro", "--suite", "filtering", "--quick", "--repeat", "2"],
     "cepkit: error: --repeat 2: repeats the sustainable-throughput search; add --sustainable"),
    (["micro", "--suite", "filtering", "--quick", "--sustainable", "--repeat", "0"],
     "cepkit: error: --repeat: must be a whole number >= 1, got '0'"),
    # Regression (issue 45): a huge count sized the plan before it was checked (a MemoryError).
    (["pairs", "--quick", "--repeat", "10000000000"], "cepkit: error: --repeat: at most 1000 runs, got '10000000000'"),
    (["pairs", "--quick", "--repeat", "1001"], "cepkit: error: --repeat: at most 1000 runs, got '1001'"),
    (["pairs", "--quick", "--repeat", "9" * 5000], "cepkit: error: --repeat: at most 1000 runs, got '9999"),
    (["micro", "--suite", "filtering", "--quick", "--sustainable", "--repeat", "10000000000"],
     "cepkit: error: --repeat: at most 1000 runs, got '10000000000'"),
])
@pytest.mark.usefixtures("memory_cap")
def test_repeat_argument_errors_are_one_line_exit_2(argv, line, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []           # nothing made, no engine started


def test_an_existing_out_is_refused_before_any_run(tmp_path, capsys):
    (tmp_path / "rep").mkdir()
    assert main(["pairs", "--quick", "--repeat", "2", "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert err == f"cepkit: error: {tmp_path / 'rep'}: directory already exists; refusing to overwrite it\n"
    assert list((tmp_path / "rep").iterdir()) == []


# Two engine runs (~2.5 min): by hand with the slow suites, not in CI, whose e2e stage has no room
# for it; the repetition's code paths run in CI above on real run directories (real sink, real
# validator) through the same command line.
@pytest.mark.spark
@pytest.mark.slow
def test_pairs_repeat_2_on_the_short_profile(tmp_path):
    """Two runs of the short Pairs profile on Spark over one dataset: both PASSED, and repeat.json
    with the median and range of the p99, pscore and throughput over both."""
    parent = tmp_path / "rep"
    proc = subprocess.run([*cepkit_command(), "pairs", "-c", str(SHORT_PAIRS), "--repeat", "2", "--out", str(parent)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in parent.iterdir()) == ["repeat.json", "repeat.md", "run-1", "run-2"]
    # One dataset, generated by run 1; run 2 replayed it and has none of its own.
    assert (parent / "run-1" / "data" / "manifest.json").is_file() and not (parent / "run-2" / "data").exists()
    assert (parent / "run-1" / "strategies.xml").read_text() == (parent / "run-2" / "strategies.xml").read_text()
    doc = json.loads((parent / "repeat.json").read_text())
    assert doc["passed"] and doc["complete"]
    assert [(r["run_dir"], r["verdict"], r["status"]) for r in doc["runs"]] == [
        ("run-1", "PASSED", "completed"), ("run-2", "PASSED", "completed")]
    (spread,) = doc["spread"]
    for key in ("p99_ms", "pscore", "throughput_eps"):
        values = sorted(r[key] for r in doc["runs"])
        assert spread[key] == {"median": sum(values) / 2, "min": values[0], "max": values[1], "n": 2, "of": 2}
    for r in doc["runs"]:
        assert r["orders"] > 0 and r["throughput_eps"] > 1000
    assert "MarketOrder p99" in proc.stdout and "(median of 2 runs)" in proc.stdout
    assert "every run PASSED" in proc.stderr
    assert os.path.getsize(parent / "repeat.md") > 0
