"""The report's figures, drawn with matplotlib's Agg canvas into PNG files.

Figures are built on `matplotlib.figure.Figure` objects with their own Agg canvas rather than
through pyplot, so drawing touches no global state (no backend switch, no figure registry) and is
safe wherever the validator is imported. Every time axis is the run's simulated time since its
start (the rate profile's axis): wall-clock series are mapped with `Clocks.speed`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from kit.errors import CepkitError
from kit.profiles import RateProfile
from validator.latency import StreamLatency
from validator.order_stats import percentile_text
from validator.outputlog import Clocks

WIDTH_IN, HEIGHT_IN, DPI = 10.0, 3.6, 110
PALETTE = ("#2563eb", "#ea580c", "#059669", "#7c3aed", "#db2777", "#0891b2")
PHASE_FILLS = ("#f1f5f9", "#e2e8f0")
MEASURED_FILL = "#dbeafe"
STYLE = {
    "font.family": "DejaVu Sans", "font.size": 9.5, "axes.titlesize": 11, "axes.titleweight": "bold",
    "axes.titlelocation": "left", "axes.labelsize": 9.5, "axes.spines.top": False, "axes.spines.right": False,
    "axes.edgecolor": "#94a3b8", "axes.grid": True, "grid.color": "#e5e7eb", "grid.linewidth": 0.7,
    "legend.frameon": False, "legend.fontsize": 8.5, "xtick.color": "#475569", "ytick.color": "#475569",
}


def _styled(draw):
    """Run a drawing function under the report's rc style (artists read it when created)."""
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return draw(*args, **kwargs)
    return wrapper


def _figure(rows: int = 1, height_in: float = HEIGHT_IN) -> tuple[Figure, list]:
    fig = Figure(figsize=(WIDTH_IN, height_in * rows), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(rows, 1, i + 1) for i in range(rows)]


def _save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, facecolor="white")
    return path


def time_unit(span_s: float) -> tuple[float, str]:
    """Seconds for short runs, minutes for runs over 20 minutes: (divisor, axis label)."""
    return (60.0, "run time (min)") if span_s > 1200 else (1.0, "run time (s)")


def _shade_phases(ax, profile: RateProfile | None, divisor: float) -> None:
    """Shade each phase of the profile (measured ones in blue) and name it along the top."""
    if profile is None:
        return
    starts = profile.phase_starts_ms() / 1000.0 / divisor
    trans = ax.get_xaxis_transform()
    for i, phase in enumerate(profile.phases):
        color = MEASURED_FILL if phase.measured else PHASE_FILLS[i % 2]
        ax.axvspan(starts[i], starts[i + 1], color=color, alpha=0.75, lw=0, zorder=0)
        # A name wider than its band (e.g. a 1-minute ramp-up in a 2-hour run) would be clipped.
        if (starts[i + 1] - starts[i]) < 0.06 * starts[-1]:
            continue
        ax.text((starts[i] + starts[i + 1]) / 2, 0.985, phase.name, transform=trans, ha="center", va="top",
                fontsize=7.5, color="#334155", clip_on=True)


def _style_axes(ax, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_axisbelow(True)
    if ax.get_yscale() == "linear":
        # Headroom so the phase names along the top never sit on the data.
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.1 * (hi - lo))


def _legend_below(ax) -> None:
    """One row of legend under the x label: inside the axes it would cover data or phase names."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=min(len(handles), 7), fontsize=8)


def _span_s(profile: RateProfile | None, *seconds: np.ndarray) -> float:
    ends = [profile.duration_ms / 1000.0] if profile is not None else []
    ends += [float(np.max(s)) for s in seconds if len(s)]
    return max(ends) if ends else 1.0


@_styled
def plot_input_rate(path: Path, profile: RateProfile | None, input_series: pd.DataFrame | None) -> Path:
    """Input events per second over run time, with the profile's target rate and phases shaded."""
    if profile is None and input_series is None:
        raise CepkitError("input-rate figure: needs a profile or an input series")
    obs_s = input_series["second"].to_numpy(np.float64) if input_series is not None else np.zeros(0)
    div, xlabel = time_unit(_span_s(profile, obs_s))
    fig, (ax,) = _figure()
    _shade_phases(ax, profile, div)
    if input_series is not None and len(input_series):
        ax.step((obs_s + 1) / div, input_series["count"].to_numpy(), where="pre", color=PALETTE[0], lw=0.9,
                label="observed input rate (per second)")
    if profile is not None:
        t_ms = np.linspace(0, profile.duration_ms, 2001)
        ax.plot(t_ms / 1000 / div, profile.rate_at(np.minimum(t_ms, profile.duration_ms - 1e-6)), color="#0f172a",
                lw=1.4, ls="--", label=f"profile {profile.name}")
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    _style_axes(ax, "Input rate", xlabel, "events per second")
    _legend_below(ax)
    return _save(fig, path)


def _series_axes(latencies: Sequence[StreamLatency], profile: RateProfile | None, clocks: Clocks):
    """Per-stream x values (simulated seconds), the time unit, and one axes with phases shaded."""
    xs = [s.series["second"].to_numpy(np.float64) * clocks.speed for s in latencies]
    div, xlabel = time_unit(_span_s(profile, *xs))
    fig, (ax,) = _figure()
    _shade_phases(ax, profile, div)
    return xs, div, xlabel, fig, ax


def _mark_faults(ax, faults, clocks: Clocks, div: float) -> None:
    """A red line at each fault's kill, on the run's time axis, labelled with the fault."""
    for i, (name, at_ms) in enumerate(faults):
        x = (at_ms - clocks.run_start_wall_ms) / 1000.0 * clocks.speed / div
        ax.axvline(x, color="#c62828", lw=1.2, ls="-", zorder=3, label="fault" if i == 0 else None)
        ax.annotate(name, (x, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -10), textcoords="offset points",
                    fontsize=7, color="#c62828")


@_styled
def plot_latency_over_time(path: Path, latencies: Sequence[StreamLatency], profile: RateProfile | None,
                           clocks: Clocks, faults: Sequence[tuple[str, int]] = ()) -> Path:
    """p50 and p99 event-time latency per second of arrival, per stream; faults marked."""
    xs, div, xlabel, fig, ax = _series_axes(latencies, profile, clocks)
    _mark_faults(ax, faults, clocks, div)
    for i, (s, x) in enumerate(zip(latencies, xs)):
        c = PALETTE[i % len(PALETTE)]
        # Seconds without outputs have no latency: connect the seconds that have one, and mark
        # the points when they are few enough to tell apart.
        has = s.series["outputs"].to_numpy() > 0
        marker = "o" if has.sum() <= 300 else None
        ax.plot((x[has] + 0.5) / div, s.series["p99_ms"].to_numpy()[has], color=c, lw=1.1, marker=marker, ms=2.2,
                label=f"{s.stream} p99")
        ax.plot((x[has] + 0.5) / div, s.series["p50_ms"].to_numpy()[has], color=c, lw=0.9, ls=":",
                label=f"{s.stream} p50")
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    _style_axes(ax, "Event-time latency over time (per second of arrival)", xlabel, "latency (ms)")
    if latencies:
        _legend_below(ax)
    return _save(fig, path)


@_styled
def plot_throughput(path: Path, latencies: Sequence[StreamLatency], profile: RateProfile | None,
                    clocks: Clocks, faults: Sequence[tuple[str, int]] = ()) -> Path:
    """Outputs per second of arrival, per stream; faults marked."""
    xs, div, xlabel, fig, ax = _series_axes(latencies, profile, clocks)
    _mark_faults(ax, faults, clocks, div)
    for i, (s, x) in enumerate(zip(latencies, xs)):
        ax.step((x + 1) / div, s.series["outputs"], where="pre", color=PALETTE[i % len(PALETTE)], lw=1.0,
                label=s.stream)
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    _style_axes(ax, "Output throughput", xlabel, "outputs per second")
    if latencies:
        _legend_below(ax)
    return _save(fig, path)


@_styled
def plot_latency_histogram(path: Path, latencies: Sequence[StreamLatency], bins: int = 60) -> Path:
    """Distribution of event-time latencies per stream, with each stream's p50 and p99 marked."""
    fig, (ax,) = _figure()
    samples = [s.event_latencies_ms for s in latencies if len(s.event_latencies_ms)]
    if samples:
        lo = min(float(a.min()) for a in samples)
        hi = max(float(a.max()) for a in samples)
        edges = np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
        for i, s in enumerate(latencies):
            if not len(s.event_latencies_ms):
                continue
            c = PALETTE[i % len(PALETTE)]
            counts, _ = np.histogram(s.event_latencies_ms, bins=edges)
            p99 = percentile_text(s.event.percentile("p99"), short=True)     # "max of 6: too few" when so
            ax.stairs(counts, edges, color=c, fill=True, alpha=0.35,
                      label=f"{s.stream}: {s.event.count:,} outputs, p50 {s.event.p50_ms:,} ms, p99 {p99}")
            ax.stairs(counts, edges, color=c, lw=1.0)
            ax.axvline(s.event.p50_ms, color=c, ls=":", lw=1.0)
            ax.axvline(s.event.p99_ms, color=c, ls="--", lw=1.0)
        ax.legend(loc="upper right", title="dotted: p50, dashed: p99", title_fontsize=8)
        # Latency distributions have long tails: switch to a log scale when the tail bins would
        # otherwise be invisible next to the mode.
        all_counts = np.concatenate([np.histogram(a, bins=edges)[0] for a in samples])
        if all_counts.max() > 200 * all_counts[all_counts > 0].min():
            ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no latencies", transform=ax.transAxes, ha="center", color="#64748b")
    _style_axes(ax, "Event-time latency distribution (measurement interval)", "latency (ms)", "outputs")
    return _save(fig, path)


@_styled
def plot_resources(path: Path, resources: pd.DataFrame, clocks: Clocks, profile: RateProfile | None) -> Path:
    """CPU utilisation and resident memory of the engine's processes over run time."""
    x_s = clocks.run_ms(resources["ts_ms"].to_numpy(np.float64)) / 1000.0
    div, xlabel = time_unit(_span_s(profile, x_s))
    fig, (ax_cpu, ax_mem) = _figure(rows=2, height_in=2.7)
    for ax in (ax_cpu, ax_mem):
        _shade_phases(ax, profile, div)
        ax.margins(x=0)
    ax_cpu.plot(x_s / div, resources["cpu_percent"], color=PALETTE[0], lw=1.0)
    ax_cpu.set_ylim(bottom=0)
    _style_axes(ax_cpu, "CPU utilisation", xlabel, "CPU (%)")
    mem_cols = [c for c in resources.columns if c.endswith("rss_bytes")]
    for i, c in enumerate(mem_cols):
        ax_mem.plot(x_s / div, resources[c] / 2**20, color=PALETTE[i % len(PALETTE)], lw=1.0,
                    label=c.replace("_bytes", "").replace("_", " "))
    ax_mem.set_ylim(bottom=0)
    _legend_below(ax_mem)
    _style_axes(ax_mem, "Resident memory", xlabel, "memory (MiB)")
    return _save(fig, path)


@_styled
def plot_strategy(path: Path, indicators: pd.DataFrame, orders: pd.DataFrame | None, strategy: str) -> Path:
    """Thesis Figure 7.5 for one strategy: ratio, its average and Bollinger bands, with the
    strategy's BUY and SELL orders marked on the ratio line."""
    ind = indicators[indicators["strategy"].astype(str) == strategy].sort_values("inputTickTS", kind="stable")
    if not len(ind):
        raise CepkitError(f"strategy chart: no Indicator rows for strategy {strategy!r}")
    t = pd.to_datetime(ind["inputTickTS"].to_numpy(np.int64), unit="ms")
    fig, (ax,) = _figure(height_in=4.2)
    ax.fill_between(t, ind["lowerBand"], ind["upperBand"], color="#e0e7ff", lw=0, label="band")
    ax.plot(t, ind["upperBand"], color="#6366f1", lw=0.9, label="upperBand")
    ax.plot(t, ind["lowerBand"], color="#6366f1", lw=0.9, ls="-.", label="lowerBand")
    ax.plot(t, ind["avgRatio"], color="#64748b", lw=1.0, ls="--", label="avgRatio")
    ax.plot(t, ind["ratio"], color="#0f172a", lw=1.1, label="ratio")
    if orders is not None and len(orders):
        own = orders[orders["strategy"].astype(str) == strategy]
        ts = ind["inputTickTS"].to_numpy(np.float64)
        for kind, marker, color, dy in (("BUY", "^", "#16a34a", -9), ("SELL", "v", "#dc2626", 9)):
            sel = own[own["type"].astype(str) == kind]
            if not len(sel):
                continue
            ot = sel["inputTickTS"].to_numpy(np.float64)
            # Orders sit on the ratio line at their tick; BUY drawn below it and SELL above, so a
            # pair of orders at the same tick shows both markers.
            y = np.interp(ot, ts, ind["ratio"].to_numpy(np.float64))
            tr = offset_copy(ax.transData, fig=fig, x=0, y=dy, units="points")
            ax.scatter(pd.to_datetime(ot.astype(np.int64), unit="ms"), y, marker=marker, s=46, color=color,
                       edgecolor="white", linewidths=0.6, zorder=5, transform=tr, label=f"{kind} ({len(sel)})")
    ax.margins(x=0.01)
    _style_axes(ax, f"Strategy {strategy}: ratio and Bollinger bands (Figure 7.5)", "input tick time (UTC)",
                "price ratio")
    _legend_below(ax)
    return _save(fig, path)
