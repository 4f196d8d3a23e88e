"""A microbenchmark suite's results: one `WorkloadResult` per fixed-rate run, `summary.json` and
`summary.md` (rewritten after every workload, so a crash keeps what is done), and the suite's
`report.html` (the chapter 4 charts; validator/micro_report.py draws them).

A repeated search (`--sustainable --repeat K`, a RepeatedSearch) keeps its row's keys, those of
its representative search, and adds `repeat` (each search's found rate, the representative's
directory `search_dir`) and `sustainable_eps_spread` (the median and range over the confirmed
searches: median, min, max, n, of); the summary then says `repeat`: K, and summary.md adds the
found rates and their spread.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cepkit_app.pipelines.sustainable import RepeatedSearch
from kit.errors import CepkitError
from kit.jsonfile import dumps_json
from kit.manifest import load_manifest
from kit.workload import Suite
from validator.adaptivity import AdaptivityMetrics
from validator.micro_report import WorkloadPoint, p99_cell, write_suite_report


@dataclass(frozen=True)
class WorkloadResult:
    workload: str
    params: dict
    queries: int
    status: str                 # the engine run's: completed, unsustainable, failed; or not translated
    message: str
    verdict: str                # PASSED, FAILED, NOT VALIDATED
    events: int | None
    input_eps: float | None     # events per second of the dataset (mean)
    outputs: int
    p50_ms: int | None
    p99_ms: int | None
    peak_rss_mib: float | None
    mean_cpu_percent: float | None
    text: str                   # the per-query comparison, one line each
    adaptivity: dict | None = None   # the thesis 4.5.5 metrics, for adaptivity workloads
    lambda_eps: float | None = None  # the calibrated lambda of a burst workload (per stream)
    lambda_rule: str = ""            # how it was chosen (cepkit_app.pipelines.sustainable.choose_lambda)
    state_mib: float | None = None   # peak state-store memory of Spark's stateful operators
    # The latencies behind p50/p99 and the p99's 95 % interval (validator.order_stats; None on an
    # open side); all None when the run was not validated (p50/p99 then come from the sink).
    latency_count: int | None = None
    p99_ci_low_ms: int | None = None
    p99_ci_high_ms: int | None = None
    # Where events entered and answers left the engine, and what bounded the run (run.json's
    # `connectors` and `bound`, harness/bound.py); None for a workload that did not run.
    connectors: dict | None = None
    bound: dict | None = None
    # Where the per-event work ran (run.json's plan `work`: the plan family and each query's plan).
    work: dict | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def plan_text(self) -> str:
        return plan_cell(self.work, self.connectors)

    @property
    def bound_text(self) -> str:
        return "-" if not self.bound else str(self.bound.get("label", "-"))


def plan_cell(work: dict | None, connectors: dict | None) -> str:
    """A run's plan as a table cell: its plan family, then `source -> sink`."""
    family = (work or {}).get("family")
    return f"{family}; {connectors_text(connectors)}" if family else connectors_text(connectors)


def connectors_text(connectors: dict | None) -> str:
    """`source -> sink` as a table cell: `jvm -> jvm`, `python -> driver-collect`."""
    if not connectors:
        return "-"
    return f"{connectors.get('source', '?')} -> {connectors.get('sink', '?')}"


def _profile_of(run_dir: Path):
    """The rate profile of a workload run's dataset, or None (no dataset there, or no profile)."""
    try:
        return load_manifest(run_dir / "data").rate_profile()
    except CepkitError:
        return None


def write_report(suite: Suite, workloads, results: list, run: Path) -> Path:
    """The suite's report.html: a table of every workload and the chapter 4 charts."""
    points, searched = [], bool(results) and not isinstance(results[0], WorkloadResult)
    for w, r in zip(workloads, results):
        params = {p.name: p.value for p in w.params}
        if searched:
            best = r.best_step()
            step_dir = Path(best.run_dir) if best else None
            streams = len(w.dataset.stream_names)
            points.append(WorkloadPoint(
                w.name, w.experiment, params, len(w.queries), "completed" if best else "unsustainable",
                "PASSED" if r.confirmed else "NOT CONFIRMED", best.p50_ms if best else None,
                best.p99_ms if best else None, best.peak_rss_mib if best else None,
                best.mean_cpu_percent if best else None, None,
                None if r.sustainable_eps is None else r.sustainable_eps * streams, None,
                step_dir / "engine" if step_dir else None, _profile_of(step_dir) if step_dir else None,
                best.state_mib if best else None, **p99_detail(best)))
        else:
            fields = {f.name for f in dataclasses.fields(AdaptivityMetrics)}
            adaptivity = AdaptivityMetrics(**{k: v for k, v in r.adaptivity.items() if k in fields}) \
                if r.adaptivity else None
            wdir = run / w.name
            points.append(WorkloadPoint(
                w.name, w.experiment, params, r.queries, r.status, r.verdict, r.p50_ms, r.p99_ms, r.peak_rss_mib,
                r.mean_cpu_percent, r.input_eps, None, adaptivity,
                wdir / "engine" if (wdir / "engine").exists() else None, _profile_of(wdir), r.state_mib,
                **p99_detail(r)))
    title = f"Microbenchmark suite {suite.name}{' (quick)' if suite.quick else ''}"
    return write_suite_report(title, "sustainable" if searched else "fixed-rate", points, run)


def write_summary(suite: Suite, results: list, run: Path) -> None:
    searched = bool(results) and not isinstance(results[0], WorkloadResult)
    rows = [search_row(r) for r in results] if searched else [r.to_dict() for r in results]
    data = {"kind": "cepkit.micro-summary", "schema_version": 1, "suite": suite.name, "quick": suite.quick,
            "mode": "sustainable" if searched else "fixed-rate", "workloads": rows}
    repeats = [len(r.searches) for r in results if isinstance(r, RepeatedSearch)]
    if repeats:
        data["repeat"] = max(repeats)
    tmp = run / ".summary.json.tmp"
    tmp.write_text(dumps_json(data))
    tmp.replace(run / "summary.json")
    (run / "summary.md").write_text((search_table(results) if searched else summary_table(results)) + "\n")


def p99_detail(r) -> dict:
    """latency_count, p99_ci_low_ms and p99_ci_high_ms of a WorkloadResult or a search Step (all
    None for no result)."""
    return {k: getattr(r, k) if r is not None else None for k in ("latency_count", "p99_ci_low_ms", "p99_ci_high_ms")}


def _p99(row) -> str:
    """The summary.md p99 cell: value, 95 % interval, small-sample wording (validator.order_stats)."""
    return p99_cell(row["p99_ms"], row["latency_count"], row["p99_ci_low_ms"], row["p99_ci_high_ms"], missing="-")


def search_row(r) -> dict:
    best = r.best_step()
    row = {"workload": r.workload, "sustainable_eps": r.sustainable_eps, "confirmed": r.confirmed,
           "lowest_failing_eps": r.lowest_failing_eps(), "steps": len(r.steps), "p50_ms": best.p50_ms if best else None, "p99_ms": best.p99_ms if best else None,
           **p99_detail(best),
           "peak_rss_mib": best.peak_rss_mib if best else None, "state_mib": best.state_mib if best else None,
           "verdicts": sorted({s.verdict for s in r.steps}),
           "connectors": plan_cell(getattr(best, "work", None), best.connectors) if best else "-",
           "bound": r.bound_text(), "bound_why": (r.first_failing().bound or {}).get("why") if r.first_failing() else None}
    if isinstance(r, RepeatedSearch):
        row["repeat"] = r.to_dict()
        row["sustainable_eps_spread"] = r.spread().to_dict()
    return row


def search_table(results: list) -> str:
    head = ("workload", "max sustainable ev/s", "lowest failing ev/s", "confirmed", "steps", "latencies", "p50 ms", "p99 ms (95 % CI)",
            "peak RSS MiB", "state MiB", "verdicts", "connectors", "bound (first failing step)")
    repeated = any(isinstance(r, RepeatedSearch) for r in results)
    if repeated:    # the row's own figures are its representative search's (the median one)
        head += ("each search's ev/s", "median [min–max] ev/s")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        row = search_row(r)
        failing = _fmt(row["lowest_failing_eps"], ",.0f") if row["lowest_failing_eps"] else "none: every step kept up"
        found = _fmt(row["sustainable_eps"], ",.0f")
        if r.kit_bound() and row["sustainable_eps"] is not None:
            found = f"{found} ({row['bound']}: the kit's limit, not the engine's)"
        elif row["bound"] == "other load on the machine" and row["sustainable_eps"] is not None:
            found = f"{found} (other load on the machine: not a figure; measure again alone)"
        line = (f"| {r.workload} | {found} | {failing} | {'yes' if r.confirmed else 'no'} | "
                f"{row['steps']} | {_fmt(row['latency_count'], ',')} | {_fmt(row['p50_ms'], ',')} | "
                f"{_p99(row)} | "
                f"{_fmt(row['peak_rss_mib'], ',.0f')} | {_fmt(row['state_mib'], ',.1f')} | "
                f"{', '.join(row['verdicts'])} | {row['connectors']} | {row['bound']} |")
        if repeated:
            line += f" {_searches(r)} |"
        lines.append(line)
    return "\n".join(lines)


def _searches(r) -> str:
    """The repeat cells of a search table row: each search's found rate, and their spread."""
    if not isinstance(r, RepeatedSearch):
        return f"{_fmt(r.sustainable_eps, ',.0f') if r.confirmed else 'none'} | -"
    found = ", ".join(_fmt(s.sustainable_eps, ',.0f') if s.confirmed else "none" for s in r.searches)
    return f"{found} | {r.spread().text(unit='', noun=('search', 'searches'), counted='confirmed')}"


def _fmt(v, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, spec)


def summary_table(results: list[WorkloadResult]) -> str:
    head = ("workload", "params", "queries", "events", "in ev/s", "outputs", "latencies", "p50 ms",
            "p99 ms (95 % CI)", "CPU %", "RSS MiB", "state MiB", "run", "verdict", "connectors", "bound")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        params = ", ".join(f"{k}={v}" for k, v in r.params.items())
        lines.append(f"| {r.workload} | {params} | {r.queries} | {_fmt(r.events, ',')} | {_fmt(r.input_eps, ',.0f')} | "
                     f"{r.outputs:,} | {_fmt(r.latency_count, ',')} | {_fmt(r.p50_ms, ',')} | {_p99(r.to_dict())} | "
                     f"{_fmt(r.mean_cpu_percent, '.0f')} | {_fmt(r.peak_rss_mib, ',.0f')} | "
                     f"{_fmt(r.state_mib, ',.1f')} | {r.status} | "
                     f"{r.verdict} | {r.plan_text} | {r.bound_text} |")
    notes = [f"- {r.workload}: lambda {r.lambda_eps:,.0f} ev/s per stream ({r.lambda_rule})"
             for r in results if r.lambda_eps is not None]
    return "\n".join(lines + ([""] + notes if notes else []))
