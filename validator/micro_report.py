"""The HTML report of one microbenchmark suite run: a table of its points and the chapter 4 charts.

`write_suite_report(title, mode, points, out_dir)` writes `out_dir/report.html`, one self-contained
page (figures are PNG data URIs; nothing else is written) in the look of the Pairs report
(validator.report_page, validator.plots). It shows:

- first, per point, what the reader came for: its verdict, rate (or sustainable rate), p99, plan
  and what bounded it (as the point's run.json records them; "not recorded" otherwise);
- per experiment with two or more points, the metric against the swept factor (sustainable
  throughput in "sustainable" mode, Fig 4.3/4.5/4.11/4.15/4.18; p99 latency in "fixed-rate" mode)
  over peak RSS and, for stateful queries, the state store's peak memory (Tables 4.3-4.4);
  single-point experiments get a table row instead;
- per point with adaptivity metrics, the four 4.5.5 metrics and the latency scatter around the
  peak (Fig 4.17) from the point's output log;
- the engine's memory over time, one small panel per point that has metrics/resources.csv;
- per point with metrics/health.csv, the long-run health table (validator/health.py: each
  series' level, growth per hour and flag), as in the Pairs report but without its figure;
- last and folded, the points' full table: params, queries, status, verdict, rate, p50/p99 with
  the count of latencies and the p99's 95 % interval (worded by validator.order_stats), CPU, peak
  RSS and state.

Missing values show as a dash; an unreadable output log or resources file becomes a note and its
figure is left out, so a partly failed suite still gets its report.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from kit.errors import CepkitError
from kit.jsonfile import read_json_object
from kit.outputlog import ARRIVAL_TS
from kit.profiles import RateProfile
from kit.workload import INPUT_TS
from validator import plots
from validator.adaptivity import PEAK, AdaptivityMetrics
from validator.health import HEALTH_CSV, HealthReport, read_health_report
from validator.health_plots import view as health_view
from validator.order_stats import Percentile, percentile_text
from validator.outputlog import Clocks, read_output_log, read_resources
from validator.report import FAILED, PASSED
from validator.report_page import adaptivity_rows, data_uri, environment, run_record_facts

TEMPLATE = "micro_report.html.j2"
MODES = ("fixed-rate", "sustainable")
# A numeric factor spanning this ratio or more gets a log axis (e.g. window rows 500 .. 500k).
LOG_SPAN = 100
SCATTER_MAX = 40_000
MEMORY_COLUMNS = (("rss_bytes", "total"), ("jvm_rss_bytes", "JVM"), ("python_rss_bytes", "Python"))


@dataclass(frozen=True)
class WorkloadPoint:
    """One measured point of the suite; every measurement may be None (not measured, run failed)."""

    workload: str
    experiment: str
    params: dict[str, str]
    queries: int
    status: str
    verdict: str
    p50_ms: int | None = None
    p99_ms: int | None = None
    peak_rss_mib: float | None = None
    mean_cpu_percent: float | None = None
    input_eps: float | None = None
    sustainable_eps: float | None = None
    adaptivity: AdaptivityMetrics | None = None
    engine_dir: Path | None = None
    profile: RateProfile | None = None
    state_mib: float | None = None      # peak state-store memory of the stateful operators
    latency_count: int | None = None    # latencies behind p50/p99 (None: not validated, unknown)
    p99_ci_low_ms: int | None = None    # the p99's 95 % interval, None on an open side
    p99_ci_high_ms: int | None = None
    plan: str | None = None             # where the query's work ran, as the run recorded it
    bound: str | None = None            # what bounded the run, as the run recorded it

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", {str(k): str(v) for k, v in dict(self.params).items()})
        if self.engine_dir is not None:
            object.__setattr__(self, "engine_dir", Path(self.engine_dir))
        if self.latency_count is not None:
            self.p99                        # checks the count against the p99 and its interval

    @property
    def p99(self) -> Percentile | None:
        """The p99 with its count and interval, when the count is known."""
        if self.latency_count is None:
            return None
        return Percentile("p99", self.latency_count, self.p99_ms, self.p99_ci_low_ms, self.p99_ci_high_ms)

    def y(self, mode: str) -> float | None:
        """The point's value on the mode's charts: sustainable throughput or p99 latency."""
        return _finite(self.sustainable_eps if mode == "sustainable" else self.p99_ms)


def write_suite_report(title: str, mode: str, points: Sequence[WorkloadPoint], out_dir: Path) -> Path:
    """Write out_dir/report.html (see the module docstring) and return its path."""
    if not str(title).strip():
        raise CepkitError("suite report: the title must not be empty")
    if mode not in MODES:
        raise CepkitError(f"suite report: mode must be one of {', '.join(MODES)}, got {mode!r}")
    points = list(points)
    out = Path(out_dir)
    path = out / "report.html"
    if path.exists():
        raise CepkitError(f"{path}: already exists; will not overwrite a suite report")
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cepkit-suite-report-") as tmp:
        page = _render(title, mode, points, Path(tmp), notes)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(page)
    except FileExistsError:
        raise CepkitError(f"{path}: already exists; will not overwrite a suite report") from None
    return path


def _render(title: str, mode: str, points: list[WorkloadPoint], tmp: Path, notes: list[str]) -> str:
    def figure(draw, *args) -> str:
        png = tmp / f"fig-{len(list(tmp.iterdir()))}.png"
        draw(png, *args)
        return data_uri(png)

    groups: dict[str, list[WorkloadPoint]] = {}
    for p in points:
        groups.setdefault(p.experiment, []).append(p)
    experiments, single = [], []
    for name, pts in groups.items():
        if len(pts) == 1:
            single.append(pts[0])
        elif any(p.y(mode) is not None or _finite(p.peak_rss_mib) is not None for p in pts):
            axis = sweep_axis(pts)
            experiments.append({"name": name, "axis": axis, "src": figure(plot_sweep, name, pts, axis, mode),
                                "state": any(_finite(p.state_mib) is not None for p in pts)})
        else:
            notes.append(f"Experiment {name}: no point has a value to chart.")
    adaptivity = []
    for p in (p for p in points if p.adaptivity is not None):
        clocks, series = _latency_series(p, notes)
        src = figure(plot_latency_scatter, p, clocks, series) if any(len(s[1]) for s in series) else None
        adaptivity.append({"p": p, "rows": adaptivity_rows(p.adaptivity), "src": src})
    memory = [(p.workload, df) for p in points for df in [_resources(p, notes)] if df is not None and len(df)]
    health = [(p.workload, health_view(h)) for p in points for h in [_health(p, notes)] if h is not None]
    counts = {v: sum(p.verdict == v for p in points) for v in (PASSED, FAILED)}
    return environment().get_template(TEMPLATE).render(
        title=title, mode=mode, generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        cards=[("points", len(points)), ("passed", counts[PASSED]), ("failed", counts[FAILED]),
               ("other", len(points) - counts[PASSED] - counts[FAILED])],
        rate_label="sustainable ev/s" if mode == "sustainable" else "input ev/s",
        y_label="sustainable ev/s" if mode == "sustainable" else "p99 (ms)",
        points=[_row(p, mode) for p in points], experiments=experiments, single=[_row(p, mode) for p in single],
        adaptivity=adaptivity, memory=figure(plot_memory, memory) if memory else None, health=health, notes=notes)


def _facts(p: WorkloadPoint) -> tuple[str | None, str | None]:
    """(plan, bound) of a point: its own, else what its engine run's run.json records."""
    if (p.plan is not None and p.bound is not None) or p.engine_dir is None:
        return p.plan, p.bound
    try:
        run = read_json_object(p.engine_dir / "run.json", kind="run")
    except CepkitError:
        run = None
    plan, bound = run_record_facts(run)
    return p.plan or plan, p.bound or bound


def _row(p: WorkloadPoint, mode: str) -> dict:
    rate = p.sustainable_eps if mode == "sustainable" else p.input_eps
    plan, bound = _facts(p)
    return {"p": p, "plan": plan, "bound": bound, "params": ", ".join(f"{k}={v}" for k, v in p.params.items()), "rate": _finite(rate),
            "y": p.y(mode), "rss": _finite(p.peak_rss_mib), "cpu": _finite(p.mean_cpu_percent),
            "state": _finite(p.state_mib),
            "p99": p99_cell(p.p99_ms, p.latency_count, p.p99_ci_low_ms, p.p99_ci_high_ms),
            "verdict_class": p.verdict.lower().replace(" ", "-")}


def p99_cell(p99_ms, count: int | None, low=None, high=None, missing: str = "–") -> str:
    """A p99 (ms) for a table cell: the value, and with a known sample count its 95 % interval and
    the small-sample wording (validator.order_stats.percentile_text, short form); just the value
    when the count is unknown (a run not validated: the p99 is the sink's)."""
    if count is None:
        return missing if p99_ms is None else f"{p99_ms:,}"
    if count == 0:
        return missing
    return percentile_text(Percentile("p99", count, p99_ms, low, high), unit="", short=True)


def _finite(v) -> float | None:
    return None if v is None or not math.isfinite(float(v)) else v


# -- the sweep chart -------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepAxis:
    """The factor on a sweep chart's x axis and the params that split the points into lines."""

    param: str
    kind: str                      # "log", "linear" or "categorical"
    labels: tuple[str, ...]        # the x values in axis order
    series: tuple[str, ...]

    def value(self, p: WorkloadPoint) -> str:
        return _param(p, self.param)

    def position(self, p: WorkloadPoint) -> float:
        return self.ticks()[self.labels.index(self.value(p))]

    def ticks(self) -> list[float]:
        return [float(i) if self.kind == "categorical" else float(v) for i, v in enumerate(self.labels)]

    def describe(self) -> str:
        kind = {"log": "numeric, log scale", "linear": "numeric", "categorical": "categorical"}[self.kind]
        lines = f"; one line per {', '.join(self.series)}" if self.series else ""
        return f"x: {self.param} ({kind}){lines}"


def _param(p: WorkloadPoint, name: str) -> str:
    # "queries" and "workload" stand in for a factor when no param varies (see sweep_axis).
    if name not in p.params and name in ("queries", "workload"):
        return str(getattr(p, name))
    return p.params.get(name, "")


def sweep_axis(points: Sequence[WorkloadPoint]) -> SweepAxis:
    """The varying param on x (numeric ones first, then the most values, then spec order); the
    other varying params that x does not determine make the lines."""
    names = list(dict.fromkeys(k for p in points for k in p.params))
    varying = [n for n in names if len({_param(p, n) for p in points}) > 1]
    if not varying:
        # Fig 4.18's factor, the number of queries, may be the run's only difference.
        varying = ["queries"] if len({p.queries for p in points}) > 1 else []
    if not varying:
        return SweepAxis("workload", "categorical", tuple(p.workload for p in points), ())

    def numeric(n: str) -> bool:
        return all(_number(_param(p, n)) is not None for p in points)
    x = max(varying, key=lambda n: (numeric(n), len({_param(p, n) for p in points}), -varying.index(n)))
    values = list(dict.fromkeys(_param(p, x) for p in points))
    series = tuple(n for n in varying if n != x and any(
        len({_param(p, n) for p in points if _param(p, x) == v}) > 1 for v in values))
    if not numeric(x):
        return SweepAxis(x, "categorical", tuple(values), series)
    nums = sorted(float(v) for v in values)
    kind = "log" if nums[0] > 0 and nums[-1] / nums[0] >= LOG_SPAN else "linear"
    return SweepAxis(x, kind, tuple(sorted(values, key=float)), series)


def _number(s: str) -> float | None:
    try:
        return _finite(float(s))
    except ValueError:
        return None


@plots._styled
def plot_sweep(path: Path, experiment: str, points: Sequence[WorkloadPoint], axis: SweepAxis, mode: str) -> Path:
    """The experiment's metric (top), peak RSS and, when the queries keep state, the state store's
    peak memory (Tables 4.3-4.4: Q3's per-window state against Q4's panes) against the swept factor."""
    panels = [(lambda p: p.y(mode), "sustainable throughput" if mode == "sustainable" else "p99 latency",
               "events/s (all streams)" if mode == "sustainable" else "p99 latency (ms)", "{x:,.0f}"),
              (lambda p: _finite(p.peak_rss_mib), "peak memory", "peak RSS (MiB)", "{x:,.0f}")]
    if any(_finite(p.state_mib) is not None for p in points):
        panels.append((lambda p: _finite(p.state_mib), "state-store memory", "peak state (MiB)", "{x:,.1f}"))
    fig, axes = plots._figure(rows=len(panels), height_in=2.9)
    lines: dict[str, list[WorkloadPoint]] = {}
    for p in sorted(points, key=axis.position):
        lines.setdefault(", ".join(f"{n}={_param(p, n)}" for n in axis.series) or experiment, []).append(p)
    # Categories have no order between them: markers only, no connecting line.
    style = {"ls": "none", "ms": 7} if axis.kind == "categorical" else {"lw": 1.2, "ms": 4}
    for ax, (value, title, unit, fmt) in zip(axes, panels):
        for i, (label, pts) in enumerate(lines.items()):
            xy = [(axis.position(p), value(p)) for p in pts if value(p) is not None]
            if xy:
                ax.plot(*zip(*xy), marker="o", color=plots.PALETTE[i % len(plots.PALETTE)], label=label, **style)
        bad = [(axis.position(p), value(p)) for p in points if p.verdict == FAILED and value(p) is not None]
        if bad:
            ax.scatter(*zip(*bad), marker="x", s=60, color="#b91c1c", zorder=5, label="verdict FAILED")
        if axis.kind == "log":
            ax.set_xscale("log")
        # The swept values themselves as ticks, written as in the suite (0.001, not 10^-3).
        ax.set_xticks(axis.ticks(), axis.labels)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(fmt)
        ax.set_ylim(bottom=0)
        plots._style_axes(ax, f"{experiment}: {title} vs {axis.param}", axis.param, unit)
    if len(lines) > 1 or any(p.verdict == FAILED for p in points):
        plots._legend_below(axes[-1])
    return plots._save(fig, path)


# -- adaptivity and memory -------------------------------------------------------------------

def _latency_series(p: WorkloadPoint, notes: list[str]) -> tuple[Clocks | None, list]:
    """(clocks, [(stream, arrivalTS, event-time latency)]) of the point's output log, if it has one."""
    if p.engine_dir is None:
        return None, []
    try:
        log = read_output_log(p.engine_dir / "outputs")
    except CepkitError as e:
        notes.append(f"{p.workload}: no latency scatter, the output log cannot be read: {e}")
        return None, []
    series = []
    for name, df in log.streams.items():
        if INPUT_TS in df.columns and len(df):
            arrival = df[ARRIVAL_TS].to_numpy(np.float64)
            lat = arrival - pd.to_numeric(df[INPUT_TS], errors="coerce").to_numpy(np.float64, na_value=np.nan)
            ok = ~np.isnan(lat)
            series.append((name, arrival[ok], lat[ok]))
    return log.clocks, series


@plots._styled
def plot_latency_scatter(path: Path, p: WorkloadPoint, clocks: Clocks,
                         series: list[tuple[str, np.ndarray, np.ndarray]]) -> Path:
    """Fig 4.17: every output's event-time latency at its arrival, phases shaded, tau marked."""
    a = p.adaptivity
    total = sum(len(s[1]) for s in series)
    keep = min(1.0, SCATTER_MAX / max(total, 1))
    xs = [clocks.run_ms(arr) / 1000.0 for _, arr, _ in series]
    div, xlabel = plots.time_unit(plots._span_s(p.profile, *xs))
    fig, (ax,) = plots._figure(height_in=3.4)
    plots._shade_phases(ax, p.profile, div)
    if p.profile is not None and PEAK in {ph.name for ph in p.profile.phases}:
        # Every phase after the warm-up is measured, so the shading alone would not set the burst apart.
        lo, hi = np.array(p.profile.phase_window(PEAK)) / 1000.0 / div
        ax.axvspan(lo, hi, color="#fecaca", lw=0, zorder=0, label="peak phase")
    rng = np.random.default_rng(0)
    for i, ((name, _, lat), x) in enumerate(zip(series, xs)):
        # A long run has millions of outputs: a random sample shows the same cloud.
        pick = rng.random(len(x)) < keep if keep < 1 else slice(None)
        ax.scatter(x[pick] / div, lat[pick], s=5, alpha=0.6, lw=0, rasterized=True,
                   color=plots.PALETTE[i % len(plots.PALETTE)], label=f"{name} ({len(x):,} outputs)")
    ax.axhline(a.steady_mean_ms, color="#475569", ls=":", lw=1.0, label=f"steady mean {a.steady_mean_ms:,.1f} ms")
    ax.axvline(clocks.run_ms(a.tau_peak_wall_ms) / 1000.0 / div, color="#b91c1c", ls="--", lw=1.1, label="τ peak")
    if a.tau_recovery_wall_ms is not None:
        ax.axvline(clocks.run_ms(a.tau_recovery_wall_ms) / 1000.0 / div, color="#15803d", ls="--", lw=1.1,
                   label="τ recovery")
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    shown = "" if keep >= 1 else f" (random {keep:.1%} sample)"
    plots._style_axes(ax, f"{p.workload}: event-time latency around the peak{shown}", xlabel, "latency (ms)")
    plots._legend_below(ax)
    return plots._save(fig, path)


def _resources(p: WorkloadPoint, notes: list[str]) -> pd.DataFrame | None:
    if p.engine_dir is None:
        return None
    try:
        return read_resources(p.engine_dir)
    except CepkitError as e:
        notes.append(f"{p.workload}: no memory figure, {e}")
        return None


def _health(p: WorkloadPoint, notes: list[str]) -> HealthReport | None:
    if p.engine_dir is None:
        return None
    try:
        return read_health_report(p.engine_dir / "metrics" / HEALTH_CSV)
    except CepkitError as e:
        notes.append(f"{p.workload}: no long-run health table, {e}")
        return None


@plots._styled
def plot_memory(path: Path, samples: Sequence[tuple[str, pd.DataFrame]], cols: int = 3) -> Path:
    """Small multiples: the RSS of each point's engine process tree (total, JVM, Python) over time."""
    rows = -(-len(samples) // cols)
    fig = Figure(figsize=(plots.WIDTH_IN, 1.9 * rows + 0.5), dpi=plots.DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (workload, df) in zip(axes, samples):
        t = (df["ts_ms"].to_numpy(np.float64) - float(df["ts_ms"].iloc[0])) / 1000.0
        for (col, label), color in zip(MEMORY_COLUMNS, plots.PALETTE):
            if col in df.columns:
                ax.plot(t, df[col].to_numpy(np.float64) / 2**20, color=color, lw=1.0, label=label)
        ax.set_ylim(bottom=0)
        ax.set_title(workload, fontsize=9)
        ax.set_xlabel("s since first sample", fontsize=8)
        ax.set_ylabel("MiB", fontsize=8)
    for ax in axes[len(samples):]:
        ax.set_visible(False)
    # One legend for all panels, with every series some panel has (not every run has a JVM).
    legend = {lb: h for ax in axes for h, lb in zip(*ax.get_legend_handles_labels())}
    fig.legend(legend.values(), legend.keys(), loc="outside lower center", ncols=max(len(legend), 1))
    return plots._save(fig, path)
