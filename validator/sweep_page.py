"""The Pairs scalability sweep as a page a user can show: a table and charts against the scale factor.

`benchmarks/pairs_sweep.py` runs whole Pairs benchmarks at rising scale factors for several plans
(and can take in the points of an earlier sweep, e.g. one run on an older checkout of the kit);
each run is one `SweepPoint`. `write_sweep_page(points, out_dir)` writes `sweep.html`, one
self-contained file (figures embedded), beside `sweep.json` (the points) and `figures/*.png`:

- the table: per series (a plan, as run by one version of the kit) and scale factor, the input
  rate, strategies, MarketOrder p99 with its order count and 95 % interval, pscore, CPU in cores,
  peak RSS, verdict and status;
- charts of the MarketOrder p99 and of the pscore against the scale factor (log axes), one line
  per series, and the cores the engine kept busy.

A point whose run was stopped as unsustainable, failed, or did not pass validation is listed but
drawn hollow: its latency is not a result.

A point may stand for repeated runs at its scale factor (`pairs_sweep.py --repeat K`, `repeat` runs
made): its p99 and pscore are then the median over the runs that completed and PASSED (`counted`
of them), `*_low`/`*_high` their range (min–max), the table's cells say so with n
("612 [580–700] (median of 3 runs)"), and the charts draw the median with an error bar spanning
the range (specs/VALIDATION.md, "Repetitions"). Such a point is valid only when every run was.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

from kit.atomic import atomic_write
from kit.errors import CepkitError
from kit.jsonfile import dumps_json
from validator import plots
from validator.report_page import data_uri, environment

TEMPLATE = "sweep.html.j2"


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep. `series` names the line it belongs to (e.g. "keyed", or "shared
    (landed 032e424)"); latencies in ms; `cores` is the engine's mean CPU in cores."""

    series: str
    sf: int
    strategies: int
    mean_eps: float
    peak_eps: float
    status: str                   # the engine run's: completed, unsustainable, failed
    verdict: str                  # the validator's: PASSED, FAILED, NOT VALIDATED
    order_p99_ms: float | None = None
    orders: int | None = None
    order_p99_text: str | None = None   # with its interval, e.g. "612 (1,049 orders: 605–640)"
    pscore: float | None = None
    p50_ms: float | None = None
    cores: float | None = None
    peak_rss_mib: float | None = None
    run: str = ""
    # Repeated runs (module docstring): runs made, runs counted, and the range of p99 and pscore.
    repeat: int | None = None
    counted: int | None = None
    order_p99_low: float | None = None
    order_p99_high: float | None = None
    pscore_low: float | None = None
    pscore_high: float | None = None
    pscore_text: str | None = None      # the table's cell, e.g. "4.61 [4.20–5.00] (median of 3 runs)"

    def __post_init__(self) -> None:
        if not self.series or isinstance(self.sf, bool) or not isinstance(self.sf, int) or self.sf < 1:
            raise CepkitError(f"sweep point: needs a series and a scale factor >= 1, got {self.series!r}, {self.sf!r}")
        for name in ("order_p99_ms", "pscore", "cores", "peak_rss_mib", "p50_ms", "order_p99_low", "order_p99_high",
                     "pscore_low", "pscore_high"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise CepkitError(f"sweep point {self.series} SF={self.sf}: {name} must be a number >= 0, got {v!r}")
        for name in ("repeat", "counted"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise CepkitError(f"sweep point {self.series} SF={self.sf}: {name} must be a whole number, got {v!r}")
        if self.counted is not None and (self.repeat is None or self.counted > self.repeat):
            raise CepkitError(f"sweep point {self.series} SF={self.sf}: {self.counted} runs counted of "
                              f"{self.repeat} made")
        for value, low, high in (("order_p99_ms", "order_p99_low", "order_p99_high"),
                                 ("pscore", "pscore_low", "pscore_high")):
            v, lo, hi = getattr(self, value), getattr(self, low), getattr(self, high)
            if (lo is None) != (hi is None) or (lo is not None and (v is None or not lo <= v <= hi)):
                raise CepkitError(f"sweep point {self.series} SF={self.sf}: need {low} <= {value} <= {high}, "
                                  f"got {lo!r}, {v!r}, {hi!r}")

    @property
    def valid(self) -> bool:
        """A result: the run completed and every output checked out."""
        return self.status == "completed" and self.verdict == "PASSED"

    @classmethod
    def from_dict(cls, d: dict, series: str | None = None) -> "SweepPoint":
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        if series is not None:
            values["series"] = series
        try:
            return cls(**values)
        except TypeError as e:
            raise CepkitError(f"sweep point: {e}") from None


def write_sweep_page(points: Sequence[SweepPoint], out_dir: str | Path, title: str = "Pairs scalability sweep",
                     notes: Sequence[str] = ()) -> Path:
    """Write sweep.html, sweep.json and figures/ into `out_dir`; sweep.html's path. The files are
    written atomically; an existing page is replaced (a sweep rewrites it after every run)."""
    if not points:
        raise CepkitError("sweep page: no points")
    out = Path(out_dir)
    ordered = sorted(points, key=lambda p: (_series_order(points, p.series), p.sf))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    with tempfile.TemporaryDirectory(prefix="cepkit-sweep-") as tmp:
        figures = _draw(ordered, Path(tmp))
        for f in figures:
            f["src"] = data_uri(Path(tmp) / f["file"])
            atomic_write(out / f["file"], (Path(tmp) / f["file"]).read_bytes(), overwrite=True)
    atomic_write(out / "sweep.json", dumps_json({"kind": "cepkit.pairs-sweep", "schema_version": 1,
                                                "generated": generated,
                                                "points": [asdict(p) for p in ordered]}),
                 overwrite=True)
    page = environment().get_template(TEMPLATE).render(
        title=title, generated=generated, notes=list(notes), best=_best(ordered),
        rows=[{"p": p, "valid": p.valid} for p in ordered], figures=figures)
    return atomic_write(out / "sweep.html", page, overwrite=True)


def _series_order(points: Sequence[SweepPoint], series: str) -> int:
    return list(dict.fromkeys(p.series for p in points)).index(series)


def _best(points: Sequence[SweepPoint]) -> list[dict]:
    """Per series: the highest SF with a valid run and p99 below 1 s, and the best pscore."""
    out = []
    for series in dict.fromkeys(p.series for p in points):
        mine = [p for p in points if p.series == series and p.valid and p.order_p99_ms is not None]
        under = [p for p in mine if p.order_p99_ms < 1000]
        top = max(mine, key=lambda p: p.pscore or 0, default=None)
        out.append({"series": series, "sf_under_1s": max((p.sf for p in under), default=None),
                    "best_pscore": top.pscore if top else None, "best_sf": top.sf if top else None})
    return out


@plots._styled
def _chart(path: Path, points: Sequence[SweepPoint], value, title: str, ylabel: str, log_y: bool,
           line_at: float | None = None, span=lambda p: (None, None)) -> Path:
    fig, (ax,) = plots._figure()
    for i, series in enumerate(dict.fromkeys(p.series for p in points)):
        mine = [p for p in points if p.series == series and value(p) is not None]
        if not mine:
            continue
        color = plots.PALETTE[i % len(plots.PALETTE)]
        ax.plot([p.sf for p in mine], [value(p) for p in mine], color=color, lw=1.6, label=series)
        # Repeated runs: the line goes through the medians, a bar spans each point's range.
        ranged = [(p.sf, value(p), *span(p)) for p in mine if span(p)[0] is not None]
        if ranged:
            x, y, lo, hi = (np.array(c, dtype=float) for c in zip(*ranged))
            ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="none", ecolor=color, elinewidth=1.2, capsize=4, zorder=2)
        ok = [p for p in mine if p.valid]
        bad = [p for p in mine if not p.valid]
        ax.scatter([p.sf for p in ok], [value(p) for p in ok], color=color, s=22, zorder=3)
        ax.scatter([p.sf for p in bad], [value(p) for p in bad], facecolors="white", edgecolors=color, s=26, zorder=3)
    if line_at is not None:
        ax.axhline(line_at, color="#94a3b8", lw=1.0, ls="--")
    ax.set_xscale("log", base=2)
    sfs = sorted({p.sf for p in points})
    ax.set_xticks(sfs, [str(sf) for sf in sfs])
    ax.xaxis.set_minor_locator(NullLocator())
    if log_y:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_title(title)
    ax.set_xlabel("scale factor")
    ax.set_ylabel(ylabel)
    ax.legend(loc="best")
    return plots._save(fig, path)


def _draw(points: Sequence[SweepPoint], fig_dir: Path) -> list[dict]:
    repeated = any(p.repeat is not None for p in points)
    bars = (" Where runs were repeated, the point is the median of those that completed and PASSED and the bar "
            "their range (min–max).") if repeated else ""
    specs = [
        ("p99", "MarketOrder p99 latency", "Event-time p99 of the MarketOrder rows in the measurement interval "
         "(the pscore's latency); the dashed line is 1 s. Hollow points: not a result (unsustainable, failed or "
         "not PASSED)." + bars, lambda p: p.order_p99_ms, "ms", False, 1000.0,
         lambda p: (p.order_p99_low, p.order_p99_high)),
        ("pscore", "pscore", "load(SF) / p99 in seconds (thesis Appendix A)." + bars, lambda p: p.pscore, "work/s²",
         True, None, lambda p: (p.pscore_low, p.pscore_high)),
        ("cores", "Cores busy", "The engine's mean CPU over the run, in cores (all its JVMs and Python workers)."
         + (" Repeated runs: the median." if repeated else ""), lambda p: p.cores, "cores", False, None,
         lambda p: (None, None)),
    ]
    out = []
    for fid, title, caption, value, unit, log_y, line, span in specs:
        if any(value(p) is not None for p in points):
            _chart(fig_dir / "figures" / f"{fid}.png", points, value, title, unit, log_y, line, span)
            out.append({"id": fid, "file": f"figures/{fid}.png", "title": title, "caption": caption})
    return out
