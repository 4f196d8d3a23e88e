"""`cepkit compare` on repeated runs (validator/compare_page.py, compare_runs.py): a repetition
directory written by the real repetition pipeline (cepkit_app/pipelines/repeat.py) over Pairs run
directories built as tests/validator/test_compare_page.py builds them (real dataset, real sink,
real validator), three runs of each of two engines, some of which do not count; and plain run
directories grouped with `spread=True`. No engine."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pyarrow as pa
import pytest

from cepkit_app.pipelines.repeat import RepeatPlan, RunInputs, run_repeats
from kit.errors import CepkitError
from tests.helpers import SCHEMAS
from tests.validator.test_compare_page import (ENGINES, W0, cells, html_table, images, micro_runs,  # noqa: F401
                                               pairs_inputs, write_engine_dir, write_run_config)
from validator.compare_page import comparison_text, write_comparison
from validator.compare_runs import pairs_figures, read_repeat, read_run
from validator.pairs_run import PairsValidation, validate_pairs

# (engine, run number) -> how the run went: base latency ms, pull rate ev/s, MarketOrders left out
# (so validation FAILS), engine run status (not completed: not validated).
RUNS = {("spark", 1): (80, 6000.0, 0, "completed"), ("flink", 1): (20, 6000.0, 0, "completed"),
        ("spark", 2): (300, 5000.0, 2, "completed"), ("flink", 2): (45, 6000.0, 0, "completed"),
        ("spark", 3): (140, 5500.0, 0, "completed"), ("flink", 3): (30, 6000.0, 0, "unsustainable")}


def make_run(run: Path, engine: str, pairs_inputs, *, base_ms: int, pull_eps: float = 6000.0,  # noqa: F811
             drop_orders: int = 0, status: str = "completed") -> Path:
    """A Pairs run directory whose engine answered `base_ms` (+0..39) ms after each triggering tick,
    taking `pull_eps` events a second, without the first `drop_orders` MarketOrders; validated by
    the real validator when its engine run completed."""
    data, strategies, expected, sim_start = pairs_inputs
    _, cpu, rss, _ = ENGINES[engine]
    write_run_config(run, engine)
    frames = []
    for name, df in expected.items():
        if name == "MarketOrder":
            df = df.iloc[drop_orders:]
        df = df.assign(inputTS=W0 + (df["inputTickTS"] - sim_start))
        for k, (input_ts, rows) in enumerate(df.groupby("inputTS", sort=True)):
            table = pa.Table.from_pandas(rows.reset_index(drop=True), schema=SCHEMAS[name].arrow_schema())
            frames.append((name, input_ts + base_ms + k % 40, table))
    write_engine_dir(run / "engine", frames, seconds=300, cpu=cpu + base_ms / 10, rss_mib=rss + base_ms,
                     release_eps=6000.0, pull_eps=pull_eps, sim_start=sim_start, status=status)
    if status == "completed":
        validate_pairs(PairsValidation(data, strategies, run / "report", run / "engine" / "outputs", verify=False))
    return run


@pytest.fixture(scope="session")
def repeated(tmp_path_factory, pairs_inputs):  # noqa: F811
    """`run_repeats` of 3 runs on spark and flink, each run made by `make_run` as RUNS says; the
    repetition directory and every call's (engine, i, run_dir, inputs)."""
    parent = tmp_path_factory.mktemp("repeat") / "repeat-pairs"
    calls = []

    def run_one(engine, i, run_dir, inputs):
        calls.append((engine, i, run_dir, inputs))
        base, pull, drop, status = RUNS[engine, i]
        make_run(run_dir, engine, pairs_inputs, base_ms=base, pull_eps=pull, drop_orders=drop, status=status)
        if not inputs.data_dir:         # the first run "generates" the inputs, as a Pairs run does
            shutil.copytree(pairs_inputs[0], run_dir / "data")
        shutil.copyfile(pairs_inputs[1], run_dir / "strategies.xml")

    doc = run_repeats(RepeatPlan(parent, 3, ("spark", "flink")), RunInputs(), run_one)
    return parent, calls, doc


def _p99s(parent: Path, engine: str) -> dict[int, int]:
    """Each run's MarketOrder p99 (the pscore's) as its report/summary.json holds it."""
    out = {}
    for i in (1, 2, 3):
        path = parent / engine / f"run-{i}" / "report" / "summary.json"
        if path.exists():
            out[i] = round(json.loads(path.read_text())["pscore"]["p99_latency_s"] * 1000)
    return out


def test_a_repeat_directory_is_one_column_per_engine_with_median_and_range(repeated, tmp_path):
    parent, _, _ = repeated
    page = write_comparison([parent], tmp_path / "cmp")
    doc = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert (doc["mode"], [r["column"] for r in doc["runs"]]) == ("repeat", ["spark", "flink"])
    assert [r["run_dir"] for r in doc["runs"]] == [str(parent)] * 2
    c = cells(doc, "Pairs")
    spark, flink = _p99s(parent, "spark"), _p99s(parent, "flink")
    assert len(spark) == 3 and len(flink) == 2        # flink's run 3 stopped: not validated
    # Counted: spark runs 1 and 3 (run 2 FAILED), flink runs 1 and 2 (run 3 unsustainable).
    for col, counted in ((0, [spark[1], spark[3]]), (1, [flink[1], flink[2]])):
        p99 = c["p99_ms"][col]
        assert p99["spread"] == {"median": statistics.median(counted), "min": min(counted), "max": max(counted),
                                 "n": 2, "of": 3}
        assert (p99["value"], p99["count"]) == (statistics.median(counted), 2)
        assert p99["text"] == (f"{statistics.median(counted):,.0f} ms [{min(counted):,} ms–{max(counted):,} ms] "
                               f"(median of 2 of 3 runs)").replace(" ms–", "–")
        assert c["runs"][col]["value"] == 2 and c["runs"][col]["count"] == 3
        assert c["verdict"][col]["text"] == "FAILED"        # not every run passed
    assert spark[1] < spark[3] and c["p99_ms"][0]["value"] == (spark[1] + spark[3]) / 2   # an even count's median
    assert c["runs"][0]["text"] == "2 of 3 (not counted: run-2: FAILED)"
    assert "run-3: NOT VALIDATED (unsustainable)" in c["runs"][1]["text"]
    # Throughput: what the engine pulled, per second (6,000 and 5,500 ev/s for spark's counted runs).
    assert c["throughput_eps"][0]["spread"] == {"median": 5750.0, "min": 5500.0, "max": 6000.0, "n": 2, "of": 3}
    assert c["throughput_eps"][1]["spread"]["median"] == 6000.0
    ps = [json.loads((parent / "spark" / f"run-{i}" / "report" / "summary.json").read_text())["pscore"]["pscore"]
          for i in (1, 3)]
    assert c["pscore"][0]["spread"]["median"] == pytest.approx(sum(ps) / 2)
    assert c["pscore"][1]["value"] > c["pscore"][0]["value"]          # flink answered sooner
    # Each run's own p99 keeps its order count and interval.
    assert re.search(r"run-1: [\d,]+ orders: [\d,]+ ms \(", c["p99_runs"][0]["text"])
    html = page.read_text(encoding="utf-8")
    table = html_table(html, 1)
    assert table[""] == ["spark", "flink"] and table["p99_ms"] == [c["p99_ms"][0]["text"], c["p99_ms"][1]["text"]]
    assert images(html) == [] and doc["figures"] == []
    text = comparison_text(doc)
    assert "median of 2 of 3 runs" in text and text.splitlines()[0] == "Pairs"


def test_plain_run_directories_of_one_engine_are_spread_when_asked(repeated, tmp_path):
    parent, _, _ = repeated
    runs = [parent / "spark" / "run-1", parent / "flink" / "run-1", parent / "spark" / "run-3"]
    write_comparison(runs, tmp_path / "plain")
    plain = json.loads((tmp_path / "plain" / "compare.json").read_text())
    assert plain["mode"] == "pairs" and len(plain["runs"]) == 3      # as before: one column per run
    write_comparison(runs, tmp_path / "spread", spread=True)
    doc = json.loads((tmp_path / "spread" / "compare.json").read_text())
    assert [r["column"] for r in doc["runs"]] == ["spark", "flink"] and doc["mode"] == "repeat"
    c = cells(doc, "Pairs")
    p99 = _p99s(parent, "spark")
    assert c["p99_ms"][0]["spread"] == {"median": (p99[1] + p99[3]) / 2, "min": p99[1], "max": p99[3], "n": 2,
                                        "of": 2}
    assert c["verdict"][0]["text"] == "PASSED" and c["p99_ms"][1]["spread"]["n"] == 1
    assert "median of 1 run)" in c["pscore"][1]["text"]


def test_a_plain_run_beside_a_repeat_directory_is_a_spread_column_too(repeated, tmp_path):
    parent, _, _ = repeated
    other = shutil.copytree(parent / "spark" / "run-1", tmp_path / "another-spark-run")
    doc_path = write_comparison([parent, other], tmp_path / "cmp").parent / "compare.json"
    doc = json.loads(doc_path.read_text())
    assert [r["column"] for r in doc["runs"]] == ["spark (repeat-pairs)", "flink", "spark (another-spark-run)"]
    assert cells(doc, "Pairs")["runs"][2]["text"] == "1 of 1"


def test_the_pipelines_repeat_json_reads_back(repeated):
    parent, _, doc = repeated
    record = read_repeat(parent)
    assert (record.benchmark, record.repeat, record.engines) == ("pairs", 3, ("spark", "flink"))
    assert [(e, p.relative_to(parent).as_posix()) for e, p in record.runs] == [
        ("spark", "spark/run-1"), ("flink", "flink/run-1"), ("spark", "spark/run-2"), ("flink", "flink/run-2"),
        ("spark", "spark/run-3"), ("flink", "flink/run-3")]
    assert [f["run_dir"] for f in doc["runs"]] == [p.relative_to(parent).as_posix() for _, p in record.runs]
    with pytest.raises(CepkitError, match="a repetition directory"):
        read_run(parent)


def _edit_copy(parent: Path, tmp_path: Path, change) -> Path:
    copy = shutil.copytree(parent, tmp_path / "copy")
    doc = json.loads((copy / "repeat.json").read_text())
    change(doc)
    (copy / "repeat.json").write_text(json.dumps(doc))
    return copy


@pytest.mark.parametrize("change, named", [
    (lambda d: d.update(kind="cepkit.compare"), "repeat.json:kind: expected 'cepkit.repeat'"),
    (lambda d: d.update(schema_version=2), "repeat.json:schema_version: expected 1, got 2"),
    (lambda d: d.update(benchmark="micro"), "repeat.json:benchmark: expected 'pairs'"),
    (lambda d: d.update(repeat=0), "repeat.json:repeat: expected an integer >= 1"),
    (lambda d: d.pop("runs"), "repeat.json:runs: expected a list"),
    (lambda d: d["runs"][0].update(run_dir="../../elsewhere"), "repeat.json:runs[0].run_dir: expected a path inside"),
    (lambda d: d["runs"][1].update(run_dir="/etc"), "repeat.json:runs[1].run_dir: expected a path inside"),
    (lambda d: d["runs"][2].pop("engine"), "repeat.json:runs[2].engine: missing"),
    (lambda d: d.update(engines=["spark"]), "repeat.json:runs: runs of flink, which engines does not name"),
    (lambda d: d["runs"][0].update(engine="flink"), "spark/run-1: a run of spark, but"),
    (lambda d: d["runs"][3].update(run_dir="flink/run-9"), "flink/run-9: not a run directory (not found)"),
])
def test_a_bad_repeat_json_is_one_line_naming_it(repeated, tmp_path, change, named):
    parent, _, _ = repeated
    copy = _edit_copy(parent, tmp_path, change)
    with pytest.raises(CepkitError, match=re.escape(named)) as e:
        write_comparison([copy], tmp_path / "cmp")
    assert "\n" not in str(e.value) and not (tmp_path / "cmp").exists()


def test_micro_runs_have_no_spread_column(repeated, micro_runs, tmp_path):  # noqa: F811
    parent, _, _ = repeated
    with pytest.raises(CepkitError, match="a microbenchmark suite run, but spreads are of Pairs runs"):
        write_comparison([parent, micro_runs["spark"]], tmp_path / "cmp")
    with pytest.raises(CepkitError, match="spreads are of Pairs runs"):
        write_comparison([micro_runs["spark"], micro_runs["flink"]], tmp_path / "cmp", spread=True)
    assert not (tmp_path / "cmp").exists()


def test_a_runs_figures_come_from_what_it_recorded(repeated):
    parent, _, _ = repeated
    f = pairs_figures(parent / "spark" / "run-1")
    summary = json.loads((parent / "spark" / "run-1" / "report" / "summary.json").read_text())["pscore"]
    run = json.loads((parent / "spark" / "run-1" / "engine" / "run.json").read_text())
    assert (f.engine, f.verdict, f.status, f.counted, f.scale_factor) == ("spark", "PASSED", "completed", True, 1)
    assert (f.p99.n, f.p99.low, f.p99.high) == (summary["mi_rows"], summary["p99_ci_low_ms"],
                                                summary["p99_ci_high_ms"])
    assert f.pscore == summary["pscore"] and f.throughput_eps == 6000.0
    assert f.mean_cpu_percent == run["resources"]["mean_cpu_percent"]
    assert f.peak_rss_mib == round(run["resources"]["peak_rss_bytes"] / 2**20, 1)
    stopped = pairs_figures(parent / "flink" / "run-3")
    assert (stopped.verdict, stopped.status, stopped.counted, stopped.p99, stopped.pscore) == (
        "NOT VALIDATED", "unsustainable", False, None, None)
