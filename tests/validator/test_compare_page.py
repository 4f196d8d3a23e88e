"""The side-by-side comparison of runs (validator/compare_page.py), on fake run directories that have
the exact shapes the pipelines write: a real Pairs dataset and reference answers, output logs
written by the real harness sink (its clock pinned to each arrival), metrics written by the
harness's CSV writers, run.json with the harness's keys, report/summary.json written by the
validator, and micro summaries written by the suite's own writers (the sustainable search run by
the real search over a model engine). Two engines: "spark" and "flink", with different latencies,
CPU and memory. No Spark, no JVM.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import tomllib
from pathlib import Path
from types import SimpleNamespace

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import tomli_w

import harness.sink
from cepkit_app.pipelines.micro_summary import WorkloadResult, write_summary
from cepkit_app.pipelines.sustainable import SearchConfig, find_sustainable_rate
from datagen.pairs import generate_pairs
from harness.resources import RESOURCE_COLUMNS, BacklogLog, CsvLog
from harness.run_finish import write_json
from harness.sink import SinkServer
from kit.config import load_config
from kit.errors import CepkitError
from kit.manifest import load_manifest
from kit.wire.sink_client import SinkClient
from kit.workload import Filter, QuerySet, load_aux, write_spec
from kit.workload.suite import Dataset, Load, Param, Suite, Workload
from querygen.output import write_strategies
from tests.helpers import SCHEMAS, pairs_config
from validator.compare_page import comparison_text, write_comparison
from validator.latency import latency_stats
from validator.pairs_run import PairsValidation, validate_pairs

W0 = 1_790_000_000_000
# engine -> (base latency ms, mean CPU %, RSS MiB, capacity ev/s of the sustainable model)
ENGINES = {"spark": (80, 150.0, 1500, 3_000.0), "flink": (20, 90.0, 700, 12_000.0)}
SUITE = Suite("compare", True, tuple(
    Workload(name, "selectivity", ("throughput",), Dataset(streams=streams, attributes=1, max_id=10),
             Load("constant", 1000.0, 5000), QuerySet("independent", (Filter("q1", "S1", ("ID", "TS")),)),
             (Param("streams", str(streams)),))
    for name, streams in (("filter-one", 1), ("filter-two", 2))))


# -- writing run directories -----------------------------------------------------------------

def write_run_config(run: Path, engine: str) -> None:
    """The resolved default config with `run.engine` set (written as the kit writes TOML: the
    engine registry need not know the engine)."""
    doc = tomllib.loads(load_config().to_toml())
    doc["run"]["engine"] = engine
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.toml").write_text(tomli_w.dumps(doc))


def write_engine_dir(edir: Path, frames, *, seconds: int, cpu: float, rss_mib: float, release_eps: float,
                     pull_eps: float | None = None, sim_start: int = W0, status: str = "completed") -> dict:
    """An engine directory as the harness leaves it: outputs/ through the real sink (frames:
    (stream, arrival ms, pa.Table)), metrics/resources.csv and backlog.csv by the harness's
    writers (one sample a second), and run.json; returns the run.json document."""
    (edir / "metrics").mkdir(parents=True)
    now = {"ms": W0}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness.sink, "now_ms", lambda: now["ms"])
        with SinkServer(edir / "outputs", streams={s: t.schema for s, _, t in frames}) as sink, \
                SinkClient(port=sink.port) as client:
            for batch, (stream, arrival, rows) in enumerate(sorted(frames, key=lambda f: f[1])):
                now["ms"] = int(arrival)
                client.emit(stream, batch, rows)
            log = sink.finish({"run_start_wall_ms": W0, "sim_start_ms": sim_start, "speed": 1.0})
            stats = sink.stats()
    resources = CsvLog(edir / "metrics" / "resources.csv", RESOURCE_COLUMNS)
    backlog = BacklogLog(edir / "metrics" / "backlog.csv")
    pull_eps = release_eps if pull_eps is None else pull_eps
    for s in range(seconds + 1):
        rss = int((rss_mib + (s % 5)) * 2**20)
        resources.write((W0 + s * 1000, cpu + (s % 3) - 1, rss, rss * 2 // 3, rss // 3))
        released = int(release_eps * s)
        backlog.record({"released": released, "pulled": min(released, int(pull_eps * s)),
                        "backlog": released - min(released, int(pull_eps * s))}, ts_ms=W0 + s * 1000)
    resources.close()
    backlog.close()
    total = int(release_eps * seconds)
    record = {
        "kind": "cepkit.engine-run", "schema_version": 1, "status": status, "reason": "",
        "program": str(edir.parent / "program.py"), "spec": {},
        "timings": {"program_start_ms": W0 - 9000, "engine_started_ms": W0 - 2000, "startup_s": 7.0,
                    "run_start_wall_ms": W0, "driver_finished_ms": W0 + seconds * 1000, "ended_ms": W0 + seconds * 1000,
                    "duration_s": seconds + 9.5},
        "clocks": {"run_start_wall_ms": W0, "sim_start_ms": sim_start, "speed": 1.0},
        "jvm_class_archive": None, "local_fs_jar": None,
        "events": {"total": total, "released": total, "pulled": total, "backlog_at_end": 0},
        "outputs": stats["streams"], "output_log": str(log), "driver_lateness": None,
        "resources": {"peak_rss_bytes": int((rss_mib + 4) * 2**20), "mean_cpu_percent": cpu,
                      "mean_cpu_percent_with_startup": cpu + 10, "samples": seconds + 1,
                      "peak_state_bytes": None, "peak_state_rows": None},
        "latency": stats["latency"], "engine": {}, "engine_exit_code": 0, "engine_attempts": 1, "faults": []}
    write_json(edir / "run.json", record)
    return record


@pytest.fixture(scope="session")
def pairs_inputs(tmp_path_factory):
    """A 5-minute SF=1 dataset, its strategies and the reference answers."""
    root = tmp_path_factory.mktemp("compare-pairs")
    data, strategies = root / "data", root / "strategies.xml"
    generate_pairs(pairs_config(rate={"duration_s": 300.0}), data)
    write_strategies(load_aux(data), 42, strategies)
    validate_pairs(PairsValidation(data, strategies, root / "expected"))
    expected = {n: pd.read_parquet(root / "expected" / "expected" / f"{n}.parquet") for n in SCHEMAS}
    return data, strategies, expected, load_manifest(data).start_epoch_ms


def make_pairs_run(run: Path, engine: str, pairs_inputs, validate: bool = True) -> Path:
    """A Pairs run directory whose engine answered every expected row, `ENGINES[engine][0]` ms
    (plus 0..39) after each triggering tick; validated by the real validator."""
    data, strategies, expected, sim_start = pairs_inputs
    base, cpu, rss, _ = ENGINES[engine]
    write_run_config(run, engine)
    frames = []
    for name, df in expected.items():
        df = df.assign(inputTS=W0 + (df["inputTickTS"] - sim_start))
        for k, (input_ts, rows) in enumerate(df.groupby("inputTS", sort=True)):
            table = pa.Table.from_pandas(rows.reset_index(drop=True), schema=SCHEMAS[name].arrow_schema())
            frames.append((name, input_ts + base + k % 40, table))
    write_engine_dir(run / "engine", frames, seconds=300, cpu=cpu, rss_mib=rss, release_eps=6000.0,
                     sim_start=sim_start)
    if validate:
        validate_pairs(PairsValidation(data, strategies, run / "report", run / "engine" / "outputs", verify=False))
    return run


@pytest.fixture(scope="session")
def pairs_runs(tmp_path_factory, pairs_inputs) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pairs-runs")
    return {e: make_pairs_run(root / f"pairs-{e}", e, pairs_inputs) for e in ENGINES}


def micro_frames(engine: str, seconds: int, eps: float, seed: int) -> tuple[list, np.ndarray]:
    """Outputs of query q1 in batches of 100 rows, each batch's latency from the engine's base."""
    base = ENGINES[engine][0]
    rng = np.random.default_rng(seed)
    n = int(seconds * eps) // 100 * 100
    input_ts = W0 + np.sort(rng.integers(0, seconds * 1000, n))
    frames, lat = [], []
    for k in range(0, n, 100):
        ts = input_ts[k:k + 100]
        arrival = int(ts[-1]) + base + int(rng.integers(0, 60))
        frames.append(("q1", arrival, pa.table({"ID": pa.array(np.arange(len(ts)) % 10, pa.int32()),
                                               "TS": pa.array(ts - W0), "inputTS": pa.array(ts)})))
        lat.append(arrival - ts)
    return frames, np.concatenate(lat)


def make_micro_run(run: Path, engine: str) -> Path:
    """A fixed-rate `cepkit micro` run of SUITE, every workload validated."""
    _, cpu, rss, _ = ENGINES[engine]
    write_run_config(run, engine)
    write_spec(SUITE, run / "suite.xml")
    results = []
    for i, w in enumerate(SUITE.workloads):
        frames, lat = micro_frames(engine, 5, 1000.0 * w.dataset.streams, seed=i)
        rec = write_engine_dir(run / w.name / "engine", frames, seconds=5, cpu=cpu + i, rss_mib=rss + i,
                               release_eps=1000.0 * w.dataset.streams)
        stats = latency_stats(lat)
        results.append(WorkloadResult(
            w.name, {p.name: p.value for p in w.params}, len(w.queries), "completed", "", "PASSED",
            rec["events"]["total"], 1000.0 * w.dataset.streams, len(lat), stats.p50_ms, stats.p99_ms,
            round(rec["resources"]["peak_rss_bytes"] / 2**20, 1), cpu + i, "", latency_count=stats.count,
            p99_ci_low_ms=stats.p99_ci_low_ms, p99_ci_high_ms=stats.p99_ci_high_ms))
    write_summary(SUITE, results, run)
    return run


def make_sustainable_run(run: Path, engine: str) -> Path:
    """A `cepkit micro --sustainable` run of SUITE: the real search over a model engine of fixed
    capacity, each step an engine directory with its backlog."""
    _, cpu, rss, capacity = ENGINES[engine]
    write_run_config(run, engine)
    write_spec(SUITE, run / "suite.xml")

    def run_step(workload, step_dir: Path, run_changes, validate):
        rate = workload.load.rate_eps * workload.dataset.streams
        frames, lat = micro_frames(engine, 5, min(rate, capacity), seed=int(rate))
        rec = write_engine_dir(step_dir / "engine", frames, seconds=5, cpu=cpu * min(1.0, rate / capacity),
                               rss_mib=rss, release_eps=rate, pull_eps=min(rate, capacity))
        stats = latency_stats(lat)
        sink = rec["latency"]
        return SimpleNamespace(
            status="completed", message="", verdict="PASSED" if validate else "NOT VALIDATED",
            p50_ms=stats.p50_ms if validate else sink["p50_ms"], p99_ms=stats.p99_ms if validate else sink["p99_ms"],
            peak_rss_mib=round(rec["resources"]["peak_rss_bytes"] / 2**20, 1),
            mean_cpu_percent=rec["resources"]["mean_cpu_percent"], state_mib=None,
            latency_count=stats.count if validate else None, p99_ci_low_ms=stats.p99_ci_low_ms if validate else None,
            p99_ci_high_ms=stats.p99_ci_high_ms if validate else None,
            connectors={"source": "jvm", "sink": "jvm", "why": None},
            # The model falls behind past its capacity, its sink saturated (harness/bound.py's verdict).
            bound={"bound": "kit", "part": "sink", "label": "kit-bound (sink)", "why": "the sink at 97 % of one core"}
            if rate > capacity else {"bound": "none", "part": None, "label": "kept up", "why": "kept up"})

    cfg = SearchConfig(duration_s=5, max_steps=10, precision=1.5, validate_steps=False, min_rate_eps=100.0)
    results = [find_sustainable_rate(run_step, w, run / w.name, cfg) for w in SUITE.workloads]
    write_summary(SUITE, results, run)
    return run


@pytest.fixture(scope="session")
def micro_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("micro-runs")
    return {e: make_micro_run(root / f"micro-{e}", e) for e in ENGINES}


@pytest.fixture(scope="session")
def sustainable_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sustainable-runs")
    return {e: make_sustainable_run(root / f"sus-{e}", e) for e in ENGINES}


# -- reading the page back ---------------------------------------------------------------------

def images(html: str) -> list[np.ndarray]:
    srcs = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    return [mpimg.imread(io.BytesIO(base64.b64decode(s)), format="png") for s in srcs]


def html_table(html: str, index: int) -> dict[str, list[str]]:
    """Unit table `index` (1-based) of the page: row key -> cell texts, and "" -> the headers."""
    body = html.split(f'id="table-{index}"', 1)[1].split("</table>", 1)[0]
    head = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", body, re.S)]
    rows = {"": head[1:]}
    for key, row in re.findall(r'<tr data-key="([^"]+)">(.*?)</tr>', body, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        rows[key] = cells[1:]
    return rows


def cells(doc: dict, unit: str) -> dict[str, list[dict | None]]:
    u = next(u for u in doc["units"] if u["name"] == unit)
    return {row["key"]: row["cells"] for row in u["rows"]}


# -- tests -------------------------------------------------------------------------------------

def test_two_pairs_runs_side_by_side(pairs_runs, tmp_path):
    out = tmp_path / "cmp"
    path = write_comparison([pairs_runs["spark"], pairs_runs["flink"]], out)
    assert path == out / "compare.html"
    assert sorted(p.name for p in out.iterdir()) == ["compare.html", "compare.json", "figures"]
    doc = json.loads((out / "compare.json").read_text())
    assert (doc["kind"], doc["schema_version"], doc["run_kind"], doc["mode"]) == ("cepkit.compare", 1, "pairs", "pairs")
    assert [r["column"] for r in doc["runs"]] == ["spark", "flink"]
    (unit,) = doc["units"]
    assert unit["figure"] == "figures/unit-01.png" and (out / unit["figure"]).stat().st_size > 10_000
    c = cells(doc, "Pairs")
    for i, engine in enumerate(("spark", "flink")):
        summary = json.loads((pairs_runs[engine] / "report" / "summary.json").read_text())
        run = json.loads((pairs_runs[engine] / "engine" / "run.json").read_text())
        assert summary["verdict"] == "PASSED" and c["verdict"][i]["text"] == "PASSED"
        assert c["status"][i]["text"] == "completed" and c["scale_factor"][i]["value"] == 1
        for stream in ("MarketOrder", "Indicator"):
            event = summary["latency"][stream]["event"]
            for p in ("p50", "p99"):
                cell = c[f"{p}_ms[{stream}]"][i]
                assert (cell["value"], cell["count"], cell["ci_low"], cell["ci_high"]) == (
                    event[f"{p}_ms"], event["count"], event[f"{p}_ci_low_ms"], event[f"{p}_ci_high_ms"])
                assert f"{event[f'{p}_ms']:,} ms" in cell["text"]
        ps = summary["pscore"]
        assert (c["pscore"][i]["value"], c["pscore"][i]["count"]) == (ps["pscore"], ps["mi_rows"])
        assert c["pscore"][i]["ci_low"] == ps["pscore_ci_low"] and c["pscore"][i]["ci_high"] == ps["pscore_ci_high"]
        assert c["mean_cpu_percent"][i]["value"] == run["resources"]["mean_cpu_percent"]
        assert c["peak_rss_mib"][i]["value"] == round(run["resources"]["peak_rss_bytes"] / 2**20, 1)
        assert c["duration_s"][i]["value"] == run["timings"]["duration_s"] == 309.5
        assert c["events"][i]["value"] == run["events"]["released"] == 1_800_000
        assert c["outputs"][i]["value"] == sum(run["outputs"].values()) > 0
    # The engines differ where they were made to: flink answers 60 ms sooner, with less CPU and memory.
    assert c["p50_ms[MarketOrder]"][0]["value"] - c["p50_ms[MarketOrder]"][1]["value"] == 60
    assert c["pscore"][1]["value"] > c["pscore"][0]["value"]
    assert (c["mean_cpu_percent"][0]["value"], c["mean_cpu_percent"][1]["value"]) == (150.0, 90.0)
    assert (c["peak_rss_mib"][0]["value"], c["peak_rss_mib"][1]["value"]) == (1504.0, 704.0)

    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    table = html_table(html, 1)
    assert table[""] == ["spark", "flink"]
    for i in range(2):
        for key in ("p99_ms[MarketOrder]", "pscore", "peak_rss_mib", "mean_cpu_percent", "verdict"):
            assert table[key][i] == c[key][i]["text"]
    assert "1,504 MiB" in table["peak_rss_mib"][0] and "704 MiB" in table["peak_rss_mib"][1]
    (img,) = images(html)
    assert img.shape[0] > 600 and img.shape[1] > 800 and img[..., :3].std() > 0.05

    text = comparison_text(doc)
    assert text.splitlines()[0] == "Pairs" and "| spark" in text and "| flink" in text
    assert c["pscore"][1]["text"] in text


def test_two_micro_runs_one_table_per_workload(micro_runs, tmp_path):
    out = tmp_path / "cmp"
    write_comparison([micro_runs["spark"], micro_runs["flink"]], out)
    doc = json.loads((out / "compare.json").read_text())
    assert (doc["run_kind"], doc["mode"]) == ("micro", "fixed-rate")
    assert [u["name"] for u in doc["units"]] == ["filter-one", "filter-two"]
    assert doc["figures"] == ["figures/unit-01.png", "figures/unit-02.png"]
    for i, engine in enumerate(("spark", "flink")):
        summary = json.loads((micro_runs[engine] / "summary.json").read_text())
        for row in summary["workloads"]:
            c = cells(doc, row["workload"])
            p99 = c["p99_ms[all queries]"][i]
            assert (p99["value"], p99["count"], p99["ci_low"], p99["ci_high"]) == (
                row["p99_ms"], row["latency_count"], row["p99_ci_low_ms"], row["p99_ci_high_ms"])
            p50 = c["p50_ms[all queries]"][i]
            assert (p50["value"], p50["count"]) == (row["p50_ms"], row["latency_count"])
            # The summary holds no p50 interval: it is recomputed from the output log.
            assert p50["ci_low"] is not None and p50["ci_low"] <= p50["value"] <= p50["ci_high"]
            assert c["verdict"][i]["text"] == "PASSED" and c["input_eps"][i]["value"] == row["input_eps"]
            assert c["mean_cpu_percent"][i]["value"] == row["mean_cpu_percent"]
            assert c["peak_rss_mib"][i]["value"] == row["peak_rss_mib"]
            assert "pscore" not in c and "sustainable_eps" not in c
    html = (out / "compare.html").read_text(encoding="utf-8")
    assert len(images(html)) == 2
    assert html_table(html, 2)[""] == ["spark", "flink"]
    assert html.count('<section class="unit"') == 2


def test_sustainable_micro_runs_show_the_throughput(sustainable_runs, tmp_path):
    runs = [sustainable_runs[e] for e in ENGINES]
    out = tmp_path / "cmp"
    write_comparison(runs, out)
    doc = json.loads((out / "compare.json").read_text())
    assert doc["mode"] == "sustainable"
    for i, run in enumerate(runs):
        summary = json.loads((run / "summary.json").read_text())
        for row, w in zip(summary["workloads"], SUITE.workloads):
            c = cells(doc, w.name)
            assert row["confirmed"] and c["verdict"][i]["text"] == "PASSED"
            assert c["sustainable_eps"][i]["value"] == row["sustainable_eps"]
            assert c["sustainable_total_eps"][i]["value"] == pytest.approx(row["sustainable_eps"] * w.dataset.streams)
            assert c["peak_rss_mib"][i]["value"] == row["peak_rss_mib"]
            # A search is bounded where its first step failed (not where its best step kept up).
            assert c["bound"][i]["text"] == "kit-bound (sink): the sink at 97 % of one core"
    # flink's model has four times spark's capacity.
    one = cells(doc, "filter-one")["sustainable_total_eps"]
    assert one[1]["value"] > 2 * one[0]["value"]
    assert len(images((out / "compare.html").read_text(encoding="utf-8"))) == 2


def test_runs_sharing_an_engine_are_told_apart_by_directory(pairs_runs, tmp_path):
    copy = shutil.copytree(pairs_runs["spark"], tmp_path / "pairs-spark-again")
    write_comparison([pairs_runs["spark"], copy], tmp_path / "cmp")
    doc = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [r["column"] for r in doc["runs"]] == ["spark (pairs-spark)", "spark (pairs-spark-again)"]


def test_a_run_that_was_not_validated_still_has_its_latencies(pairs_inputs, pairs_runs, tmp_path):
    stopped = make_pairs_run(tmp_path / "stopped", "flink", pairs_inputs, validate=False)
    write_comparison([pairs_runs["spark"], stopped], tmp_path / "cmp")
    doc = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    c = cells(doc, "Pairs")
    assert c["verdict"][1]["text"] == "NOT VALIDATED" and c["pscore"][1]["text"] == "–"
    assert c["p99_ms[MarketOrder]"][1]["count"] == len(pairs_inputs[2]["MarketOrder"])   # every order, not the MI's
    assert any("not validated" in n for n in doc["notes"])


def test_mixed_kinds_are_refused_naming_the_odd_run(pairs_runs, micro_runs, sustainable_runs, tmp_path):
    odd = re.escape(f"{micro_runs['flink']}: a microbenchmark suite run at fixed rate, but {pairs_runs['spark']} "
                    f"is a Pairs run; compare runs of one kind")
    with pytest.raises(CepkitError, match=odd):
        write_comparison([pairs_runs["spark"], micro_runs["flink"], pairs_runs["flink"]], tmp_path / "cmp")
    # A fixed-rate suite and a sustainable search are not comparable either.
    with pytest.raises(CepkitError, match=re.escape(f"{sustainable_runs['flink']}: a microbenchmark suite run "
                                                    f"with --sustainable, but {micro_runs['spark']}")):
        write_comparison([micro_runs["spark"], sustainable_runs["flink"]], tmp_path / "cmp")
    with pytest.raises(CepkitError, match="given twice"):
        write_comparison([pairs_runs["spark"], pairs_runs["spark"].parent / "." / pairs_runs["spark"].name],
                         tmp_path / "cmp")
    assert not (tmp_path / "cmp").exists()


def test_an_existing_out_dir_is_refused(pairs_runs, tmp_path):
    (tmp_path / "cmp").mkdir()
    with pytest.raises(CepkitError, match="already exists"):
        write_comparison([pairs_runs["spark"], pairs_runs["flink"]], tmp_path / "cmp")
    assert list((tmp_path / "cmp").iterdir()) == []


@pytest.mark.parametrize("breakage, named", [
    (lambda run: (run / "engine" / "run.json").unlink(), "engine/run.json: not found"),
    (lambda run: (run / "report" / "summary.json").write_text('{"kind": "cepkit.validation-summary",'),
     "report/summary.json:1: invalid JSON"),
    (lambda run: _edit(run / "report" / "summary.json", lambda d: d["latency"]["MarketOrder"]["event"].pop("count")),
     "report/summary.json:latency.MarketOrder.event:"),
    (lambda run: _edit(run / "engine" / "run.json", lambda d: d["resources"].update(peak_rss_bytes="big")),
     "engine/run.json:resources.peak_rss_bytes: expected a finite number"),
    (lambda run: (run / "config.toml").unlink(), "config.toml: not found"),
    (lambda run: shutil.rmtree(run / "engine") or shutil.rmtree(run / "report"), "not a cepkit run directory"),
])
def test_bad_input_is_one_line_naming_the_file_and_key(pairs_runs, tmp_path, breakage, named):
    run = shutil.copytree(pairs_runs["flink"], tmp_path / "broken")
    breakage(run)
    with pytest.raises(CepkitError, match=re.escape(named)) as e:
        write_comparison([pairs_runs["spark"], run], tmp_path / "cmp")
    assert "\n" not in str(e.value) and str(run) in str(e.value)
    assert not (tmp_path / "cmp").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".cmp")]


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_the_plan_and_bound_follow_the_verdict_and_the_run_list_comes_last_folded(pairs_runs, tmp_path):
    runs = {}
    for engine in ("spark", "flink"):
        runs[engine] = shutil.copytree(pairs_runs[engine], tmp_path / engine)
    _edit(runs["flink"] / "engine" / "run.json", lambda d: d.update(plan="keyed", bound="kit-bound (sink)"))
    path = write_comparison([runs["spark"], runs["flink"]], tmp_path / "cmp")
    doc = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    (unit,) = doc["units"]
    assert [r["key"] for r in unit["rows"]][:4] == ["verdict", "status", "plan", "bound"]
    c = cells(doc, "Pairs")
    assert [x["text"] for x in c["plan"]] == ["not recorded", "keyed"]
    assert [x["text"] for x in c["bound"]] == ["not recorded", "kit-bound (sink)"]
    html = path.read_text()
    assert html.index('id="unit-1"') < html.index('id="runs"')
    assert re.search(r'<section id="runs">\s*<details class="long">', html)
