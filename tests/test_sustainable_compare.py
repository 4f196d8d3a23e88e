"""benchmarks/sustainable_compare.py without an engine: which workload each kind names, the
options, the table; `cepkit micro`'s check of the search settings before any run; and (on request,
`-m flink`) the search itself on Flink, tiny (two 5-second steps, about a minute)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from cepkit_app.pipelines.sustainable import SearchConfig, SearchResult, Step
from kit.errors import CepkitError
from tests.helpers import REPO


@pytest.fixture(scope="module")
def sc():
    # As `python benchmarks/sustainable_compare.py` runs it: its folder on the path (benchmarks_common).
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("sustainable_compare_under_test",
                                                      REPO / "benchmarks" / "sustainable_compare.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return module


def test_each_kind_is_the_first_workload_of_its_kind_in_its_quick_suite(sc):
    picks = {k: (s, w.name) for k in sc.KINDS for s, w in [sc.kind_workload(k)]}
    assert picks == {"Q1": ("filtering", "filtering-selectivity-5pct"),
                     "Q2": ("count-windows", "count-windows-window-sliding-r50-sum"),
                     "Q3": ("time-windows", "time-windows-rate-q3-range10s-rate500"),
                     "J1": ("joins", "joins-j1-window-size-s100"),
                     "J2": ("joins", "joins-j2-memory-table-t100"),
                     "Q7": ("patterns", "patterns-interval-w1s"),
                     "Q1H": ("filtering", "filtering-selectivity-50pct"),
                     "NULL": ("ceiling", "ceiling-kit-null"), "PASS": ("ceiling", "ceiling-kit-pass-through"),
                     "Q7T": ("patterns", "patterns-interval-w60s")}
    assert sc.FULL == {"Q7T"}       # the thesis's parameters: the full suite
    for kind in sc.KINDS:           # the docstring's list is the same
        assert f"{kind}  {picks[kind][0]}" in sc.__doc__ and picks[kind][1] in sc.__doc__
    with pytest.raises(CepkitError, match="Q9"):
        sc.kind_workload("Q9")


def test_kinds_and_start_rates_parse(sc):
    assert sc.parse_kinds("q1, J2,Q1") == ["Q1", "J2"]
    with pytest.raises(CepkitError, match="unknown kind"):
        sc.parse_kinds("Q1,Q4")
    with pytest.raises(CepkitError, match="at least one"):
        sc.parse_kinds(" , ")
    rates = sc.parse_start_rates(["1000", "q1=50000", "flink:Q1=80000", "spark:J1=2000"], ["spark", "flink"])
    assert sc.start_rate(rates, "flink", "Q1") == 80000 and sc.start_rate(rates, "spark", "Q1") == 50000
    assert sc.start_rate(rates, "spark", "J1") == 2000 and sc.start_rate(rates, "flink", "J1") == 1000
    assert sc.start_rate(sc.parse_start_rates([], ["spark"]), "spark", "Q7") == sc.DEFAULT_START_EPS
    for bad in ("x", "Q1=0", "Q9=10", "storm:Q1=10", "flink:=10"):
        with pytest.raises(CepkitError, match="--start-rate"):
            sc.parse_start_rates([bad], ["spark", "flink"])


def _result(workload, confirmed, rates, bound=None):
    steps = tuple(Step(n, float(r), "confirm" if confirmed and n == len(rates) else "explore", ok, "", "completed",
                       "PASSED", 1, 10, 5, 9, 800.0, 90.0, "d", connectors={"source": "jvm", "sink": "jvm"},
                       bound=None if ok else bound) for n, (r, ok) in enumerate(rates, 1))
    return SearchResult(workload, rates[-1][0] / 0.9 if confirmed else None, confirmed, steps)


def test_the_table(sc):
    search = SearchConfig(duration_s=5, max_steps=4)
    _, q1 = sc.kind_workload("Q1")
    _, j1 = sc.kind_workload("J1")
    kit = {"bound": "kit", "part": "feed", "label": "kit-bound (feed)", "why": "the feed at 99 % of one core"}
    points = [sc.search_point("spark", "filtering", q1, _result(q1.name, True, [(4000, True), (16000, False),
                                                                              (8000, True), (7200, True)], kit),
                              search, 10, "r", "Q1"),
              sc.search_point("flink", "joins", j1, _result(j1.name, True, [(4000, True), (3600, True)]), search, 10,
                              "r", "J1"),
              {"bench": "sustainable", "engine": "flink", "suite": "filtering", "workload": q1.name, "kind": "Q1",
               "status": "error", "message": "RuntimeError: no JVM"}]
    lines = sc.table(points).splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:-1]] == list(sc.HEAD)
    # A rate the kit's feed bounded is published as the kit's limit, never as the engine's.
    assert lines[2] == ("| filtering-selectivity-5pct | Q1 | spark | 8,000 (kit-bound (feed): the kit's limit, not the "
                        "engine's) | 4 | yes | 16,000 | jvm -> jvm | kit-bound (feed) |")
    assert lines[3] == ("| joins-j1-window-size-s100 | J1 | flink | 8,000 (lower bound: every rate tried kept up) | "
                        "2 | yes | none | jvm -> jvm | – |")        # two streams: 4,000 per stream is 8,000 in all
    assert lines[4] == "| filtering-selectivity-5pct | Q1 | flink | – | – | – (error) | – | – | – |"
    assert lines[-2] == "- filtering-selectivity-5pct on flink: error: RuntimeError: no JVM"
    assert lines[-1] == "- filtering-selectivity-5pct on spark: bounded by: the feed at 99 % of one core"


def _script(*args, cwd):
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "sustainable_compare.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, message", [
    (("--kinds", "Q1,Q4"), "unknown kind(s) Q4"),
    (("--engines", "storm"), "engine 'storm' is not known"),
    (("--max-steps", "1"), "max_steps must be >= 2"),
    (("--step-seconds", "-1"), "duration_s must be > 0"),
    (("--growth", "1"), "precision and growth must be > 1"),
    (("--start-rate", "Q1=fast"), "--start-rate"),
    (("--set", "run.nope=1"), "nope"),
])
def test_bad_options_are_one_line_before_any_run(args, message, tmp_path):
    proc = _script(*args, "--runs", str(tmp_path / "runs"), cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args, message", [
    (("--sustainable", "--max-steps", "1"), "max_steps must be >= 2"),
    (("--calibrate", "--step-seconds", "0"), "duration_s must be > 0"),
    (("--sustainable", "--validate-confirmation-only", "--start-rate", "0"), "start_rate_eps must be > 0"),
])
def test_cepkit_micro_checks_the_search_settings_before_any_run(args, message, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "micro", "--suite", "filtering", "--quick",
                           "--engine", "flink", *args, "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "workload(s)" not in proc.stdout and not (tmp_path / "run").exists()


@pytest.mark.flink
def test_a_tiny_search_on_flink(tmp_path):
    """Two 5-second steps of the quick Q1 workload on Flink: the explore step at the workload's rate
    and its confirmation, both validated (about a minute on 2 cores)."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "micro", "--suite", "filtering", "--quick",
                           "--workload", "filtering-selectivity-5pct", "--engine", "flink", "--master", "local[2]",
                           "--sustainable", "--step-seconds", "5", "--max-steps", "2", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    search = json.loads((out / "filtering-selectivity-5pct" / "search.json").read_text())
    steps = search["steps"]
    assert [s["purpose"] for s in steps] == ["explore", "confirm"]
    assert [s["rate_eps"] for s in steps] == [1000.0, 900.0]
    assert all(s["status"] == "completed" and s["verdict"] == "PASSED" and s["sustainable"] for s in steps), steps
    assert search["confirmed"] and search["sustainable_eps"] == 1000.0
    run = json.loads((out / "filtering-selectivity-5pct" / "step-01-explore-1000eps" / "engine" / "run.json")
                     .read_text())
    assert run["spec"]["engine"] == "flink"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "sustainable" and summary["workloads"][0]["confirmed"]


def test_points_go_into_the_results_file_with_their_provenance(sc, tmp_path):
    search = SearchConfig(duration_s=5, max_steps=4)
    _, q1 = sc.kind_workload("Q1")
    args = SimpleNamespace(overrides=["run.trigger='realtime'"], master="local[2]", search_seconds=5.0, search_steps=4)
    point = sc.search_point("spark", "filtering", q1, _result(q1.name, True, [(4000, True), (3600, True)]), search,
                            10, "r", "Q1")
    path = tmp_path / "results" / "figures.json"
    path.parent.mkdir()
    sc.record_figures(path, [point], "python benchmarks/sustainable_compare.py --kinds Q1", args)
    sc.record_figures(path, [{**point, "sustainable_eps": 1.0}], "again", args)     # replaces its own point
    doc = json.loads(path.read_text())
    assert doc["kind"] == "cepkit.throughput-figures" and len(doc["points"]) == 1
    (p,) = doc["points"]
    assert (p["sustainable_eps"], p["command"], p["trigger"], p["master"]) == (1.0, "again", "realtime", "local[2]")
    assert p["machine"]["cores"] and p["commit"] and p["connectors"] == {"source": "jvm", "sink": "jvm"}
    path.write_text('{"kind": "something else"}')
    with pytest.raises(CepkitError, match="figures.json: kind"):
        sc.read_figures(path)
