"""The "Long-run health" figure of a report: every series of metrics/health.csv over the run.

Two panels on the run's time axis (validator/plots.py's: simulated seconds since the run start
when the run's clocks are known, with the profile's phases shaded; else seconds since the first
sample): resident memory per role (harness, driver, engine JVMs, engine Python processes), and
sizes on disk (engine state, checkpoint directory, output log). The warm-up the fit leaves out is
hatched, and each fitted line (validator/health.py) is drawn dashed over the samples it fits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kit.profiles import RateProfile
from validator import plots
from validator.health import HealthReport, amount_text, table_rows
from validator.outputlog import Clocks

# A sizes panel whose largest series passes its smallest level this many times gets a log axis
# (the output log, hundreds of MiB, beside a state of a few KiB).
LOG_RATIO = 100.0


def _x_s(ts_ms: np.ndarray, clocks: Clocks | None, first_ms: int) -> np.ndarray:
    ts = np.asarray(ts_ms, dtype=np.float64)
    return clocks.run_ms(ts) / 1000.0 if clocks is not None else (ts - first_ms) / 1000.0


@plots._styled
def plot_health(path: Path, report: HealthReport, clocks: Clocks | None = None,
                profile: RateProfile | None = None) -> Path:
    """The figure of the module doc, as a PNG at `path`."""
    frame = report.frame
    x = _x_s(frame["ts_ms"].to_numpy(), clocks, report.first_ms)
    div, xlabel = plots.time_unit(plots._span_s(profile if clocks is not None else None, x))
    if clocks is None:
        xlabel = xlabel.replace("run time", "time since the first sample")
    fig, (ax_mem, ax_disk) = plots._figure(rows=2, height_in=2.9)
    warm = _x_s(np.array([report.first_ms, report.fit_from_ms]), clocks, report.first_ms) / div
    for ax in (ax_mem, ax_disk):
        if clocks is not None:
            plots._shade_phases(ax, profile, div)
        ax.axvspan(warm[0], warm[1], facecolor="none", edgecolor="#cbd5e1", hatch="//", lw=0, zorder=0.5,
                   label="warm-up (not fitted)")
        ax.margins(x=0)
    disk_levels = []
    for ax, panel in ((ax_mem, "memory"), (ax_disk, "disk")):
        i = 0
        for g in report.series:
            s = g.series
            if s.panel != panel:
                continue
            y = frame[s.column].to_numpy(np.float64)
            ok = np.isfinite(y)
            if not ok.any():
                continue
            color = plots.PALETTE[i % len(plots.PALETTE)]
            i += 1
            growth = "" if g.growth_per_h is None else f", {amount_text(g.growth_per_h, s.unit, True)}/h"
            ax.plot(x[ok] / div, y[ok] / 2**20, color=color, lw=1.1, label=f"{s.label}{growth}")
            if g.fit_at_ms is not None:
                fx = _x_s(np.array(g.fit_at_ms), clocks, report.first_ms) / div
                ax.plot(fx, np.array(g.fit_values) / 2**20, color=color, lw=1.0, ls="--")
            if panel == "disk":
                disk_levels.append((float(np.nanmax(y)), g.level))
    positive = [lv for _, lv in disk_levels if lv is not None and lv > 0]
    if disk_levels and positive and max(m for m, _ in disk_levels) > LOG_RATIO * min(positive):
        ax_disk.set_yscale("log")
    else:
        ax_disk.set_ylim(bottom=0)
    ax_mem.set_ylim(bottom=0)
    plots._style_axes(ax_mem, "Resident memory per role", xlabel, "RSS (MiB)")
    plots._style_axes(ax_disk, "Sizes on disk", xlabel, "MiB" + (" (log scale)" if ax_disk.get_yscale() == "log"
                                                                else ""))
    for ax in (ax_mem, ax_disk):      # long labels (each with its growth): three to a row
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3, fontsize=8)
    return plots._save(fig, path)


def section(report: HealthReport | None, clocks: Clocks | None, profile: RateProfile | None, out_dir: Path,
            data_uri) -> dict | None:
    """What the report's "Long-run health" section shows (templates/health.html.j2): the figure,
    drawn into `out_dir/figures/health.png` (`data_uri` embeds it), the table's rows and notes."""
    if report is None:
        return None
    file = "figures/health.png"
    plot_health(Path(out_dir) / file, report, clocks, profile)
    return {"file": file, "src": data_uri(Path(out_dir) / file), **view(report)}


def view(report: HealthReport) -> dict:
    """The table's rows and the words around them (shared with the microbenchmark report)."""
    interval = report.interval_s
    cost = report.max_sample_ms
    return {"rows": table_rows(report), "samples": len(report.frame), "span_min": report.span_s / 60.0,
            "interval_s": interval, "warmup_min": (report.fit_from_ms - report.first_ms) / 60_000.0,
            "short_note": report.short_note(), "max_sample_ms": cost,
            "growing": [g.series.label for g in report.growing]}
