"""The sweep page (validator/sweep_page.py) of repeated runs: a point's median and range with n in
the table, an error bar spanning the range on the charts, and points that refuse a range that does
not hold their median."""

from __future__ import annotations

import base64
import io
import json
import re

import matplotlib.image as mpimg
import numpy as np
import pytest

from kit.errors import CepkitError
from validator.compare_runs import spread
from validator.sweep_page import SweepPoint, write_sweep_page


def _point(sf: int, p99s: list[float], pscores: list[float], repeat: int = 3) -> SweepPoint:
    p, s = spread(p99s, repeat), spread(pscores, repeat)
    return SweepPoint("keyed", sf, 25 * sf, 5000.0 * sf, 7500.0 * sf, "completed" if p.n == repeat else "failed",
                      "PASSED" if p.n == repeat else "FAILED", order_p99_ms=p.median, order_p99_text=p.text(unit=""),
                      pscore=s.median, pscore_text=s.text(lambda v: f"{v:,.2f}"), cores=1.5, peak_rss_mib=2000.0,
                      repeat=repeat, counted=p.n, order_p99_low=p.low, order_p99_high=p.high, pscore_low=s.low,
                      pscore_high=s.high)


POINTS = [_point(1, [500, 560, 620], [4.5, 5.0, 5.6]), _point(16, [600, 640, 900], [40.0, 44.0, 50.0]),
          _point(256, [700, 1400], [200.0, 400.0])]


def _image(html: str, figure: str) -> np.ndarray:
    src = re.search(rf'<figure id="fig-{figure}">\s*<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    return mpimg.imread(io.BytesIO(base64.b64decode(src.group(1))), format="png")


def test_the_table_says_median_range_and_n(tmp_path):
    html = write_sweep_page(POINTS, tmp_path / "sweep").read_text()
    assert "560 [500–620] (median of 3 runs)" in html and "5.00 [4.50–5.60] (median of 3 runs)" in html
    assert "1,050 [700–1,400] (median of 2 of 3 runs)" in html
    assert "300.00 [200.00–400.00] (median of 2 of 3 runs)" in html
    assert "the bar their range (min–max)" in html
    doc = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert [SweepPoint.from_dict(d) for d in doc["points"]] == POINTS
    assert doc["points"][2]["counted"] == 2 and doc["points"][2]["repeat"] == 3


def test_the_charts_draw_the_range_as_an_error_bar(tmp_path):
    with_bars = write_sweep_page(POINTS, tmp_path / "bars").read_text()
    plain = [SweepPoint.from_dict({**json.loads(json.dumps(p.__dict__)), "order_p99_low": None,
                                   "order_p99_high": None, "pscore_low": None, "pscore_high": None}) for p in POINTS]
    without = write_sweep_page(plain, tmp_path / "plain").read_text()
    for figure in ("p99", "pscore"):
        a, b = _image(with_bars, figure), _image(without, figure)
        assert a.shape == b.shape
        # The bars add ink (in the series' colour) where the plain chart has none.
        assert (np.abs(a[..., :3] - b[..., :3]).sum(axis=2) > 0.3).sum() > 200
    assert np.array_equal(_image(with_bars, "cores"), _image(without, "cores"))


@pytest.mark.parametrize("changes, named", [
    (dict(order_p99_low=700.0), "need order_p99_low <= order_p99_ms <= order_p99_high"),
    (dict(pscore_high=None), "need pscore_low <= pscore <= pscore_high"),
    (dict(pscore_low=-1.0), "pscore_low must be a number >= 0"),
    (dict(counted=4), "4 runs counted of 3 made"),
    (dict(repeat=True), "repeat must be a whole number"),
])
def test_a_range_that_does_not_hold_its_median_is_refused(changes, named):
    with pytest.raises(CepkitError, match=re.escape(named)):
        SweepPoint.from_dict({**POINTS[0].__dict__, **changes})
