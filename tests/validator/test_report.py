"""The validation report: Figure B.3-style text, summary.json, and report.html rendered in headless
Chromium (Debian's `chromium` package)."""

from __future__ import annotations

import dataclasses
import html as html_lib
import json
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from scipy.stats import binom

from datagen.convert import ConvertSpec, convert_csv
from datagen.pairs import generate_pairs
from cepkit_app.cli import main
from kit.errors import CepkitError
from kit.profiles import build_profile, profile_from_dict
from kit.records import INDICATOR, MARKET_ORDER
from kit.manifest import read_manifest
from kit.workload import load_aux, read_strategies
from querygen.output import write_strategies
from tests.helpers import pairs_config
from tests.validator.test_validate_pairs import write_log
from tests.validator.test_latency import BURST, burst_trace
from validator.adaptivity import adaptivity_metrics
from validator.company_names import company_names
from validator.compare import compare_stream
from validator.latency import per_second_counts, pscore_for_run, stream_latency
from validator.outputlog import Clocks
from validator.pairs_reference import StrategyParams
from validator.pairs_run import PairsValidation, validate_pairs
from validator.report import format_text_report
from validator.report_page import (STRATEGIES_SHOWN, ReportInputs, StrategyChart, pscore_lines_from_summary,
                                   run_record_facts, write_report)

W0 = 1_790_000_000_000
T0 = 1_767_623_400_000
CLOCKS = Clocks(W0, T0, 1.0)
PROFILE = build_profile("standard", basis_eps=400, peak_eps=600, quick=True)   # 121 s, MI [31 s, 91 s)


def synthetic_run():
    """Expected answers and an engine log for two strategies over the quick standard profile.

    MarketOrder rows released inside the MI (seconds 31, 33, ..., 89) have latencies 10, 20, ...,
    300 ms, so p99 = rank 30 of 30 = 300 ms and pscore(SF 1) = load 3 / 0.3 s = 10. The engine
    drops the order at second 100 (missing), changes one price (wrong) and adds one at second 5
    (undue); all three lie where they leave the MI's latencies untouched.
    """
    secs = np.arange(10, 121)
    rows = []
    for k, strategy in enumerate(("st_00001", "st_00002")):
        ratio = 1 + 0.02 * np.sin(secs / (7 + 3 * k)) + 0.004 * np.cos(secs * 1.7)
        avg = pd.Series(ratio).rolling(8, min_periods=1).mean().to_numpy()
        sd = pd.Series(ratio).rolling(8, min_periods=1).std(ddof=0).to_numpy()
        rows.append(pd.DataFrame({"strategy": strategy, "ratio": ratio, "avgRatio": avg, "upperBand": avg + 1.5 * sd,
                                  "lowerBand": avg - 1.5 * sd, "inputTickTS": T0 + secs * 1000 + 7}))
    ind = pd.concat(rows, ignore_index=True)
    ind["inputTS"] = W0 + (ind["inputTickTS"] - T0)
    order_secs = list(range(31, 91, 2)) + [15, 100]
    orders = pd.DataFrame({
        "strategy": ["st_00001" if i % 3 else "st_00002" for i in range(len(order_secs))],
        "type": ["BUY" if i % 2 else "SELL" for i in range(len(order_secs))],
        "symbol": ["AAAAAA" if i % 2 else "BBBBBB" for i in range(len(order_secs))],
        "price": np.arange(len(order_secs), dtype=np.int32) * 10 + 1000,
        "size": np.full(len(order_secs), 100, dtype=np.int32),
        "inputTickTS": T0 + np.array(order_secs) * 1000 + 7})
    orders["inputTS"] = W0 + (orders["inputTickTS"] - T0)

    eng_ind = ind.assign(arrivalTS=ind["inputTS"] + 50, ingestTS=ind["inputTS"] + 20)
    latency = np.r_[np.random.default_rng(5).permutation(np.arange(10, 301, 10)), 5000, 5000]
    eng_ord = orders.assign(arrivalTS=orders["inputTS"] + latency, ingestTS=orders["inputTS"] + latency // 2)
    eng_ord = eng_ord[eng_ord["inputTickTS"] != T0 + 100_007].copy()
    eng_ord.loc[4, "price"] = 1041
    undue = eng_ord.iloc[[0]].assign(inputTickTS=T0 + 5_007, inputTS=W0 + 5_007, arrivalTS=W0 + 5_100,
                                     ingestTS=W0 + 5_050)
    eng_ord = pd.concat([eng_ord, undue], ignore_index=True)
    return ind, orders, eng_ind, eng_ord


def report_inputs(ind, orders, eng_ind, eng_ord, **changes) -> ReportInputs:
    input_series = per_second_counts(T0 + np.repeat(np.arange(121) * 1000, np.rint(
        PROFILE.rate_at(np.arange(121) * 1000 + 500)).astype(int)), T0, 121)
    seconds = np.arange(121)
    resources = pd.DataFrame({"ts_ms": W0 + seconds * 1000, "cpu_percent": 55 + 20 * np.sin(seconds / 15),
                              "rss_bytes": (1024 + seconds) * 2**20})
    base = dict(
        title="Pairs SF=1 on PySpark (synthetic)",
        run_info={"engine": "PySpark (synthetic)", "scale factor": 1, "profile": "standard, quick"},
        comparisons=(compare_stream(ind, eng_ind, INDICATOR), compare_stream(orders, eng_ord, MARKET_ORDER)),
        latency=(stream_latency("Indicator", eng_ind, CLOCKS, PROFILE),
                 stream_latency("MarketOrder", eng_ord, CLOCKS, PROFILE)),
        pscore=pscore_for_run(1, eng_ord, PROFILE, CLOCKS), profile=PROFILE, clocks=CLOCKS,
        input_series=input_series, resources=resources, chart=StrategyChart("st_00001", eng_ind, eng_ord),
        notes=("Synthetic run written by the test suite.",))
    return ReportInputs(**(base | changes))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    run = synthetic_run()
    out = tmp_path_factory.mktemp("report")
    return write_report(report_inputs(*run), out), run


def test_text_report_follows_figure_b3():
    ind, orders, eng_ind, eng_ord = synthetic_run()
    text = format_text_report([compare_stream(ind, eng_ind, INDICATOR), compare_stream(orders, eng_ord, MARKET_ORDER)])
    head = text.split("\n\n")[0]
    assert head == "\n".join([
        "Validation result: FAILED!",
        "- Indicator:", "  # expected answers: 222", "  # engine answers: 222", "  # correct answers: 222",
        "  # missing answers: 0", "  # undue answers: 0", "  # wrong answers: 0", "  verdict: PASSED",
        "- MarketOrder:", "  # expected answers: 32", "  # engine answers: 32", "  # correct answers: 30",
        "  # missing answers: 1", "  # undue answers: 1", "  # wrong answers: 1", "  verdict: FAILED"])
    listing = text.split("\n\n")[1].splitlines()
    assert listing[0] == "Incorrect MarketOrder answers (first 3 of 3; keys strategy, inputTickTS, type, symbol):"
    assert re.split(r"\s+", listing[1].strip()) == ["outcome", "strategy", "inputTickTS", "type", "symbol", "differs",
                                                    "expected.price", "engine.price", "expected.size", "engine.size"]
    rows = [re.split(r"\s{2,}", line.strip()) for line in listing[3:]]
    assert rows == [
        ["undue", "st_00002", str(T0 + 5_007), "SELL", "BBBBBB", "-", "1000", "-", "100"],
        ["wrong", "st_00001", str(T0 + 39_007), "SELL", "BBBBBB", "price", "1040", "1041", "100", "100"],
        ["missing", "st_00001", str(T0 + 100_007), "BUY", "AAAAAA", "1310", "-", "100", "-"],
    ]
    assert format_text_report([compare_stream(ind, eng_ind, INDICATOR)]).startswith("Validation result: PASSED\n")


def test_summary_json(written):
    path, _ = written
    summary = json.loads((path.parent / "summary.json").read_text())
    assert summary["kind"] == "cepkit.validation-summary" and summary["schema_version"] == 1
    assert summary["verdict"] == "FAILED"
    mo = summary["streams"][1]
    assert (mo["stream"], mo["expected"], mo["engine"], mo["correct"], mo["missing"], mo["undue"], mo["wrong"]) == \
        ("MarketOrder", 32, 32, 30, 1, 1, 1)
    assert summary["pscore"]["load"] == 3 and summary["pscore"]["p99_latency_s"] == 0.3
    assert summary["pscore"]["pscore"] == pytest.approx(10.0, rel=1e-12)
    assert summary["pscore"]["mi_rows"] == 30
    lat = summary["latency"]["MarketOrder"]
    # MI latencies 10..300: mean 155, p50 = rank 15 = 150, p90 = rank 27 = 270.
    assert (lat["event"]["count"], lat["event"]["mean_ms"], lat["event"]["p50_ms"], lat["event"]["p90_ms"],
            lat["event"]["max_ms"]) == (30, 155.0, 150, 270, 300)
    assert lat["processing"]["max_ms"] == 150      # arrival - ingest = latency / 2
    assert summary["latency"]["Indicator"]["event"]["p999_ms"] == 50
    assert summary["profile"]["phases"][2]["name"] == "mi-rise"
    assert summary["figures"] == ["figures/input-rate.png", "figures/latency-time.png", "figures/throughput.png",
                                  "figures/latency-histogram.png", "figures/resources.png", "figures/strategy.png"]
    for f in summary["figures"]:
        assert (path.parent / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_content(written):
    path, _ = written
    html = path.read_text()
    assert '<div class="banner failed" id="verdict">' in html
    assert html.count('src="data:image/png;base64,') == 6
    assert "Incorrect MarketOrder answers — first 3 of 3" in html
    assert 'class="n first diff">1040</td><td class="n diff">1041</td>' in html
    assert "<strong>10.00</strong> work/s²" in html
    assert "Incorrect Indicator answers" not in html


def test_summary_json_has_counts_and_intervals(written):
    path, _ = written
    summary = json.loads((path.parent / "summary.json").read_text())
    mo = summary["latency"]["MarketOrder"]["event"]
    # 30 MI latencies 10, 20, ..., 300 (value of rank r = 10 r). p99 = 300, the maximum; its
    # upper side needs 368 values, so only a lower bound: l = #{k : P(Bin(30, .99) <= k) <= 5 %}.
    l99 = int((binom.cdf(np.arange(31), 30, 0.99) <= 0.05).sum())
    assert (mo["count"], mo["p99_ms"], mo["p99_ci_low_ms"], mo["p99_ci_high_ms"]) == (30, 300, 10 * l99, None)
    # p50 is two-sided at 2.5 % a side.
    cdf50 = binom.cdf(np.arange(31), 30, 0.5)
    assert (mo["p50_ci_low_ms"], mo["p50_ci_high_ms"]) == (10 * int((cdf50 <= 0.025).sum()),
                                                           10 * (int((cdf50 < 0.975).sum()) + 1))
    for stream in ("Indicator", "MarketOrder"):
        for clock in ("event", "processing"):
            stats = summary["latency"][stream][clock]
            assert stats["count"] > 0
            for name in ("p50", "p90", "p95", "p99", "p999"):
                assert f"{name}_ci_low_ms" in stats and f"{name}_ci_high_ms" in stats, (stream, clock, name)
    ps = summary["pscore"]
    assert (ps["mi_rows"], ps["p99_ci_low_ms"], ps["p99_ci_high_ms"], ps["pscore_ci_low"]) == (30, 10 * l99, None, None)
    assert ps["pscore_ci_high"] == pytest.approx(3 / (10 * l99 / 1000))
    assert pscore_lines_from_summary(path.parent / "summary.json") == (
        f"MarketOrder event-time latency in the measurement interval: p99 = 300 ms (the maximum of 30 orders: "
        f"too few for a p99; 95 % CI ≥ {10 * l99} ms)",
        f"pscore: 10.00 (95 % CI ≤ {3 / (10 * l99 / 1000):.2f}; "
        f"p99 from the maximum of 30 orders: too few for a p99)")


def test_pscore_lines_from_a_bad_summary_are_one_line(written, tmp_path):
    path, _ = written
    summary = json.loads((path.parent / "summary.json").read_text())
    with pytest.raises(CepkitError, match=r"nope\.json: cannot read the validation summary"):
        pscore_lines_from_summary(tmp_path / "nope.json")
    (tmp_path / "other.json").write_text(json.dumps({"kind": "something"}))
    with pytest.raises(CepkitError, match=r"other\.json:kind: expected 'cepkit.validation-summary', got 'something'"):
        pscore_lines_from_summary(tmp_path / "other.json")
    # A summary written before the intervals existed: one line naming the file and the key.
    old = dict(summary, pscore={k: v for k, v in summary["pscore"].items() if "_ci_" not in k})
    (tmp_path / "old.json").write_text(json.dumps(old))
    with pytest.raises(CepkitError, match=r"old\.json: pscore: .*p99_ci_low_ms") as e:
        pscore_lines_from_summary(tmp_path / "old.json")
    assert "\n" not in str(e.value)
    none = dict(summary, pscore=None, run={"pscore": "not computed: MarketOrder: the engine produced no orders"})
    (tmp_path / "none.json").write_text(json.dumps(none))
    assert pscore_lines_from_summary(tmp_path / "none.json") == (
        "pscore: not computed: MarketOrder: the engine produced no orders",)


def test_html_shows_counts_intervals_and_the_small_sample_wording(written):
    path, _ = written
    html = path.read_text()
    body = html.split('id="latency-table"', 1)[1].split("</table>", 1)[0]
    rows = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", r)).strip() for r in re.findall(r"<tr>(.*?)</tr>", body, re.S)]
    mo = next(r for r in rows if r.startswith("MarketOrder event time"))
    # count, mean, min, then p50 with its interval, ..., p99 = 300 marked as the maximum with "≥ 290".
    assert mo.startswith("MarketOrder event time 30 155.0 10 150 100–210 ")
    assert "300 = max ≥ 290" in mo
    assert "MarketOrder, event time: p99 = 300 ms (the maximum of 30 outputs: too few for a p99; 95 % CI ≥ 290 ms)" \
        in html
    assert "p99 = 300 ms (the maximum of 30 orders: too few for a p99; 95 % CI ≥ 290 ms), over the orders in" in html
    assert re.search(r'<td id="pscore-ci">≤ 10.34 work/s²', html)
    assert "work/s² · 95 % CI ≤ 10.34" in html and "ms · the maximum of 30 orders: too few for a p99" in html


def test_text_report_words_the_percentiles_and_the_pscore():
    ind, orders, eng_ind, eng_ord = synthetic_run()
    inputs = report_inputs(ind, orders, eng_ind, eng_ord)
    text = format_text_report(inputs.comparisons, latency=inputs.latency, pscore=inputs.pscore)
    tail = text.split("Event-time latency of the outputs triggered in the measurement interval:\n", 1)[1]
    assert tail.splitlines() == [
        "- Indicator: p50 = 50 ms (120 outputs; 95 % CI 50–50 ms)",
        "- Indicator: p99 = 50 ms (120 outputs; 95 % CI ≥ 50 ms, no upper bound below 368 outputs)",
        "- MarketOrder: p50 = 150 ms (30 outputs; 95 % CI 100–210 ms)",
        "- MarketOrder: p99 = 300 ms (the maximum of 30 outputs: too few for a p99; 95 % CI ≥ 290 ms)",
        "",
        "pscore: 10.00 (95 % CI ≤ 10.34; p99 from the maximum of 30 orders: too few for a p99)"]
    # Without latency (the microbenchmarks' per-query text) the report is the Figure B.3 one alone.
    assert "latency" not in format_text_report(inputs.comparisons)


def test_regression_a_validation_of_six_orders_says_their_p99_is_the_maximum(tmp_path, capsys):
    """Issue 14: a pscore resting on 6 MarketOrders printed a bare "p99" that is their maximum."""
    data = tmp_path / "data"
    generate_pairs(pairs_config(rate={"duration_s": 300.0}), data)
    strategies = tmp_path / "strategies.xml"
    write_strategies(load_aux(data), 42, strategies)
    manifest = json.loads((data / "manifest.json").read_text())
    sim_start = manifest["start_epoch_ms"]
    start_ms, end_ms = profile_from_dict(manifest["profile"]).measurement_window()
    expected = validate_pairs(PairsValidation(data, strategies, tmp_path / "expected"))
    assert expected.lines == () and expected.p99_count is None
    exp = {n: pd.read_parquet(tmp_path / "expected" / "expected" / f"{n}.parquet")
           for n in ("Indicator", "MarketOrder")}
    run_ms = exp["MarketOrder"]["inputTickTS"] - sim_start
    in_mi = exp["MarketOrder"][(run_ms >= start_ms) & (run_ms < end_ms)]
    assert len(in_mi) >= 6
    exp["MarketOrder"] = in_mi.iloc[:6]               # the engine "produced" only six orders
    log = write_log(tmp_path / "run", exp, sim_start)
    outcome = validate_pairs(PairsValidation(data, strategies, tmp_path / "report", log))
    assert outcome.p99_count == 6 and outcome.p99_ci_ms[1] is None and outcome.pscore_ci[0] is None
    assert outcome.p99_ci_ms[0] is not None and outcome.pscore_ci[1] > outcome.pscore
    assert "the maximum of 6 orders: too few for a p99" in outcome.lines[0]
    assert outcome.lines[1].startswith(f"pscore: {outcome.pscore:,.2f} (95 % CI ≤ ")
    assert outcome.lines == pscore_lines_from_summary(tmp_path / "report" / "summary.json")
    assert "MarketOrder: p99 = " in outcome.text and "(the maximum of 6 outputs: too few for a p99" in outcome.text
    # `cepkit validate pairs` prints the text report, so the wording reaches the console.
    assert main(["validate", "pairs", "--data", str(data), "--strategies", str(strategies), "--log", str(log),
                 "--out", str(tmp_path / "cli")]) == 1
    assert "the maximum of 6 outputs: too few for a p99" in capsys.readouterr().out


def test_passing_and_unvalidated_reports(tmp_path):
    ind, orders, eng_ind, eng_ord = synthetic_run()
    good = eng_ord[eng_ord["inputTickTS"] != T0 + 5_007].copy()
    good.loc[4, "price"] = 1040
    missing_row = orders[orders["inputTickTS"] == T0 + 100_007].assign(arrivalTS=W0 + 100_100, ingestTS=W0 + 100_050)
    good = pd.concat([good, missing_row], ignore_index=True)
    inputs = report_inputs(ind, orders, eng_ind, good, resources=None, chart=None)
    assert inputs.verdict == "PASSED"
    html = write_report(inputs, tmp_path / "pass").read_text()
    assert '<div class="banner passed" id="verdict">' in html and "All 254 expected answers" in html
    assert html.count("data:image/png;base64,") == 4
    burst = burst_trace()
    bare = ReportInputs(title="Adaptivity run", latency=(stream_latency("Q2", burst, CLOCKS, BURST),), clocks=CLOCKS,
                        profile=BURST, adaptivity=adaptivity_metrics(burst, BURST, CLOCKS))
    assert bare.verdict == "NOT VALIDATED"
    html = write_report(bare, tmp_path / "bare").read_text()
    assert '<div class="banner not-validated" id="verdict">' in html and 'id="correctness"' not in html
    assert re.search(r"<td>Recovery time</td><td class=\"n\">2.02 s</td>", html)
    assert re.search(r"<td>Peak latency degradation ratio</td><td class=\"n\">100.00</td>", html)
    summary = json.loads((tmp_path / "bare" / "summary.json").read_text())
    assert summary["adaptivity"]["recovery_time_ms"] == 2015 and summary["pscore"] is None


def test_report_inputs_check_themselves():
    ind, orders, eng_ind, eng_ord = synthetic_run()
    with pytest.raises(CepkitError, match="need the run's clocks"):
        ReportInputs(title="x", latency=(stream_latency("I", eng_ind, CLOCKS),))
    with pytest.raises(CepkitError, match="no Indicator rows for strategy 'st_09999'"):
        StrategyChart("st_09999", ind, orders)
    with pytest.raises(CepkitError, match="title"):
        ReportInputs(title="  ")


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    return exe


def _run_chromium(exe: str, profile_dir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile_dir}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_renders_in_headless_chromium(written, tmp_path):
    exe = _chromium()
    path, _ = written
    dom = _run_chromium(exe, tmp_path / "profile-dom", "--dump-dom", path.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = dom.stdout
    for element in ('id="verdict"', 'id="correctness-table"', 'id="latency-table"', 'id="pscore-table"',
                    'id="incorrect-MarketOrder"', 'id="fig-input-rate"', 'id="fig-latency-time"',
                    'id="fig-latency-histogram"', 'id="fig-throughput"', 'id="fig-resources"', 'id="fig-strategy"'):
        assert element in body, element
    assert len(re.findall(r'<img src="data:image/png;base64,', body)) == 6
    assert ">FAILED<" in body

    png = tmp_path / "shot.png"
    shot = _run_chromium(exe, tmp_path / "profile-shot", f"--screenshot={png}", "--window-size=1280,2000",
                         "--hide-scrollbars", path.as_uri())
    assert shot.returncode == 0 and png.exists(), shot.stderr[-2000:]
    img = mpimg.imread(png)
    assert img.shape[:2] == (2000, 1280)
    rgb = (img[..., :3] * 255).round().astype(np.uint8).reshape(-1, 3)
    colors = np.unique(rgb, axis=0)
    assert len(colors) > 100, f"only {len(colors)} distinct colours: blank page?"
    # The FAILED banner's pale red (#fee2e2) fills a good part of the top of the page.
    top = (img[:300, :, :3] * 255).round().astype(np.uint8).reshape(-1, 3)
    assert (np.all(top == (254, 226, 226), axis=1)).sum() > 20_000


# -- company names beside generated symbols (validator/company_names.py, specs/VALIDATION.md "Report") ---------

def _company_cells(html: str) -> list[str]:
    return re.findall(r'<td class="company">([^<]*)</td>', html)


def test_a_generated_datasets_report_names_the_companies_beside_the_symbols_and_nothing_else_changes(tmp_path):
    data = tmp_path / "data"
    generate_pairs(pairs_config(rate={"duration_s": 60.0}), data)
    strategies = tmp_path / "strategies.xml"
    write_strategies(load_aux(data), 42, strategies)
    named = validate_pairs(PairsValidation(data, strategies, tmp_path / "named"))
    html = named.report.read_text()
    manifest = read_manifest(data)
    spec = read_strategies(strategies)
    names = company_names(manifest.doc["seed"], {s for st in spec.strategies for s in st.pair})
    st = spec.strategies[0]
    assert html_lib.unescape(html).count(
        f"<td>{st.symbol1}</td><td class=\"company\">{names[st.symbol1]}</td>"
        f"<td>{st.symbol2}</td><td class=\"company\">{names[st.symbol2]}</td>") == 1
    assert len(_company_cells(html)) == 2 * len(spec.strategies) and "invented (faker)" in html
    charted = next(s for s in spec.strategies if s.alias == named_chart(html))
    assert f"{charted.symbol1} ({names[charted.symbol1]}) / {charted.symbol2} ({names[charted.symbol2]})" \
        in html_lib.unescape(html)
    # The same dataset read as if converted: no names, and byte for byte the same answers and summary.
    as_converted = dataclasses.replace(manifest, doc={**manifest.doc, "generator": "convert"})
    plain = validate_pairs(PairsValidation(data, strategies, tmp_path / "plain", manifest=as_converted))
    plain_html = plain.report.read_text()
    assert _company_cells(plain_html) == [] and "invented (faker)" not in plain_html
    assert not any(n in html_lib.unescape(plain_html) for n in names.values())
    for name in ("Indicator.parquet", "MarketOrder.parquet", "final-positions.csv"):
        assert (tmp_path / "named" / "expected" / name).read_bytes() == \
            (tmp_path / "plain" / "expected" / name).read_bytes()
    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("named", "plain")]
    for s in summaries:
        s.pop("generated")
    assert summaries[0] == summaries[1]
    assert not any(n in json.dumps(summaries[0]) for n in names.values())


def named_chart(html: str) -> str:
    return re.search(r"<strong>Strategy (\S+?)[:.]", html).group(1)


def test_a_converted_datasets_report_shows_its_symbols_without_invented_names(tmp_path):
    rows = ["symbol,price,size,tickTS"]
    rng = np.random.default_rng(5)
    for i in range(3000):
        rows.append(f"AAPL,{10_000 + int(rng.integers(-50, 50))},100,{T0 + i * 40}")
        rows.append(f"MSFT,{20_000 + int(rng.integers(-50, 50))},100,{T0 + i * 40 + 20}")
    (tmp_path / "ticks.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "corr.csv").write_text("symbol1,symbol2\nAAPL,MSFT\n")
    data = tmp_path / "data"
    convert_csv(ConvertSpec(tmp_path / "ticks.csv", kind="ticks", correlations=tmp_path / "corr.csv"), data)
    strategies = tmp_path / "strategies.xml"
    write_strategies(load_aux(data), 42, strategies)
    html = validate_pairs(PairsValidation(data, strategies, tmp_path / "out")).report.read_text()
    assert 'id="strategies"' in html and "<td>AAPL</td><td>MSFT</td>" in html
    assert _company_cells(html) == [] and "invented (faker)" not in html
    # Not even the names the strategies' seed or any seed would give.
    for seed in (0, 42):
        assert not any(n in html_lib.unescape(html) for n in company_names(seed, ["AAPL", "MSFT"]).values())


def test_the_strategies_table_is_capped_and_keeps_the_charted_strategy(tmp_path):
    ind, orders, eng_ind, eng_ord = synthetic_run()
    many = tuple(StrategyParams(f"st_{i:05d}", f"S{i:04d}A", f"S{i:04d}B", 100_000, 60, 20, 2.0, 0.1)
                 for i in range(2, 3000)) + (StrategyParams("st_00001", "QZKXVA", "QZKXVB", 100_000, 60, 20, 2.0, 0.1),)
    html = write_report(report_inputs(ind, orders, eng_ind, eng_ord, strategies=many, names_seed=9),
                        tmp_path / "r").read_text()
    assert len(_company_cells(html)) == 2 * (STRATEGIES_SHOWN + 1) and "101 of 2,999 strategies listed" in html
    names = company_names(9, ["QZKXVA", "QZKXVB"])
    assert f"Strategy st_00001: QZKXVA ({names['QZKXVA']}) / QZKXVB ({names['QZKXVB']})" in html_lib.unescape(html)
    with pytest.raises(CepkitError, match="names_seed"):
        report_inputs(ind, orders, eng_ind, eng_ord, names_seed="9")


# -- what the reader came for comes first (issue 46) ---------------------------------------------------

def test_the_page_leads_with_the_verdict_and_headline_figures_and_keeps_long_tables_last_and_folded(written):
    path, _ = written
    html = path.read_text()
    order = ['id="verdict"', 'id="key-figures"', 'id="run-plan"', 'id="run-bound"', 'id="fig-latency-time"',
             'id="profile"', 'id="latency-table"', 'id="pscore-table"', 'id="fig-throughput"', 'id="correctness-table"',
             'id="incorrect-MarketOrder"']
    at = [html.index(marker) for marker in order]
    assert at == sorted(at), [m for m, a, b in zip(order, at, sorted(at)) if a != b]
    # The incorrect answers are folded, as is the strategies table of a run that has one.
    assert re.search(r'<details class="long">\s*<summary><h3 id="incorrect-MarketOrder">', html)
    assert "not recorded" in html.split('id="run-plan"', 1)[1].split("</tr>", 1)[0]
    assert "not recorded" in html.split('id="run-bound"', 1)[1].split("</tr>", 1)[0]


def test_a_recorded_plan_and_bound_are_shown_beside_the_headline_and_in_the_summary(tmp_path):
    run = synthetic_run()
    path = write_report(report_inputs(*run, plan="keyed", bound="kit-bound (feed)"), tmp_path / "r")
    html = path.read_text()
    assert re.search(r'id="run-plan"><th>plan</th><td>keyed</td>', html)
    assert re.search(r'id="run-bound"><th>what bounded the run</th><td>kit-bound \(feed\)</td>', html)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["plan"] == "keyed" and summary["bound"] == "kit-bound (feed)"


def test_the_strategies_table_comes_last_and_folded(tmp_path):
    run = synthetic_run()
    strategies = tuple(StrategyParams(alias=f"st_{i:05d}", symbol1="AAA", symbol2="BBB", available_funds_cents=10_000,
                                      period_length_s=5, num_periods=6, bands_multiplier=2.0, stop_loss_perc=0.1)
                       for i in range(3))
    html = write_report(report_inputs(*run, strategies=strategies), tmp_path / "r").read_text()
    assert html.index('id="correctness-table"') < html.index('id="strategies"') < html.index('id="notes"')
    assert re.search(r'<section id="strategies">\s*<details class="long">', html)


@pytest.mark.parametrize("record, facts", [
    (None, (None, None)),
    ({}, (None, None)),
    ({"plan": "keyed", "bound": "engine"}, ("keyed", "engine")),
    ({"plan": {"name": "by-kind"}, "verdict": {"verdict": "kit-bound", "part": "sink"}}, ("by-kind", "kit-bound (sink)")),
    ({"bound": {"text": "kit-bound (feed)", "part": "feed"}}, (None, "kit-bound (feed)")),
    ({"plan": "", "bound": None, "verdict": {}}, (None, None)),
])
def test_run_record_facts_read_what_run_json_records_and_nothing_else(record, facts):
    assert run_record_facts(record) == facts
