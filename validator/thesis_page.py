"""The thesis's results redone: one page from run directories, beside the thesis's own figures.

`benchmarks/thesis_results.py` gathers run directories and calls `write_thesis_page(inputs, out)`,
which writes, atomically into a new directory, `results.html` (self-contained, figures embedded),
`results.md` (the tables, for a README or a note), `results.json` (kind `cepkit.thesis-results`)
and `figures/*.png`:

(a) **Table 7.1** (seed 002, section 7.5.2): per scale factor the thesis's engines X and Y (their
    MarketOrder p99 and pscore, transcribed in `THESIS_TABLE_7_1`), then each of our Pairs runs
    (or a repetition's median and range): engine, profile, p99 with its order count and 95 %
    interval, pscore, verdict. Only the standard two-hour profile is the thesis's run; a run of
    the quick profile is listed only when asked for and says so in its row.
(b) **Section 4.5.4 (Figure 4.15)**: Q7's maximum sustainable throughput against the pattern's
    interval, the cardinality of ID (MAX_ID) and the predicate's selectivity, one line per engine,
    from `cepkit micro --suite patterns --sustainable` runs (the full suite holds the thesis's
    parameters: MAX_ID 10 k, 0.1 %, 60 s except the factor varied).
(c) **Section 4.5.2 (Figure 4.5)**: Q2's maximum sustainable throughput against the count
    window's size, sliding and tumbling, one line per engine and function, from
    `cepkit micro --suite count-windows --sustainable` runs.
(d) **The standard runs in detail**: for each two-hour run of (a), from its validation summary, the
    per-phase table (each phase's input rate, MarketOrder count, p50 and p99 with its interval) and
    the long-run health (each sampled series' level and growth per hour after the warm-up, flagged
    when it grows).

A page can carry an earlier page's contents over (`read_kept_page`, the script's `--keep`): its
results.json holds each Pairs row's runs, each run's details and each micro point whole (schema 2),
so the figures of runs whose directories are gone (a two-hour run's are gigabytes, not committed)
stay on the page beside new runs. A run given again as a directory replaces its kept copy.

The thesis prints its Figures 4.5 and 4.15 as charts without numbers, so (b) and (c) carry the
thesis's words on them (`THESIS_NOTES`) rather than values. A point from a quick suite (not the
thesis's parameters) or a search that did not confirm its rate is drawn hollow and labelled.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kit.atomic import StagedDir
from kit.errors import CepkitError
from kit.jsonfile import dumps_json, read_document, read_json_object
from kit.workload import read_suite
from validator import plots
from validator.compare_runs import (REPEAT_DOC, RunFigures, _config, _get, lowest_failing_eps, pairs_figures,
                                    read_repeat, read_search, spread)
from validator.health import growth_cells
from validator.latency import LatencyStats
from validator.order_stats import Percentile, percentile_text
from validator.report_page import _jsonable, data_uri, environment

KIND = "cepkit.thesis-results"
# 2: micro rows carry their point whole ("point"), so a later page can keep them (read_kept_page).
SCHEMA_VERSION = 2

# Table 7.1 of the thesis: (SF, basis input rate ev/s, strategies, X p99 ms, Y p99 ms, X pscore,
# Y pscore); None where engine Y could not run (it failed to load the application above SF 2).
THESIS_TABLE_7_1 = (
    (1, 5_000, 25, 63, 22, 47.62, 136.36),
    (2, 5_000, 50, 175, 24, 34.29, 250.00),
    (3, 5_000, 75, 203, None, 44.33, None),
    (4, 5_000, 100, 351, None, 34.19, None),
    (5, 5_000, 125, 91_862, None, 0.16, None),
)
THESIS_NOTES = {
    "table": "Thesis Table 7.1 (8-core Xeon E5420, 16 GB, FINCoS): engines X and Y, two-hour standard run. "
             "Y could not load the application above SF 2 (64 KB Java method limit); X was overloaded at SF 5.",
    "q7": "Thesis 4.5.4: throughput fell as the interval grew from 10 to 600 s (by 50 % on X, 54 % on Y; "
          "24-29 % from 10 to 120 s), rose with MAX_ID (fewer matching pairs) and fell as the predicate "
          "selected more (all engines push the predicate down).",
    "bracket": "Each point is one search's confirmed rate (its run at 90 % of the found rate kept up and was "
               "validated); (< N) is the lowest rate the search found unsustainable, so the limit lies between "
               "the two; ≥ marks a search whose every step kept up, so the limit lies above (drawn with a caret).",
    "count": "Thesis 4.5.2: tumbling windows were expected to be cheaper than sliding ones; X did worse "
             "tumbling, Z reached ~550 K ev/s tumbling but 50 ev/s sliding at R = 500 K, and MEDIAN was the "
             "costliest function on every engine.",
}
# The thesis's Q7 point (4.5.4; the full suite's): each experiment varies one factor from it, so a
# point at it (whichever experiment measured it) belongs to all three panels.
Q7_BASE = {"within_ms": 60_000.0, "max_id": 10_000.0, "selectivity": 0.001}
Q7_FACTORS = (("interval", "within_ms", "interval (s)", 1 / 1000.0, False),
              ("cardinality", "max_id", "MAX_ID", 1.0, True),
              ("selectivity", "selectivity", "selectivity (%)", 100.0, True))


@dataclass(frozen=True)
class PairsRow:
    """One of our Table 7.1 rows: a run, or a repetition's runs (their median and range)."""

    engine: str
    sf: int
    profile: str                      # "standard (2 h)" or "quick (2 min)"
    runs: tuple[RunFigures, ...]
    source: str

    @property
    def counted(self) -> tuple[RunFigures, ...]:
        return tuple(r for r in self.runs if r.counted)

    def p99_text(self) -> str:
        if len(self.runs) == 1:
            r = self.runs[0]
            return "–" if r.p99 is None else percentile_text(r.p99, "orders")
        s = spread([r.p99.value for r in self.counted if r.p99 is not None], of=len(self.runs))
        orders = sorted({r.p99.n for r in self.counted if r.p99 is not None})
        n = f"; {orders[0]:,}–{orders[-1]:,} orders each" if len(orders) > 1 else \
            f"; {orders[0]:,} orders each" if orders else ""
        return s.text(unit="ms") + n

    def pscore_text(self) -> str:
        if len(self.runs) == 1:
            r = self.runs[0]
            if r.pscore is None:
                return "–"
            lo, hi = r.pscore_ci_low, r.pscore_ci_high
            ci = (f"{lo:,.2f}–{hi:,.2f}" if lo is not None and hi is not None else
                  f"≥ {lo:,.2f}" if lo is not None else f"≤ {hi:,.2f}" if hi is not None else "unbounded")
            return f"{r.pscore:,.2f} (95 % CI {ci})"
        return spread([r.pscore for r in self.counted if r.pscore is not None], of=len(self.runs)).text(
            fmt=lambda v: f"{v:,.2f}")

    def verdict(self) -> str:
        if len(self.runs) == 1:
            r = self.runs[0]
            return r.verdict if r.status == "completed" else f"{r.verdict} ({r.status})"
        return f"{len(self.counted)} of {len(self.runs)} PASSED"

    def to_dict(self) -> dict:
        return {"engine": self.engine, "sf": self.sf, "profile": self.profile, "source": self.source,
                "p99": self.p99_text(), "pscore": self.pscore_text(), "verdict": self.verdict(),
                "runs": [r.to_dict() for r in self.runs]}


@dataclass(frozen=True)
class MicroPoint:
    """One workload's sustainable throughput (events/s per stream) in one search run."""

    engine: str
    suite: str
    quick: bool
    workload: str
    experiment: str
    params: dict
    eps: float | None
    confirmed: bool
    low_eps: float | None = None      # over repeated searches: the range (eps is then their median)
    high_eps: float | None = None
    searches: int = 1
    source: str = ""
    # The lowest rate the (representative) search found unsustainable: the limit lies between eps
    # and it. `unbounded`: every step kept up, so the limit lies somewhere above eps (both unknown
    # on a point an older page kept).
    failed_eps: float | None = None
    unbounded: bool = False
    # The plan (family; source -> sink) and what bounded the search (its first failing step's
    # verdict); "" on a point measured before plan families and verdicts (a kept page's).
    plan: str = ""
    bound: str = ""

    @property
    def eps_text(self) -> str:
        """'400,000 (< 800,000)', '>= 400,000 (every step kept up)', or '–'."""
        if self.eps is None:
            return "–"
        if self.failed_eps is not None:
            return f"{self.eps:,.0f} (< {self.failed_eps:,.0f})"
        return f"≥ {self.eps:,.0f} (every step kept up)" if self.unbounded else f"{self.eps:,.0f}"

    @property
    def solid(self) -> bool:
        """A result drawn as one: the thesis's parameters and a confirmed rate."""
        return not self.quick and self.confirmed and self.eps is not None


@dataclass(frozen=True)
class ThesisInputs:
    pairs: tuple[PairsRow, ...] = ()
    micro: tuple[MicroPoint, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Section (d) of kept rows, as an earlier page wrote it (their runs' directories may be gone).
    details: tuple[dict, ...] = ()

    def keeping(self, kept: "ThesisInputs") -> "ThesisInputs":
        """These inputs plus an earlier page's (read_kept_page): a kept row or point whose run is
        also given here is dropped (the run read now wins), and so are its details. A kept point
        measured before plan families (no plan recorded: it may be the kit's core, not the
        engine) is replaced by a point read now of the same workload and engine that names its
        plan, not kept beside it."""
        sources = {r.source for r in self.pairs}
        runs = {str(run.run_dir) for r in self.pairs for run in r.runs}
        points = {(p.source, p.workload) for p in self.micro}
        pairs = tuple(r for r in kept.pairs if r.source not in sources)
        details = tuple(d for d in kept.details if d["source"] not in runs and
                        any(d["source"] == str(run.run_dir) for r in pairs for run in r.runs))
        planned = {(p.workload, p.engine) for p in self.micro if p.plan}
        micro = tuple(p for p in kept.micro if (p.source, p.workload) not in points
                      and not (not p.plan and (p.workload, p.engine) in planned))
        notes = tuple(n for n in kept.notes if n not in self.notes) + self.notes
        return ThesisInputs(self.pairs + pairs, self.micro + micro, notes, self.details + details)


# -- reading ---------------------------------------------------------------------------------

def _profile_of(run: Path) -> tuple[str, bool]:
    """The run's profile in words, and whether it is the thesis's run: the standard profile at its
    full two hours (not quick, not rescaled by `pairs.rate.duration_s`)."""
    cfg, where = _config(run), run / "config.toml"
    quick = ((cfg.get("pairs") or {}).get("rate") or {}).get("quick", False)
    if not isinstance(quick, bool):
        raise CepkitError(f"{where}: pairs.rate.quick: expected true or false, got {quick!r}")
    name = _get(cfg, "pairs.rate.profile", where, "text") or "standard"
    duration = _get(cfg, "pairs.rate.duration_s", where)
    if quick:
        return f"{name} (quick, ~2 min)", False
    if duration is not None:
        return f"{name} (rescaled to {duration:,.0f} s)", False
    return (f"{name} (2 h)", True) if name == "standard" else (name, False)


def read_pairs_rows(paths: Sequence[str | Path], allow_quick: bool = False) -> tuple[PairsRow, ...]:
    """A PairsRow per Pairs run directory, or per engine of a repetition directory (repeat.json: its
    runs together). A run of another profile than the full standard one (quick, rescaled) is
    refused unless `allow_quick` (Table 7.1 is the two-hour run)."""
    rows = []
    for p in paths:
        path = Path(p)
        if (path / REPEAT_DOC).exists():
            groups = [(engine, tuple(pairs_figures(d) for d in dirs)) for engine, dirs in read_repeat(path).groups()]
        else:
            groups = [(None, (pairs_figures(path),))]
        for _, runs in groups:
            if not runs:
                continue
            profile, standard = _profile_of(runs[0].run_dir)
            if not standard and not allow_quick:
                raise CepkitError(f"{path}: profile {profile}, not the thesis's two-hour standard run "
                                  "(--allow-quick lists it, marked as such)")
            engines = {r.engine for r in runs}
            sfs = {r.scale_factor for r in runs}
            if len(engines) != 1 or len(sfs) != 1 or None in sfs:
                raise CepkitError(f"{path}: the runs of one row must share engine and scale factor, got "
                                  f"{sorted(engines)} and {sorted(map(str, sfs))}")
            rows.append(PairsRow(engines.pop(), sfs.pop(), profile, runs, str(path)))
    return tuple(sorted(rows, key=lambda r: (r.sf, r.engine, r.profile)))


def read_micro_points(paths: Sequence[str | Path]) -> tuple[MicroPoint, ...]:
    """Every workload's sustainable throughput from `cepkit micro --sustainable` run directories."""
    out = []
    for p in paths:
        run = Path(p)
        summary = run / "summary.json"
        doc = read_document(summary, "cepkit.micro-summary", 1, missing="not a micro suite run: no summary.json",
                            what="a micro summary")
        if doc.get("mode") != "sustainable":
            raise CepkitError(f"{summary}: mode: {doc.get('mode')!r}, not a --sustainable run")
        engine = _get(_config(run), "run.engine", run / "config.toml", "text") or "spark"
        suite = read_suite(run / "suite.xml")
        by_name = {w.name: w for w in suite.workloads}
        for i, row in enumerate(doc.get("workloads") or []):
            name = _get(row, "workload", summary, "text", required=True, prefix=f"workloads[{i}].")
            w = by_name.get(name)
            if w is None:
                raise CepkitError(f"{summary}: workloads[{i}].workload: {name!r} is not in {run / 'suite.xml'}")
            eps = _get(row, "sustainable_eps", summary, prefix=f"workloads[{i}].")
            low = high = None
            searches = 1
            rep = row.get("sustainable_eps_spread") or row.get("spread")
            if isinstance(rep, dict) and rep.get("n"):
                eps, low, high, searches = rep.get("median"), rep.get("min"), rep.get("max"), int(rep.get("of", 1))
            _, steps = read_search(row, run / name, summary, f"workloads[{i}].")
            failed = lowest_failing_eps(steps)
            out.append(MicroPoint(engine, suite.name, suite.quick, name, w.experiment,
                                  {prm.name: prm.value for prm in w.params}, eps, bool(row.get("confirmed")),
                                  low, high, searches, str(run), failed, failed is None,
                                  str(row.get("connectors") or ""), str(row.get("bound") or "")))
    return tuple(out)


def _kept_run(d: dict) -> RunFigures:
    p99 = None
    if d.get("p99_ms") is not None:
        p99 = Percentile("p99", d["orders"], d["p99_ms"], d.get("p99_ci_low_ms"), d.get("p99_ci_high_ms"))
    return RunFigures(Path(d["run_dir"]), d["engine"], d["verdict"], d["status"], d.get("scale_factor"), p99,
                      d.get("pscore"), d.get("pscore_ci_low"), d.get("pscore_ci_high"), d.get("throughput_eps"),
                      d.get("mean_cpu_percent"), d.get("peak_rss_mib"))


def read_kept_page(path: str | Path) -> ThesisInputs:
    """An earlier page's rows, details, micro points and notes, from its directory or its
    results.json, to carry over to a new page (ThesisInputs.keeping)."""
    path = Path(path)
    where = path / "results.json" if path.is_dir() else path
    doc = read_document(where, KIND, (1, SCHEMA_VERSION), missing="no results page here: no results.json",
                        what="a results page")
    try:
        pairs = tuple(PairsRow(r["engine"], int(r["sf"]), r["profile"],
                               tuple(_kept_run(run) for run in r["runs"]), r["source"])
                      for r in doc.get("pairs") or [])
        micro = []
        for i, m in enumerate(doc.get("micro") or []):
            if "point" not in m:
                raise CepkitError(f"micro[{i}]: no point (a schema 1 page's micro rows cannot be kept; "
                                  f"give their run directories with --micro)")
            micro.append(MicroPoint(**m["point"]))
        details = tuple(doc.get("details") or ())
        for i, d in enumerate(details):
            if not isinstance(d, dict) or not isinstance(d.get("source"), str):
                raise CepkitError(f"details[{i}]: not a run's details (no source)")
        notes = tuple(str(n) for n in doc.get("notes") or ())
    except CepkitError as e:
        raise CepkitError(f"{where}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise CepkitError(f"{where}: not a results page this kit wrote ({type(e).__name__}: {e})") from None
    return ThesisInputs(pairs, tuple(micro), notes, details)


# -- figures ---------------------------------------------------------------------------------

def _num(v) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _draw_line(ax, pts: list[MicroPoint], xs: list[float], label: str, colour) -> None:
    order = np.argsort(xs)
    x = np.asarray(xs)[order]
    pts = [pts[i] for i in order]
    y = np.array([p.eps if p.eps is not None else np.nan for p in pts], dtype=float)
    ax.plot(x, y, "-", color=colour, lw=1.4, label=label)
    solid = np.array([p.solid for p in pts])
    ax.plot(x[solid], y[solid], "o", color=colour, ms=5)
    ax.plot(x[~solid], y[~solid], "o", mfc="white", mec=colour, ms=5)
    # Every step of the search kept up: the limit lies above the point (a caret over it).
    up = np.array([p.unbounded for p in pts])
    if up.any():
        ax.plot(x[up], y[up] * 1.25, "^", color=colour, ms=4)
    lo = np.array([p.low_eps if p.low_eps is not None else np.nan for p in pts], dtype=float)
    hi = np.array([p.high_eps if p.high_eps is not None else np.nan for p in pts], dtype=float)
    has = ~np.isnan(lo) & ~np.isnan(hi)
    if has.any():
        ax.errorbar(x[has], y[has], yerr=[y[has] - lo[has], hi[has] - y[has]], fmt="none", ecolor=colour,
                    capsize=3, lw=1)


def q7_panel_points(points: Sequence[MicroPoint], engine: str, experiment: str, param: str) -> list[MicroPoint]:
    """An engine's points on the panel of one Q7 factor: its experiment's, and any full-suite point
    at the thesis's base values of the other two factors; one per x (the panel's own experiment's
    first, else the first measured there)."""
    pts = [p for p in points if p.suite == "patterns" and p.engine == engine and _num(p.params.get(param)) and
           (p.experiment == experiment or _at_base_but(p, param))]
    by_x: dict[float, MicroPoint] = {}
    for p in sorted(pts, key=lambda p: p.experiment != experiment):
        by_x.setdefault(_num(p.params[param]), p)
    return list(by_x.values())


def _at_base_but(p: MicroPoint, param: str) -> bool:
    """A full-suite Q7 point whose factors other than `param` are the thesis's base values."""
    return not p.quick and all(_num(p.params.get(k)) == v for k, v in Q7_BASE.items() if k != param)


@plots._styled
def plot_q7(path: Path, points: Sequence[MicroPoint]) -> Path | None:
    """Figure 4.15 redone: three panels (interval, MAX_ID, selectivity), one line per engine."""
    q7 = [p for p in points if p.suite == "patterns" and p.experiment in {f[0] for f in Q7_FACTORS}]
    if not q7:
        return None
    fig = Figure(figsize=(plots.WIDTH_IN, 3.2), dpi=plots.DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, 3, i + 1) for i in range(3)]
    engines = sorted({p.engine for p in q7})
    colours = {e: plots.PALETTE[i % len(plots.PALETTE)] for i, e in enumerate(engines)}
    for ax, (experiment, param, xlabel, scale, logx) in zip(axes, Q7_FACTORS):
        for engine in engines:
            pts = q7_panel_points(q7, engine, experiment, param)
            if pts:
                _draw_line(ax, pts, [_num(p.params[param]) * scale for p in pts], engine, colours[engine])
        if logx:
            ax.set_xscale("log")
        ax.set_yscale("log")
        plots._style_axes(ax, f"Q7 vs {experiment}", xlabel, "sustainable ev/s")
    axes[0].legend(loc="best")
    return plots._save(fig, path)


@plots._styled
def plot_count_windows(path: Path, points: Sequence[MicroPoint]) -> Path | None:
    """Figure 4.5 redone: sliding and tumbling panels, throughput against the window's rows."""
    cw = [p for p in points if p.suite == "count-windows" and _num(p.params.get("rows"))]
    if not cw:
        return None
    fig = Figure(figsize=(plots.WIDTH_IN, 3.4), dpi=plots.DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, 2, i + 1) for i in range(2)]
    series = sorted({(p.engine, str(p.params.get("function", ""))) for p in cw})
    colours = {s: plots.PALETTE[i % len(plots.PALETTE)] for i, s in enumerate(series)}
    for ax, policy in zip(axes, ("sliding", "tumbling")):
        for engine, fn in series:
            pts = [p for p in cw if p.engine == engine and str(p.params.get("function", "")) == fn
                   and p.params.get("expiration") == policy]
            if pts:
                _draw_line(ax, pts, [_num(p.params["rows"]) for p in pts], f"{engine} {fn}", colours[(engine, fn)])
        ax.set_xscale("log")
        ax.set_yscale("log")
        plots._style_axes(ax, f"Q2, {policy} window", "window size R (events)", "sustainable ev/s")
    axes[0].legend(loc="best", fontsize=7)
    return plots._save(fig, path)


# -- the page --------------------------------------------------------------------------------

def _table_rows(inputs: ThesisInputs) -> list[dict]:
    """Table 7.1's rows: the thesis's per SF, then ours at that SF; then ours at other SFs."""
    rows = []
    ours = {}
    for r in inputs.pairs:
        ours.setdefault(r.sf, []).append(r)
    thesis_sfs = {t[0] for t in THESIS_TABLE_7_1}
    for sf, rate, strategies, xp99, yp99, xps, yps in THESIS_TABLE_7_1:
        for name, p99, ps in (("thesis engine X", xp99, xps), ("thesis engine Y", yp99, yps)):
            rows.append({"sf": sf, "who": name, "profile": "standard (2 h)", "strategies": strategies,
                         "p99": "–" if p99 is None else f"{p99:,} ms", "pscore": "–" if ps is None else f"{ps:,.2f}",
                         "verdict": "could not run" if p99 is None else "", "thesis": True})
        rows += [_our_row(r) for r in sorted(ours.get(sf, []), key=_ours_order)]
    for sf in sorted(set(ours) - thesis_sfs):
        rows += [_our_row(r) for r in sorted(ours[sf], key=_ours_order)]
    return rows


def _ours_order(r: PairsRow) -> tuple:
    return r.engine, r.source


def _our_row(r: PairsRow) -> dict:
    return {"sf": r.sf, "who": f"cepkit on {r.engine}" + (f" ({len(r.runs)} runs)" if len(r.runs) > 1 else ""),
            "profile": r.profile, "strategies": 25 * r.sf, "p99": r.p99_text(), "pscore": r.pscore_text(),
            "verdict": r.verdict(), "thesis": False, "source": r.source}


def _micro_rows(points: Sequence[MicroPoint]) -> list[dict]:
    out = []
    for p in sorted(points, key=lambda p: (p.suite, p.experiment, p.workload, p.engine)):
        eps = p.eps_text
        if p.low_eps is not None and p.high_eps is not None and p.eps is not None:
            eps += f" [{p.low_eps:,.0f}–{p.high_eps:,.0f}] (median of {p.searches} searches)"
        flags = [w for w, on in (("quick suite: not the thesis's parameters", p.quick),
                                 ("not confirmed", not p.confirmed),
                                 ("measured before plan families: may be the kit's core, not the engine", not p.plan))
                 if on]
        out.append({"suite": p.suite, "experiment": p.experiment, "workload": p.workload, "engine": p.engine,
                    "params": ", ".join(f"{k}={v}" for k, v in p.params.items()), "eps": eps,
                    "plan": p.plan or "not recorded", "bound": p.bound or "not recorded",
                    "flags": "; ".join(flags), "source": p.source, "point": dataclasses.asdict(p)})
    return out


def _phase_row(p: dict, where: Path) -> dict:
    stats = (p.get("streams") or {}).get("MarketOrder")
    try:
        st = None if stats is None else LatencyStats(**stats)
    except (TypeError, CepkitError) as e:
        raise CepkitError(f"{where}: phase {p.get('name')!r}: MarketOrder latency: {e}") from None
    rate = p.get("input_rate_eps")
    secs = lambda ms: f"{ms / 1000:,.0f}"  # noqa: E731
    return {"phase": p["name"] + (" *" if p.get("measured") else ""),
            "sim_s": f"{secs(p['start_ms'])}–{secs(p['end_ms'])}",
            "input": ("–" if rate is None else f"{rate:,.0f}") +
                     f" ({p['nominal_start_eps']:,.0f}→{p['nominal_end_eps']:,.0f})",
            "orders": "–" if st is None else f"{st.count:,}",
            "p50": "–" if st is None or st.empty else f"{st.p50_ms:,}",
            "p99": "–" if st is None else percentile_text(st.percentile("p99"), "orders", unit="", short=True)}


def run_details(rows: Sequence[PairsRow]) -> list[dict]:
    """Section (d): each standard run's per-phase table and health, from its report/summary.json."""
    out = []
    for r in rows:
        if not r.profile.startswith("standard (2 h)"):
            continue
        for run in r.runs:
            where = run.run_dir / "report" / "summary.json"
            if not where.exists():
                continue
            doc = read_json_object(where, what="a validation summary")
            h = doc.get("health") or {}
            note = ("no health samples" if not h else
                    f"{h['samples']:,} samples every {h['interval_s']:g} s over {h['span_s'] / 3600:.2f} h; growth "
                    f"fitted over the {h['fit_span_s'] / 3600:.2f} h after a {h['warmup_fraction']:.0%} warm-up, "
                    f"flagged above {h['relative_per_h']:.0%} of the level per hour")
            p99 = "–" if run.p99 is None else percentile_text(run.p99, "orders")
            out.append({"title": f"cepkit on {run.engine}, SF {run.scale_factor}",
                        "summary": f"{run.verdict}; MarketOrder {p99}; pscore {'–' if run.pscore is None else f'{run.pscore:,.2f}'}",
                        "source": str(run.run_dir), "phases": [_phase_row(p, where) for p in doc.get("phases") or []],
                        "health": [growth_cells(g) for g in h.get("series") or []], "health_note": note})
    return out


def _details_order(d: dict) -> tuple:
    """Section (d) in Table 7.1's order: by scale factor, then engine (titles "cepkit on E, SF N"),
    then run directory."""
    engine, _, sf = d["title"].removeprefix("cepkit on ").rpartition(", SF ")
    return ((int(sf), engine) if sf.isdigit() else (math.inf, d["title"])) + (d["source"],)


def _told_apart(items: list[dict], label: str, same) -> None:
    """Rows or sections of ours that would read alike (two runs of one engine at one SF) get their
    run directory's name after `label`, in place."""
    counts = Counter(same(i) for i in items if i.get("source"))
    for i in items:
        if i.get("source") and counts[same(i)] > 1:
            i[label] = f"{i[label]} ({Path(i['source']).name})"


def _details_markdown(details: list[dict]) -> list[str]:
    lines = []
    for d in details:
        lines += [f"### {d.get('heading', d['title'])}", "", d["summary"] + ".", "",
                  "| phase | sim s | input ev/s (nominal) | MarketOrder n | p50 ms | p99 ms |", "|---|---|---|---|---|---|"]
        lines += [f"| {p['phase']} | {p['sim_s']} | {p['input']} | {p['orders']} | {p['p50']} | {p['p99']} |"
                  for p in d["phases"]]
        lines += ["", "(* = measured: the pscore's interval.)", ""]
        if d["health"]:
            lines += ["| series | level | growth per hour | | flag |", "|---|---|---|---|---|"]
            lines += [f"| {h['label']} | {h['level']} | {h['growth']} | {h['pct']} | {h['flag']} |" for h in d["health"]]
            lines += [""]
        lines += [f"Health: {d['health_note']}.", ""]
    return lines


def markdown(table: list[dict], micro: list[dict], details: list[dict] = ()) -> str:
    lines = ["## Table 7.1 redone", "", "| SF | who | profile | strategies | MarketOrder p99 | pscore | verdict |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['sf']} | {r['who']} | {r['profile']} | {r['strategies']} | {r['p99']} | {r['pscore']} | "
              f"{r['verdict']} |" for r in table]
    lines += ["", THESIS_NOTES["table"], ""]
    if micro:
        lines += ["## Microbenchmarks (maximum sustainable throughput, events/s per stream)", "",
                  "| suite | experiment | workload | engine | params | sustainable ev/s | plan | bound (first failing step) "
                  "| note |", "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {m['suite']} | {m['experiment']} | {m['workload']} | {m['engine']} | {m['params']} | {m['eps']} | "
                  f"{m['plan']} | {m['bound']} | {m['flags']} |" for m in micro]
        lines += ["", THESIS_NOTES["bracket"], "", THESIS_NOTES["q7"], "", THESIS_NOTES["count"], ""]
    if details:
        lines += ["## The standard runs in detail", ""] + _details_markdown(list(details))
    return "\n".join(lines) + "\n"


def write_thesis_page(inputs: ThesisInputs, out_dir: str | Path) -> Path:
    """Write results.html, results.md, results.json and figures/ into the new `out_dir`."""
    staged = StagedDir(out_dir)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    kept = {d["source"] for d in inputs.details}
    table, micro = _table_rows(inputs), _micro_rows(inputs.micro)
    details = [*inputs.details, *(d for d in run_details(inputs.pairs) if d["source"] not in kept)]
    details.sort(key=_details_order)
    _told_apart(table, "who", lambda r: (r["sf"], r["who"]))
    details = [{**d, "heading": d["title"]} for d in details]      # the kept title stays as it was
    _told_apart(details, "heading", lambda d: d["title"])
    with staged as tmp:
        figures = []
        for fid, title, draw, note in (("q7", "Q7 pattern: sustainable throughput (thesis Figure 4.15)", plot_q7, "q7"),
                                       ("count-windows", "Q2 count windows: sustainable throughput (thesis Figure 4.5)",
                                        plot_count_windows, "count")):
            if draw(tmp / "figures" / f"{fid}.png", inputs.micro) is not None:
                figures.append({"id": fid, "file": f"figures/{fid}.png", "title": title,
                                "caption": THESIS_NOTES[note] + " Hollow points: a quick suite or an unconfirmed "
                                                                "rate; bars: the range over repeated searches.",
                                "src": data_uri(tmp / "figures" / f"{fid}.png")})
        doc = {"kind": KIND, "schema_version": SCHEMA_VERSION, "generated": generated,
               "table_7_1": table, "pairs": [r.to_dict() for r in inputs.pairs], "micro": micro, "details": details,
               "figures": [f["file"] for f in figures], "notes": list(inputs.notes)}
        (tmp / "results.json").write_text(dumps_json(_jsonable(doc)),
                                          encoding="utf-8")
        (tmp / "results.md").write_text(markdown(table, micro, details), encoding="utf-8")
        page = environment().get_template("thesis.html.j2").render(
            generated=generated, table=table, micro=micro, figures=figures, notes=list(inputs.notes), details=details,
            thesis_notes=THESIS_NOTES)
        (tmp / "results.html").write_text(page, encoding="utf-8")
    return Path(out_dir) / "results.html"
