"""The validation report as an HTML page, with its summary.json and figures.

`write_report(inputs, out_dir)` writes `report.html` (self-contained: figures are embedded as PNG
data URIs and also kept under `figures/`), `summary.json` (every number of the page, for tools)
and the PNG figures; `pscore_lines_from_summary` reads the pscore lines back from a summary.json.
Verdicts, table cells and the wording of percentiles are those of the text report
(validator.report).

What goes in is gathered by the caller into one frozen `ReportInputs`; sections whose inputs are
absent are left out of the page. The strategies table and the strategy chart's caption show an
invented company name beside each ticker symbol of a generated dataset (validator.company_names):
derived here, when the page is drawn, and written nowhere else.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

import jinja2
import numpy as np
import pandas as pd

from kit.errors import CepkitError
from kit.jsonfile import dumps_json, read_document
from kit.profiles import RateProfile
from validator import health_plots, plots
from validator.adaptivity import AdaptivityMetrics
from validator.company_names import company_names
from validator.health import HealthReport
from validator.compare import StreamComparison
from validator.latency import Pscore, StreamLatency
from validator.order_stats import PERCENTILES, interval_text, percentile_note, percentile_text
from validator.recovery import Recovery
from validator.outputlog import RESOURCE_COLUMNS, Clocks
from validator.report import cell_text, overall_verdict, pscore_lines

SUMMARY_KIND = "cepkit.validation-summary"
SUMMARY_VERSION = 1
TEMPLATE = "report.html.j2"
DEFAULT_SHOWN = 25
# The strategies table lists this many (a run has up to 12,800; all are in the strategies file).
STRATEGIES_SHOWN = 100


@dataclass(frozen=True)
class StrategyChart:
    """Data for the Figure 7.5 chart of one strategy: its Indicator rows and (optionally) orders."""

    strategy: str
    indicators: pd.DataFrame
    orders: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        need = {"strategy", "ratio", "avgRatio", "upperBand", "lowerBand", "inputTickTS"}
        missing = need - set(self.indicators.columns)
        if missing:
            raise CepkitError(f"strategy chart: Indicator rows lack {', '.join(sorted(missing))}")
        if not (self.indicators["strategy"].astype(str) == self.strategy).any():
            raise CepkitError(f"strategy chart: no Indicator rows for strategy {self.strategy!r}")
        if self.orders is not None:
            missing = {"strategy", "type", "inputTickTS"} - set(self.orders.columns)
            if missing:
                raise CepkitError(f"strategy chart: MarketOrder rows lack {', '.join(sorted(missing))}")


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report shows. Only `title` is required.

    - run_info: label -> value lines for the run table (engine, scale factor, dataset, ...).
    - comparisons: one StreamComparison per output stream; without any, the verdict is
      "NOT VALIDATED".
    - latency: one StreamLatency per stream (stats over the measurement interval, series over the
      whole run). Needs `clocks`.
    - pscore / adaptivity: the Pairs score and the 4.5.5 metrics, when the run has them.
    - profile and input_series (columns `second` = simulated seconds since the run start and
      `count` = input events in that second): the input-rate figure.
    - resources: metrics/resources.csv samples (ts_ms, cpu_percent, rss_bytes, ...). Needs `clocks`.
    - chart: the strategy shown in the Figure 7.5 chart.
    - recoveries: one per fault injected into the engine (validator/recovery.py); marked on the
      latency and throughput charts. Needs `clocks`.
    - shown: how many incorrect answers the page lists per stream.
    - strategies: the Pairs strategies (objects with alias, symbol1, symbol2, period_length_s and
      num_periods, such as validator.pairs_reference.StrategyParams); the page lists the first
      STRATEGIES_SHOWN.
    - names_seed: the seed of a generated dataset (validator.company_names.names_seed), which puts
      an invented company name beside each symbol; None (a converted dataset) shows none.
    - health: the growth per hour of metrics/health.csv's series (validator/health.py), shown in
      the "Long-run health" section and summary.json `health`.
    - plan / bound: where the query's work ran and what bounded the run, as the engine run recorded
      them (`run_record_facts`); the page says "not recorded" for either when None.
    """

    title: str
    run_info: Mapping[str, object] = field(default_factory=dict)
    comparisons: tuple[StreamComparison, ...] = ()
    latency: tuple[StreamLatency, ...] = ()
    pscore: Pscore | None = None
    adaptivity: AdaptivityMetrics | None = None
    profile: RateProfile | None = None
    clocks: Clocks | None = None
    input_series: pd.DataFrame | None = None
    resources: pd.DataFrame | None = None
    chart: StrategyChart | None = None
    recoveries: tuple[Recovery, ...] = ()
    notes: tuple[str, ...] = ()
    shown: int = DEFAULT_SHOWN
    strategies: tuple = ()
    names_seed: int | None = None
    health: HealthReport | None = None
    phase_table: tuple = ()      # validator.phase_table.PhaseRow per phase of `profile`
    plan: str | None = None
    bound: str | None = None

    def __post_init__(self) -> None:
        if not str(self.title).strip():
            raise CepkitError("report: the title must not be empty")
        object.__setattr__(self, "comparisons", tuple(self.comparisons))
        object.__setattr__(self, "latency", tuple(self.latency))
        object.__setattr__(self, "notes", tuple(str(n) for n in self.notes))
        object.__setattr__(self, "strategies", tuple(self.strategies))
        object.__setattr__(self, "phase_table", tuple(self.phase_table))
        if self.phase_table and (self.profile is None or len(self.phase_table) != len(self.profile.phases)):
            raise CepkitError("report: the phase table needs the profile, one row per phase")
        if self.names_seed is not None and (isinstance(self.names_seed, bool) or not isinstance(self.names_seed, int)):
            raise CepkitError(f"report: names_seed must be an integer or None, got {self.names_seed!r}")
        for what, items in (("comparison", self.comparisons), ("latency", self.latency)):
            names = [x.stream for x in items]
            if len(set(names)) != len(names):
                raise CepkitError(f"report: {what} streams repeat: {names}")
        if (self.latency or self.resources is not None) and self.clocks is None:
            raise CepkitError("report: latency series and resource samples need the run's clocks")
        if self.input_series is not None and not {"second", "count"} <= set(self.input_series.columns):
            raise CepkitError("report: input_series needs the columns second and count")
        if self.resources is not None:
            missing = set(RESOURCE_COLUMNS) - set(self.resources.columns)
            if missing:
                raise CepkitError(f"report: resource samples lack {', '.join(sorted(missing))}")
        if isinstance(self.shown, bool) or not isinstance(self.shown, int) or self.shown < 0:
            raise CepkitError(f"report: shown must be an integer >= 0, got {self.shown!r}")

    @property
    def verdict(self) -> str:
        return overall_verdict(self.comparisons)


def fact_text(value) -> str | None:
    """A recorded fact (run.json `plan`, `bound`, `verdict`) in words: text as it is; an object by
    its `text`, `verdict`, `bound` or `name`, else its fields; None when absent or empty."""
    if value is None or value == "" or value == {} or value == []:
        return None
    if isinstance(value, dict):
        for key in ("text", "verdict", "bound", "name"):
            if isinstance(value.get(key), str) and value[key]:
                part = value.get("part")
                return value[key] + (f" ({part})" if isinstance(part, str) and part and part not in value[key] else "")
        return ", ".join(f"{k} {v}" for k, v in value.items() if not isinstance(v, (dict, list))) or None
    return str(value)


def run_record_facts(run: Mapping | None) -> tuple[str | None, str | None]:
    """(plan, what bounded the run) from an engine run's run.json, where it records them: `plan`,
    and `bound` or a `verdict` object; (None, None) for a run that records neither."""
    if not isinstance(run, Mapping):
        return None, None
    return fact_text(run.get("plan")), fact_text(run.get("bound")) or fact_text(run.get("verdict"))


def pscore_lines_from_summary(path: str | Path) -> tuple[str, ...]:
    """`pscore_lines` of the validation whose summary.json is `path` (what `cepkit pairs` prints)."""
    path = Path(path)
    data = read_document(path, SUMMARY_KIND, SUMMARY_VERSION, what="a validation summary",
                         missing="cannot read the validation summary: not found")
    if data.get("pscore") is None:
        note = str((data.get("run") or {}).get("pscore", ""))
        return pscore_lines(None, note.removeprefix("not computed: ") or None)
    try:
        return pscore_lines(Pscore(**data["pscore"]))
    except (TypeError, CepkitError) as e:     # an older summary without the intervals, or a bad value
        raise CepkitError(f"{path}: pscore: {e}") from None


# -- HTML and JSON ---------------------------------------------------------------------------

def write_report(inputs: ReportInputs, out_dir: str | Path) -> Path:
    """Write report.html, summary.json and figures/*.png into out_dir; return report.html's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shown_strategies = _shown_strategies(inputs)
    names = company_names(inputs.names_seed, (sym for st in shown_strategies for sym in (st.symbol1, st.symbol2)))
    figures = _draw_figures(inputs, out / "figures", _pair_text(inputs, names))
    health = health_plots.section(inputs.health, inputs.clocks, inputs.profile, out, data_uri)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    summary = _summary(inputs, figures, generated)
    summary["health"] = None if health is None else {**_jsonable(inputs.health.to_dict()), "figure": health["file"]}
    (out / "summary.json").write_text(dumps_json(summary))
    page = environment().get_template(TEMPLATE).render(
        title=inputs.title, verdict=inputs.verdict, generated=generated, banner=_banner(inputs),
        cards=_cards(inputs), run_info=[(str(k), cell_text(v)) for k, v in inputs.run_info.items()],
        comparisons=[_comparison_view(c, inputs.shown) for c in inputs.comparisons],
        latency=_latency_rows(inputs.latency), pscore=_pscore_view(inputs.pscore),
        adaptivity=adaptivity_rows(inputs.adaptivity),
        phases=_phase_rows(inputs.profile, inputs.phase_table), clocks=inputs.clocks,
        figures=[dict(f, src=data_uri(out / f["file"])) for f in figures], notes=inputs.notes,
        strategies=_strategy_rows(shown_strategies, names), strategies_total=len(inputs.strategies),
        named=bool(names), health=health, plan=inputs.plan, bound=inputs.bound)
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["num"] = _num
    return env


def _num(v, digits: int = 0) -> str:
    """Thousands separators; floats to `digits` decimals; None as an en dash."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return f"{int(v):,}"
    return f"{float(v):,.{digits}f}"


def _shown_strategies(inputs: ReportInputs) -> list:
    """The strategies the page names: the first STRATEGIES_SHOWN, and the charted one."""
    shown = list(inputs.strategies[:STRATEGIES_SHOWN])
    if inputs.chart is not None:
        shown += [s for s in inputs.strategies[STRATEGIES_SHOWN:] if s.alias == inputs.chart.strategy][:1]
    return shown


def _named(symbol: str, names: Mapping[str, str]) -> str:
    return f"{symbol} ({names[symbol]})" if symbol in names else symbol


def _pair_text(inputs: ReportInputs, names: Mapping[str, str]) -> str:
    """": SYM1 (name) / SYM2 (name)" for the charted strategy's title, or "" when it is not listed."""
    if inputs.chart is None:
        return ""
    st = next((s for s in inputs.strategies if s.alias == inputs.chart.strategy), None)
    return "" if st is None else f": {_named(st.symbol1, names)} / {_named(st.symbol2, names)}"


def _strategy_rows(strategies: Sequence, names: Mapping[str, str]) -> list[dict]:
    return [{"alias": s.alias, "symbol1": s.symbol1, "name1": names.get(s.symbol1, ""), "symbol2": s.symbol2,
             "name2": names.get(s.symbol2, ""), "period_s": s.period_length_s, "periods": s.num_periods}
            for s in strategies]


def _draw_figures(inputs: ReportInputs, fig_dir: Path, pair: str = "") -> list[dict]:
    """Draw every figure the inputs allow; returns [{id, file, title, caption}]; `pair` follows
    the strategy chart's title (its symbols and their names)."""
    out = []

    def add(fid: str, title: str, caption: str, draw) -> None:
        draw(fig_dir / f"{fid}.png")
        out.append({"id": fid, "file": f"figures/{fid}.png", "title": title, "caption": caption})

    if inputs.profile is not None or inputs.input_series is not None:
        add("input-rate", "Input rate", "Input events per second against the rate profile; shaded bands are the "
            "profile's phases, blue ones form the measurement interval.",
            lambda p: plots.plot_input_rate(p, inputs.profile, inputs.input_series))
    with_series = [s for s in inputs.latency if len(s.series)]
    faults = [(r.fault, r.at_ms) for r in inputs.recoveries]
    marked = "; red lines mark the injected faults." if faults else "."
    if with_series:
        add("latency-time", "Latency over time", "Median (dotted) and 99th-percentile event-time latency of the "
            "outputs arriving in each second" + marked,
            lambda p: plots.plot_latency_over_time(p, with_series, inputs.profile, inputs.clocks, faults))
        add("throughput", "Throughput over time", "Output rows received by the sink in each second" + marked,
            lambda p: plots.plot_throughput(p, with_series, inputs.profile, inputs.clocks, faults))
    if any(s.event.count for s in inputs.latency):
        add("latency-histogram", "Latency histogram", "Event-time latency (arrivalTS − inputTS) of the outputs "
            "triggered inside the measurement interval.",
            lambda p: plots.plot_latency_histogram(p, list(inputs.latency)))
    if inputs.resources is not None and len(inputs.resources):
        add("resources", "CPU and memory", "Samples of metrics/resources.csv: CPU utilisation and resident memory "
            "of the engine's processes.",
            lambda p: plots.plot_resources(p, inputs.resources, inputs.clocks, inputs.profile))
    if inputs.chart is not None:
        ch = inputs.chart
        add("strategy", f"Strategy {ch.strategy}{pair}", "The strategy's ratio, its moving average and Bollinger bands "
            "(Indicator rows) with its BUY and SELL orders (MarketOrder rows), as in thesis Figure 7.5.",
            lambda p: plots.plot_strategy(p, ch.indicators, ch.orders, ch.strategy))
    return out


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _banner(inputs: ReportInputs) -> str:
    cs = inputs.comparisons
    if not cs:
        return "No expected answers were given, so correctness was not checked."
    bad = [c for c in cs if not c.passed]
    if not bad:
        return f"All {sum(c.expected for c in cs):,} expected answers of {len(cs)} stream(s) were produced correctly."
    return (f"{len(bad)} of {len(cs)} stream(s) differ: {sum(c.missing for c in cs):,} missing, "
            f"{sum(c.undue for c in cs):,} undue, {sum(c.wrong for c in cs):,} wrong answers.")


def _cards(inputs: ReportInputs) -> list[dict]:
    cards = []
    if inputs.pscore is not None:
        p = inputs.pscore
        ci = interval_text(p.pscore_ci_low, p.pscore_ci_high, lambda v: f"{v:,.2f}")
        cards += [{"label": "pscore", "value": f"{p.pscore:,.2f}", "unit": f"work/s² · 95 % CI {ci}"},
                  {"label": "load", "value": f"{p.load:,}", "unit": f"work/s (SF {p.scale_factor})"},
                  {"label": "p99 MarketOrder latency", "value": f"{p.p99_latency_s * 1000:,.0f}",
                   "unit": f"ms · {percentile_note(p.p99, 'orders')}"}]
    for s in inputs.latency[:2] if inputs.pscore is None else []:
        cards.append({"label": f"p99 {s.stream} latency", "value": _num(s.event.p99_ms),
                      "unit": f"ms · {percentile_note(s.event.percentile('p99'), 'outputs')}"})
    if inputs.adaptivity is not None:
        a = inputs.adaptivity
        cards.append({"label": "max peak latency", "value": _num(a.max_peak_latency_ms), "unit": "ms"})
    for r in inputs.recoveries:
        cards.append({"label": f"recovery ({r.fault})",
                      "value": "none" if r.recovery_ms is None else f"{r.recovery_ms / 1000:,.1f}",
                      "unit": "no output after the kill" if r.recovery_ms is None
                      else f"s, kill to the first output · back to normal after {r.normal_ms / 1000:,.1f} s · "
                           f"latency peak {r.peak_latency_ms:,} ms"})
    total = sum(c.engine for c in inputs.comparisons)
    if inputs.comparisons:
        cards.append({"label": "engine answers", "value": f"{total:,}", "unit": f"{len(inputs.comparisons)} stream(s)"})
    return cards


def _comparison_view(c: StreamComparison, shown: int) -> dict:
    rows = c.incorrect.head(shown)
    fields = list(c.compared)
    body = []
    for rec in rows.to_dict("records"):
        differs = set(filter(None, (rec["differs"] or "").split(", ")))
        body.append({"outcome": rec["outcome"], "keys": [cell_text(rec[k]) for k in c.keys],
                     "values": [(cell_text(rec[f"expected.{f}"]), cell_text(rec[f"engine.{f}"]), f in differs)
                                for f in fields]})
    return {"c": c, "fields": fields, "rows": body, "listed": len(body)}


def _latency_rows(latency: Sequence[StreamLatency]) -> list[dict]:
    """Per stream and clock: the stats, each percentile's cell (value, interval, whether it is
    merely the sample maximum) and the p99 in words."""
    rows = []
    for s in latency:
        for kind, stats in (("event time", s.event), ("processing time", s.processing)):
            if stats is None:
                continue
            cells = []
            for name in PERCENTILES:
                p = stats.percentile(name)
                cells.append({"value": p.value, "ci": interval_text(p.low, p.high) if p.n else "",
                              "maximum": p.is_maximum})
            rows.append({"stream": s.stream, "kind": kind, "stats": stats, "cells": cells,
                         "p99_text": percentile_text(stats.percentile("p99"), "outputs")})
    return rows


def _pscore_view(p: Pscore | None) -> dict | None:
    if p is None:
        return None
    return {"p": p, "p99_text": percentile_text(p.p99, "orders"), "text": p.text(),
            "ci": interval_text(p.pscore_ci_low, p.pscore_ci_high, lambda v: f"{v:,.2f}")}


def adaptivity_rows(a: AdaptivityMetrics | None) -> list[tuple[str, str, str]] | None:
    if a is None:
        return None
    ratio = lambda v: "–" if v is None else f"{v:,.2f}"  # noqa: E731
    return [
        ("Maximum peak latency", f"{a.max_peak_latency_ms:,} ms",
         "largest latency of outputs triggered in or after the peak"),
        ("Peak latency degradation ratio", ratio(a.degradation_ratio),
         f"p99.9 peak {a.peak_p999_ms:,} ms / p99.9 steady {a.steady_p999_ms:,} ms"),
        ("Recovery time", "not recovered" if a.recovery_time_ms is None else f"{a.recovery_time_ms / 1000:,.2f} s",
         f"first output at or below the steady mean ({a.steady_mean_ms:,.1f} ms) after the peak; "
         f"smoothing {a.smoothing_ms} ms"),
        ("Post-peak latency variation ratio", ratio(a.post_peak_variation_ratio),
         "mean after recovery / mean in steady phase" + (
             "" if a.after_recovery_mean_ms is None
             else f" ({a.after_recovery_mean_ms:,.1f} ms / {a.steady_mean_ms:,.1f} ms)")),
    ]


def _phase_rows(profile: RateProfile | None, table: Sequence = ()) -> list[dict] | None:
    """The profile's phases; with the per-phase table (validator.phase_table) each row also has the
    offered input rate and, per stream, the outputs and their p50/p99 cells (count and interval)."""
    if profile is None:
        return None
    rows = [{"name": p["name"], "start_s": p["start_ms"] / 1000, "end_s": p["end_ms"] / 1000,
             "rates": f"{p['start_rate_eps']:,.0f} → {p['end_rate_eps']:,.0f}", "measured": p["measured"],
             "input_eps": None, "streams": []}
            for p in profile.to_dict()["phases"]]
    for row, t in zip(rows, table):
        row["input_eps"] = t.input_rate_eps
        for name, stats in t.latency.items():
            row["streams"].append({
                "stream": name, "n": stats.count, "p50": "–" if stats.empty else f"{stats.p50_ms:,}",
                "p99": percentile_text(stats.percentile("p99"), "outputs", unit="", short=True)})
    return rows


def _summary(inputs: ReportInputs, figures: list[dict], generated: str) -> dict:
    return _jsonable({
        "kind": SUMMARY_KIND, "schema_version": SUMMARY_VERSION, "title": inputs.title, "generated": generated,
        "verdict": inputs.verdict, "run": {str(k): v for k, v in inputs.run_info.items()},
        "plan": inputs.plan, "bound": inputs.bound,
        "clocks": inputs.clocks.to_dict() if inputs.clocks is not None else None,
        "profile": inputs.profile.to_dict() if inputs.profile is not None else None,
        "streams": [c.to_dict() for c in inputs.comparisons],
        "latency": {s.stream: s.to_dict() for s in inputs.latency},
        "pscore": inputs.pscore.to_dict() if inputs.pscore is not None else None,
        "adaptivity": inputs.adaptivity.to_dict() if inputs.adaptivity is not None else None,
        "faults": [r.to_dict() for r in inputs.recoveries],
        "phases": [r.to_dict() for r in inputs.phase_table],
        "figures": [f["file"] for f in figures], "notes": list(inputs.notes),
    })


def _jsonable(v):
    """Plain JSON values: numpy scalars unwrapped, NaN and infinities as null."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return str(v)

