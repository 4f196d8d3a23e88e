"""The sweep page (validator/sweep_page.py): the table, the per-series summary and the charts of a
Pairs scalability sweep, written atomically as one self-contained HTML file beside its points."""

from __future__ import annotations

import json

import pytest

from kit.errors import CepkitError
from validator.sweep_page import SweepPoint, write_sweep_page


def _points() -> list[SweepPoint]:
    keyed = [SweepPoint("keyed", sf, 25 * sf, 5000.0 * sf, 7500.0 * sf, "completed", "PASSED",
                        order_p99_ms=500.0 + sf, orders=10 * sf, order_p99_text=f"{500 + sf} ({10 * sf} orders)",
                        pscore=10.0 * sf, cores=1.6, peak_rss_mib=3000.0) for sf in (1, 16, 256)]
    shared = [SweepPoint("shared", 1, 25, 5000.0, 7500.0, "completed", "PASSED", order_p99_ms=700.0, pscore=4.0),
              SweepPoint("shared", 16, 400, 10_000.0, 15_000.0, "completed", "PASSED", order_p99_ms=1200.0,
                         pscore=50.0),
              SweepPoint("shared", 256, 6400, 1.0, 2.0, "unsustainable", "NOT VALIDATED", order_p99_ms=3000.0)]
    return shared + keyed


def test_the_page_has_every_run_the_summary_and_embedded_charts(tmp_path):
    page = write_sweep_page(_points(), tmp_path / "sweep", notes=["a note"])
    html = page.read_text()
    assert page.name == "sweep.html" and html.count("<tr class=") == 6
    assert html.count('<img src="data:image/png;base64,') == 3          # p99, pscore, cores
    assert {p.name for p in (tmp_path / "sweep" / "figures").iterdir()} == {"p99.png", "pscore.png", "cores.png"}
    assert "a note" in html and "516 (160 orders)" in html
    # Series keep their first-seen order; the summary counts only completed, PASSED runs.
    assert html.index("<td>shared</td>") < html.index("<td>keyed</td>")
    best = html[html.index('id="best-table"'):html.index("</table>", html.index('id="best-table"'))]
    assert "<td>keyed</td><td class=\"n\">256</td><td class=\"n\">2,560.0</td>" in best
    assert "<td>shared</td><td class=\"n\">1</td><td class=\"n\">50.0</td><td class=\"n\">16</td>" in best
    doc = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert doc["kind"] == "cepkit.pairs-sweep" and len(doc["points"]) == 6
    assert [SweepPoint.from_dict(d) for d in doc["points"]][0] == _points()[0]
    # A sweep rewrites its page after every run: the files are replaced, nothing is left half-written.
    write_sweep_page(_points()[:2], tmp_path / "sweep")
    assert (tmp_path / "sweep" / "sweep.html").read_text().count("<tr class=") == 2
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir()) == ["figures", "sweep.html", "sweep.json"]


def test_bad_points_are_refused_in_one_line():
    with pytest.raises(CepkitError, match="scale factor"):
        SweepPoint("keyed", 0, 1, 1.0, 1.0, "completed", "PASSED")
    with pytest.raises(CepkitError, match="pscore must be a number"):
        SweepPoint("keyed", 1, 1, 1.0, 1.0, "completed", "PASSED", pscore=float("nan"))
    with pytest.raises(CepkitError, match="sweep point"):
        SweepPoint.from_dict({"series": "x", "sf": 1})
    with pytest.raises(CepkitError, match="no points"):
        write_sweep_page([], "unused")
    assert SweepPoint.from_dict({**_points()[0].__dict__, "extra": 1}, series="old").series == "old"
