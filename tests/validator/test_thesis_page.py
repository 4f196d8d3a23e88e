"""The thesis results page (validator/thesis_page.py, benchmarks/thesis_results.py) on run
directories with the exact shapes the pipelines write (built as tests/validator/test_compare_page.py
builds them: the real sink, the real validator), plus micro sustainable summaries written by the
suite's own writer over the shipped patterns and count-windows suites."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomli_w

from cepkit_app.pipelines.micro_summary import write_summary
from cepkit_app.pipelines.sustainable import SearchResult, Step, write_search
from kit.errors import CepkitError
from kit.shipped import suite_path
from kit.workload import read_suite, write_spec
from tests.helpers import REPO
from tests.validator.test_compare_page import make_pairs_run, pairs_inputs, write_run_config  # noqa: F401
from validator.thesis_page import THESIS_TABLE_7_1, ThesisInputs, read_micro_points, read_pairs_rows, \
    write_thesis_page


def sustainable_run(run: Path, engine: str, suite_name: str, workloads: list[str], eps: dict[str, float],
                    failing: dict[str, float] | None = None) -> Path:
    """A `cepkit micro --sustainable` run directory of the shipped suite's chosen workloads: its
    config, suite.xml, summary.json and each workload's search.json by the pipeline's writers (one
    confirmed step per workload, after an unsustainable one at `failing[name]` if given)."""
    suite = read_suite(suite_path(suite_name))
    chosen = tuple(w for w in suite.workloads if w.name in workloads)
    suite = type(suite)(suite.name, suite.quick, chosen)
    write_run_config(run, engine)
    write_spec(suite, run / "suite.xml")
    results = []
    for w in chosen:
        rate = eps[w.name]
        steps = [Step(1, rate, "confirm", True, "ok", "completed", "PASSED", 0, 10, 100, 200, 900.0, 150.0,
                      str(run / w.name / "step-01"), None, 500, 190, 230, 120,
                      {"source": "jvm", "sink": "jvm", "why": None}, None,
                      {"family": "engine", "queries": {"q7": "Java PatternLogic"}})]
        if failing and w.name in failing:
            steps.insert(0, Step(0, failing[w.name], "explore", False, "behind", "completed", "NOT VALIDATED",
                                 10**6, 10, 900, 2000, 900.0, 190.0, str(run / w.name / "step-00")))
        (run / w.name).mkdir(parents=True)
        results.append(write_search(run / w.name, SearchResult(w.name, rate, True, tuple(steps))))
    write_summary(suite, results, run)
    return run


def copy_run(src: Path, dst: Path, **rate_or_run) -> Path:
    """`src` under another name, its config.toml changed (e.g. engine="flink" or quick=True): a
    run of another engine or profile with the same validated figures, without another validation."""
    shutil.copytree(src, dst)
    cfg = tomllib.loads((dst / "config.toml").read_text())
    for key, value in rate_or_run.items():
        (cfg["run"] if key == "engine" else cfg["pairs"]["rate"])[key] = value
    (dst / "config.toml").write_text(tomli_w.dumps(cfg))
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory, pairs_inputs):  # noqa: F811
    root = tmp_path_factory.mktemp("thesis")
    spark = make_pairs_run(root / "pairs-spark", "spark", pairs_inputs)
    pairs = {"spark": spark, "flink": copy_run(spark, root / "pairs-flink", engine="flink")}
    quick = copy_run(spark, root / "pairs-quick", quick=True)
    q7 = ["patterns-interval-w10s", "patterns-interval-w60s", "patterns-interval-w600s",
          "patterns-cardinality-maxid100", "patterns-cardinality-maxid10000", "patterns-selectivity-0.1pct",
          "patterns-selectivity-10pct"]
    micro = {e: sustainable_run(root / f"q7-{e}", e, "patterns", q7,
                                {w: 1000.0 * (i + 1) * (3 if e == "flink" else 1) for i, w in enumerate(q7)})
             for e in ("spark", "flink")}
    cw = ["count-windows-window-sliding-r500-sum", "count-windows-window-sliding-r5000-sum",
          "count-windows-window-tumbling-r500-sum", "count-windows-window-tumbling-r5000-sum"]
    micro["cw"] = sustainable_run(root / "cw-spark", "spark", "count-windows", cw, {w: 5000.0 for w in cw},
                                  failing={cw[0]: 10_000.0})
    return pairs, quick, micro


def test_table_7_1_puts_our_runs_beside_the_thesis(runs, tmp_path):
    pairs, _, micro = runs
    rows = read_pairs_rows([pairs["spark"], pairs["flink"]])
    assert [(r.engine, r.sf) for r in rows] == [("flink", 1), ("spark", 1)]
    page = write_thesis_page(ThesisInputs(rows, read_micro_points(micro.values())), tmp_path / "out")
    doc = json.loads((page.parent / "results.json").read_text())
    assert doc["kind"] == "cepkit.thesis-results"
    table = doc["table_7_1"]
    sf1 = [r for r in table if r["sf"] == 1]
    assert [r["who"] for r in sf1] == ["thesis engine X", "thesis engine Y", "cepkit on flink", "cepkit on spark"]
    assert sf1[0]["p99"] == "63 ms" and sf1[1]["pscore"] == "136.36"
    ours = sf1[2]
    assert "orders" in ours["p99"] and "95 % CI" in ours["p99"] and ours["verdict"] == "PASSED"
    assert len([r for r in table if r["thesis"]]) == 2 * len(THESIS_TABLE_7_1)
    sf3y = next(r for r in table if r["sf"] == 3 and r["who"] == "thesis engine Y")
    assert sf3y["verdict"] == "could not run"
    assert doc["figures"] == ["figures/q7.png", "figures/count-windows.png"]
    html = page.read_text()
    assert html.count('<img src="data:image/png;base64,') == 2
    md = (page.parent / "results.md").read_text()
    assert "| 1 | thesis engine X | standard (2 h) | 25 | 63 ms | 47.62 |" in md
    # (d): each standard run in detail, from its validation summary: per phase and its health.
    details = doc["details"]
    assert [d["title"] for d in details] == ["cepkit on flink, SF 1", "cepkit on spark, SF 1"]
    summary = json.loads((pairs["spark"] / "report" / "summary.json").read_text())
    phases = details[1]["phases"]
    assert [p["phase"].rstrip(" *") for p in phases] == [p["name"] for p in summary["phases"]]
    assert [p["phase"].endswith(" *") for p in phases] == [p["measured"] for p in summary["phases"]]
    mo = [p["streams"]["MarketOrder"]["count"] for p in summary["phases"]]
    assert [p["orders"] for p in phases] == [f"{n:,}" for n in mo] and sum(mo) > 0
    assert details[1]["summary"].startswith("PASSED; MarketOrder p99 = ")
    assert "## The standard runs in detail" in md and "### cepkit on spark, SF 1" in md
    assert "The standard runs in detail" in html and html.count("<h3>") == 2


def test_micro_points_carry_the_thesis_parameters(runs):
    _, _, micro = runs
    pts = read_micro_points([micro["spark"]])
    by = {p.workload: p for p in pts}
    w60 = by["patterns-interval-w60s"]
    assert w60.experiment == "interval" and w60.params["within_ms"] == "60000"
    assert w60.params["max_id"] == "10000" and w60.params["selectivity"] == "0.001"
    assert w60.eps == 2000.0 and w60.solid
    assert w60.plan == "engine; jvm -> jvm"        # the plan family and connectors its search ran


def test_a_quick_run_is_not_the_thesis_run(runs, tmp_path):
    _, quick, _ = runs
    with pytest.raises(CepkitError, match="not the thesis's two-hour standard run"):
        read_pairs_rows([quick])
    rows = read_pairs_rows([quick], allow_quick=True)
    assert rows[0].profile.startswith("standard (quick")


def test_the_script_writes_the_page_and_refuses_an_existing_dir(runs, tmp_path):
    pairs, _, micro = runs
    script = REPO / "benchmarks" / "thesis_results.py"
    out = tmp_path / "page"
    args = [sys.executable, str(script), "--out", str(out), "--pairs", str(pairs["spark"]),
            "--micro", str(micro["spark"]), "--note", "old"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "## Table 7.1 redone" in proc.stdout and (out / "results.html").is_file()
    again = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    # Kept: its rows and points; its notes too, unless --fresh-notes (then only the new --note lines).
    notes = [sys.executable, str(script), "--keep", str(out), "--note", "restated"]
    assert subprocess.run(notes + ["--out", str(tmp_path / "kept")], capture_output=True, timeout=300).returncode == 0
    assert subprocess.run(notes + ["--fresh-notes", "--out", str(tmp_path / "fresh")], capture_output=True,
                          timeout=300).returncode == 0
    first, kept, fresh = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("page", "kept", "fresh"))
    assert (first["notes"], kept["notes"], fresh["notes"]) == (["old"], ["old", "restated"], ["restated"])
    assert kept["micro"] == fresh["micro"] == first["micro"] and fresh["pairs"] == first["pairs"]


def test_a_kept_page_carries_its_rows_details_points_and_notes_over(runs, tmp_path):
    """The committed page grows run by run: a page built from nothing but an earlier page and one
    new micro run holds the earlier page's Table 7.1 rows, run details, points and notes whole, even
    with the earlier runs' directories gone; a run given again replaces its kept copy."""
    from validator.thesis_page import read_kept_page

    pairs, _, micro = runs
    first = write_thesis_page(ThesisInputs(read_pairs_rows([pairs["spark"], pairs["flink"]]),
                                           read_micro_points([micro["spark"]]), ("the first runs",)),
                              tmp_path / "first").parent
    old = json.loads((first / "results.json").read_text())
    assert old["schema_version"] == 2 and all("point" in m for m in old["micro"])
    moved = tmp_path / "moved"        # the runs' directories are gone: the page alone carries them
    shutil.copytree(first, moved)
    kept = read_kept_page(moved)
    second = write_thesis_page(ThesisInputs((), read_micro_points([micro["flink"]])).keeping(kept),
                               tmp_path / "second").parent
    new = json.loads((second / "results.json").read_text())
    assert new["table_7_1"] == old["table_7_1"] and new["pairs"] == old["pairs"]
    assert new["details"] == old["details"] and len(new["details"]) == 2
    assert new["notes"] == ["the first runs"]
    engines = sorted({m["engine"] for m in new["micro"]})
    assert engines == ["flink", "spark"] and len(new["micro"]) == 2 * len(old["micro"])
    assert [m for m in new["micro"] if m["engine"] == "spark"] == old["micro"]
    assert (first / "results.md").read_text().split("## Microbenchmarks")[0] == \
        (second / "results.md").read_text().split("## Microbenchmarks")[0]
    # A run given again is read anew, not listed twice.
    again = ThesisInputs(read_pairs_rows([pairs["spark"]]), read_micro_points([micro["spark"]])).keeping(kept)
    assert sorted(r.engine for r in again.pairs) == ["flink", "spark"] and len(again.micro) == len(old["micro"])
    assert len(again.details) == 1      # flink's kept details; spark's come from its run again


def test_two_runs_of_one_engine_at_one_sf_are_told_apart(runs, tmp_path):
    """A rerun (e.g. after a fix) sits beside the earlier run of the same engine and SF, kept or
    read anew: each row and section names its run directory; rows of their own SF stay as they were."""
    from validator.thesis_page import read_kept_page

    pairs, _, _ = runs
    rerun = copy_run(pairs["spark"], tmp_path / "rerun-spark")
    first = write_thesis_page(ThesisInputs(read_pairs_rows([pairs["spark"], pairs["flink"]]), ()),
                              tmp_path / "first").parent
    page = write_thesis_page(ThesisInputs(read_pairs_rows([rerun]), ()).keeping(read_kept_page(first)),
                             tmp_path / "second")
    doc = json.loads((page.parent / "results.json").read_text())
    ours = [r["who"] for r in doc["table_7_1"] if r["sf"] == 1 and not r["thesis"]]
    assert ours[0] == "cepkit on flink"
    assert sorted(ours[1:]) == ["cepkit on spark (pairs-spark)", "cepkit on spark (rerun-spark)"]
    headings = [d["heading"] for d in doc["details"]]
    assert headings[0] == "cepkit on flink, SF 1"
    assert sorted(headings[1:]) == ["cepkit on spark, SF 1 (pairs-spark)", "cepkit on spark, SF 1 (rerun-spark)"]
    assert {d["title"] for d in doc["details"]} == {"cepkit on flink, SF 1", "cepkit on spark, SF 1"}
    md = (page.parent / "results.md").read_text()
    assert "### cepkit on spark, SF 1 (rerun-spark)" in md and "| 1 | cepkit on spark (pairs-spark) |" in md
    assert page.read_text().count("<h3>cepkit on spark, SF 1 (") == 2
    # Kept again, the names are not added twice.
    third = write_thesis_page(ThesisInputs((), ()).keeping(read_kept_page(page.parent)), tmp_path / "third")
    assert json.loads((third.parent / "results.json").read_text())["details"] == doc["details"]


@pytest.mark.parametrize("content, message", [
    ('{"kind": "cepkit.micro-summary", "schema_version": 1}', "kind: expected 'cepkit.thesis-results', got "
                                                              "'cepkit.micro-summary'"),
    ('{"kind": "cepkit.thesis-results", "schema_version": 9}', "schema_version: expected 1 or 2, got 9"),
    ('{"kind": "cepkit.thesis-results", "schema_version": 2, "pairs": [{"engine": "spark"}]}', "not a results page"),
    ('{"kind": "cepkit.thesis-results", "schema_version": 1, "micro": [{"eps": "1"}]}', "micro[0]: no point"),
    ("{not json", "results.json"),
])
def test_a_page_that_cannot_be_kept_is_one_line_naming_it(content, message, tmp_path):
    page = tmp_path / "page"
    page.mkdir()
    (page / "results.json").write_text(content)
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "thesis_results.py"), "--keep", str(page),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert message in proc.stderr and str(page / "results.json") in proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_thesis_base_point_stands_on_every_q7_panel(runs):
    """w60s is MAX_ID 10 k and 0.1 % too: measured once, it is a point of all three panels; a point
    off the base in another factor is not (w10s is not a cardinality point)."""
    from validator.thesis_page import q7_panel_points

    _, _, micro = runs
    pts = read_micro_points([micro["spark"]])
    interval_only = [p for p in pts if p.experiment == "interval"]
    card = q7_panel_points(interval_only, "spark", "cardinality", "max_id")
    sel = q7_panel_points(interval_only, "spark", "selectivity", "selectivity")
    assert [p.workload for p in card] == [p.workload for p in sel] == ["patterns-interval-w60s"]
    # With the cardinality experiment's own maxid10000 measured too, that one stands for x = 10 k.
    card = q7_panel_points(pts, "spark", "cardinality", "max_id")
    assert sorted(p.workload for p in card) == ["patterns-cardinality-maxid100", "patterns-cardinality-maxid10000"]
    assert [p.workload for p in q7_panel_points(pts, "spark", "interval", "within_ms")] == \
        ["patterns-interval-w10s", "patterns-interval-w60s", "patterns-interval-w600s"]


def test_a_point_says_where_its_limit_lies(runs, tmp_path):
    """A search that found an unsustainable rate bounds the limit from above; one whose every step
    kept up only from below: the page says which, and summary.md gives the lowest failing rate."""
    _, _, micro = runs
    by = {p.workload: p for p in read_micro_points([micro["cw"]])}
    bounded, open_above = by["count-windows-window-sliding-r500-sum"], by["count-windows-window-sliding-r5000-sum"]
    assert (bounded.failed_eps, bounded.unbounded) == (10_000.0, False)
    assert bounded.eps_text == "5,000 (< 10,000)"
    assert (open_above.failed_eps, open_above.unbounded) == (None, True)
    assert open_above.eps_text == "≥ 5,000 (every step kept up)"
    md = (write_thesis_page(ThesisInputs(micro=(bounded, open_above)), tmp_path / "page").parent
          / "results.md").read_text()
    assert "| 5,000 (< 10,000) |" in md and "| ≥ 5,000 (every step kept up) |" in md
    summary = (micro["cw"] / "summary.md").read_text()
    assert "| count-windows-window-sliding-r500-sum | 5,000 | 10,000 |" in summary
    assert "| count-windows-window-sliding-r5000-sum | 5,000 | none: every step kept up |" in summary
    row = json.loads((micro["cw"] / "summary.json").read_text())["workloads"][0]
    assert row["lowest_failing_eps"] == 10_000.0


def test_a_missing_search_log_is_one_line_naming_it(runs, tmp_path):
    _, _, micro = runs
    run = shutil.copytree(micro["cw"], tmp_path / "cw")
    (run / "count-windows-window-sliding-r500-sum" / "search.json").unlink()
    with pytest.raises(CepkitError, match=r"count-windows-window-sliding-r500-sum/search.json"):
        read_micro_points([run])


def test_a_point_measured_before_plan_families_gives_way_to_a_planned_one():
    """Figures of the kit's core are replaced, not kept beside the engine plans' (issue 44): a kept
    point with no plan goes when a point of its workload and engine that names its plan comes; the
    other engine's and the other workloads' stay, and so does a kept point that names its plan."""
    from validator.thesis_page import MicroPoint

    def point(engine, workload, source, plan=""):
        return MicroPoint(engine, "patterns", False, workload, "interval", {}, 1000.0, True, source=source,
                          plan=plan)

    kept = ThesisInputs((), (point("spark", "w", "old"), point("flink", "w", "old"), point("spark", "w2", "old"),
                             point("spark", "w3", "earlier", "engine; jvm -> jvm")), ())
    new = ThesisInputs((), (point("spark", "w", "new", "engine; jvm -> jvm"),
                            point("spark", "w3", "new", "engine; jvm -> jvm")), ()).keeping(kept)
    assert sorted((p.engine, p.workload, p.source) for p in new.micro) == [
        ("flink", "w", "old"), ("spark", "w", "new"), ("spark", "w2", "old"), ("spark", "w3", "earlier"),
        ("spark", "w3", "new")]
