"""One side-by-side report of several runs, typically the same benchmark on different engines.

`write_comparison(run_dirs, out_dir)` reads every run directory (validator.compare_runs: all
Pairs runs, or all micro suite runs of one mode) and writes, atomically into a new `out_dir`:

- `compare.html`: one self-contained page (figures embedded as PNG data URIs) with one table per
  unit (the Pairs run, or each micro workload) whose columns are the runs, headed by their engine
  (and the run directory's name where two runs share an engine): verdict, run status, p50/p99
  event-time latency with their sample count and 95 % interval, pscore (Pairs), sustainable
  throughput (micro --sustainable), mean CPU, peak RSS, duration, events and outputs;
- `compare.json` (kind `cepkit.compare`, schema version 1): the same cells with their numbers;
- `figures/*.png`: per unit, latency (p99 per second of arrival, p50 dotted), input rate
  (released and pulled, from backlog.csv), CPU and resident memory over each run's own time since
  its start, one colour per run, overlaid.

Repeated runs show their spread instead (specs/VALIDATION.md, "Repetitions"): a repetition
directory (`cepkit pairs --repeat K`, its repeat.json) gives one column per engine it holds, whose
cells are the median and [min–max] of the MarketOrder p99, pscore, throughput, CPU and RSS over
its completed, PASSED runs, with the number of runs behind them (compare.json: the cell's
`spread`). With `spread=True` (`cepkit compare --spread`), or beside a repetition directory, the
plain Pairs run directories given are grouped the same way, one column per engine. Such columns
have no time-series figure.

`comparison_text(doc)` gives the tables of a compare.json as plain text (what `cepkit compare`
prints). The pages' look is the Pairs report's (validator.report_page, validator.plots).
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np

from kit.atomic import StagedDir
from kit.errors import CepkitError
from kit.jsonfile import dumps_json
from validator import plots
from validator.compare_runs import RunResult, Series, UnitResult, grouped_results, read_run, repeat_results, run_kind
from validator.report_page import _jsonable, data_uri, environment

KIND = "cepkit.compare"
SCHEMA_VERSION = 1
TEMPLATE = "compare.html.j2"
PAGE, DOC = "compare.html", "compare.json"
MODE_WORDS = {"pairs": "a Pairs run", "fixed-rate": "a microbenchmark suite run at fixed rate",
              "sustainable": "a microbenchmark suite run with --sustainable",
              "repeat": "repeated Pairs runs (their spread)"}
TITLES = {"pairs": "Pairs", "fixed-rate": "microbenchmarks at fixed rate",
          "sustainable": "microbenchmarks, sustainable throughput", "repeat": "Pairs, repeated runs"}


def write_comparison(run_dirs: Sequence[Path], out_dir: Path, spread: bool = False) -> Path:
    """Compare the runs in `run_dirs` into the new directory `out_dir` (module docstring); returns
    the path of compare.html. `spread`: group the Pairs run directories by engine, one column of
    medians and ranges each. Every run is read before anything is written; an existing `out_dir`
    is refused, and a failure leaves nothing behind."""
    staged = StagedDir(out_dir)          # refuses an existing out_dir before any reading
    runs = read_runs(run_dirs, spread)
    columns = column_labels(runs)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    units = _units(runs, columns)
    notes = [n for r in runs for n in r.notes]
    with staged as tmp:
        for i, u in enumerate(units):
            if any(s is not None and not s.empty for s in u["series"]):
                u["figure"] = f"figures/unit-{i + 1:02d}.png"
                plot_unit(tmp / u["figure"], u["name"], columns, u["series"])
        doc = _document(runs, columns, units, notes, generated)
        (tmp / DOC).write_text(dumps_json(_jsonable(doc)), encoding="utf-8")
        page = environment().get_template(TEMPLATE).render(
            title=f"{' vs '.join(dict.fromkeys(r.engine for r in runs))}: {TITLES[runs[0].mode]}",
            generated=generated, runs=doc["runs"], units=[dict(u, src=data_uri(tmp / u["figure"]) if u["figure"]
                                                               else None) for u in doc["units"]],
            columns=columns, notes=notes)
        (tmp / PAGE).write_text(page, encoding="utf-8")
    return Path(out_dir) / PAGE


def read_runs(run_dirs: Sequence[Path], spread: bool = False) -> list[RunResult]:
    """Every run, read and checked to be of one kind and mode (the odd one is named). A
    repetition directory gives one spread column per engine; with `spread`, or beside a
    repetition directory, the Pairs run directories are grouped by engine into spread columns."""
    if not run_dirs:
        raise CepkitError("compare: no run directory given")
    seen: dict[str, Path] = {}
    for d in run_dirs:
        real = os.path.realpath(d)
        if real in seen:
            raise CepkitError(f"{d}: given twice (as {seen[real]}); compare different runs")
        seen[real] = Path(d)
    kinds = [run_kind(Path(d)) for d in run_dirs]
    if spread or "repeat" in kinds:
        runs = _spread_runs([Path(d) for d in run_dirs], kinds)
    else:
        runs = [read_run(Path(d)) for d in run_dirs]
    # The odd one is the first run unlike most (unlike the first run, when two kinds tie).
    common = Counter(r.mode for r in runs).most_common(1)[0][0]
    for r in runs:
        if r.mode != common:
            other = next(o for o in runs if o.mode == common)
            raise CepkitError(f"{r.path}: {MODE_WORDS[r.mode]}, but {other.path} is {MODE_WORDS[common]}; "
                              f"compare runs of one kind")
    return runs


def _spread_runs(run_dirs: list[Path], kinds: list[str]) -> list[RunResult]:
    """Spread columns in the order given: each repetition directory's, in place; the plain Pairs
    runs grouped by engine, each group where its first run was given."""
    for d, kind in zip(run_dirs, kinds):
        if kind == "micro":
            raise CepkitError(f"{d}: a microbenchmark suite run, but spreads are of Pairs runs (a repeated "
                              f"sustainable search shows its spread in its own suite's table)")
    loose = [d for d, kind in zip(run_dirs, kinds) if kind == "pairs"]
    # A group's path is its first run's: it goes where that run was given.
    first = {os.path.realpath(r.path): r for r in grouped_results(loose)} if loose else {}
    out: list[RunResult] = []
    for d, kind in zip(run_dirs, kinds):
        if kind == "repeat":
            out += repeat_results(d)
        elif os.path.realpath(d) in first:
            out.append(first[os.path.realpath(d)])
    return out


def column_labels(runs: Sequence[RunResult]) -> list[str]:
    """The engine of each run; with the run directory's name where engines repeat (and a number
    where even that repeats)."""
    engines = Counter(r.engine for r in runs)
    labels = [r.engine if engines[r.engine] == 1 else f"{r.engine} ({r.path.name})" for r in runs]
    counts, seen = Counter(labels), Counter()
    out = []
    for label in labels:
        seen[label] += 1
        out.append(label if counts[label] == 1 else f"{label} #{seen[label]}")
    return out


def _units(runs: Sequence[RunResult], columns: list[str]) -> list[dict]:
    """Units in first-seen order; per unit, rows in first-seen order of their keys, each with one
    cell per run (None where the run has no such unit or figure)."""
    names = list(dict.fromkeys(u.name for r in runs for u in r.units))
    out = []
    for name in names:
        mine: list[UnitResult | None] = [next((u for u in r.units if u.name == name), None) for r in runs]
        keys: dict[str, str] = {}
        for u in mine:
            for key, (label, _) in (u.cells.items() if u is not None else ()):
                keys.setdefault(key, label)
        rows = [{"key": k, "label": label, "cells": [u.cells[k][1] if u is not None and k in u.cells else None
                                                     for u in mine]} for k, label in keys.items()]
        missing = [c for c, u in zip(columns, mine) if u is None]
        out.append({"name": name, "rows": rows, "series": [None if u is None else u.series for u in mine],
                    "missing": missing, "figure": None})
    return out


def _document(runs, columns, units, notes, generated) -> dict:
    return {
        "kind": KIND, "schema_version": SCHEMA_VERSION, "generated": generated,
        "run_kind": runs[0].kind, "mode": runs[0].mode,
        "runs": [{"column": c, "engine": r.engine, "run_dir": str(r.path), "kind": r.kind, "mode": r.mode}
                 for c, r in zip(columns, runs)],
        "units": [{"name": u["name"], "missing": u["missing"], "figure": u["figure"],
                   "rows": [{"key": row["key"], "label": row["label"],
                             "cells": [None if c is None else c.to_dict() for c in row["cells"]]}
                            for row in u["rows"]]} for u in units],
        "figures": [u["figure"] for u in units if u["figure"]],
        "notes": list(notes),
    }


def comparison_text(doc: dict) -> str:
    """The tables of a compare.json document as Markdown-style text, one per unit."""
    columns = [r["column"] for r in doc["runs"]]
    parts = []
    for u in doc["units"]:
        head = ["", *columns]
        body = [[row["label"], *("–" if c is None else c["text"] for c in row["cells"])] for row in u["rows"]]
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
        parts.append("\n".join([u["name"], line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                                *map(line, body)]))
    return "\n\n".join(parts) + "\n"


# -- the figure of a unit ----------------------------------------------------------------------

PANELS = (("latency", "Event-time latency per second of arrival (p99; p50 dotted)", "latency (ms)"),
          ("rate", "Input rate (pulled by the engine; released by the driver dashed)", "events per second"),
          ("cpu", "CPU utilisation of the engine's processes", "CPU (% of one core)"),
          ("rss", "Resident memory of the engine's processes", "memory (MiB)"))


@plots._styled
def plot_unit(path: Path, unit: str, columns: Sequence[str], series: Sequence[Series | None]) -> Path:
    """Four panels over each run's time since its start, one colour per run (`columns`)."""
    xs = [d["second"].to_numpy(np.float64) for s in series if s is not None
          for d in (s.latency, s.rate, s.resources) if d is not None and len(d)]
    # One time axis for every panel; resources are sampled from the program's start, so before
    # the run start (negative seconds: the engine starting up) too.
    lo, hi = min([0.0] + [float(x.min()) for x in xs]), max([1.0] + [float(x.max()) + 1 for x in xs])
    div, xlabel = plots.time_unit(hi - lo)
    fig, axes = plots._figure(rows=len(PANELS), height_in=2.5)
    for ax, (what, title, ylabel) in zip(axes, PANELS):
        drawn = False
        for i, (label, s) in enumerate(zip(columns, series)):
            if s is None:
                continue
            c = plots.PALETTE[i % len(plots.PALETTE)]
            drawn |= _draw_panel(ax, what, s, label, c, div)
        if not drawn:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="#64748b")
        ax.set_ylim(bottom=0)
        ax.set_xlim(lo / div, hi / div)
        plots._style_axes(ax, f"{unit}: {title}" if ax is axes[0] else title, xlabel, ylabel)
    # One legend for all panels (a run may lack a panel's data): the runs, by colour.
    legend = {lb: h for ax in axes for h, lb in zip(*ax.get_legend_handles_labels())}
    if legend:
        fig.legend(legend.values(), legend.keys(), loc="outside upper center", ncols=min(len(legend), 6))
    return plots._save(fig, path)


def _draw_panel(ax, what: str, s: Series, label: str, color: str, div: float) -> bool:
    if what == "latency" and s.latency is not None and len(s.latency):
        x = (s.latency["second"].to_numpy(np.float64) + 0.5) / div
        marker = "o" if len(x) <= 300 else None
        ax.plot(x, s.latency["p99_ms"], color=color, lw=1.1, marker=marker, ms=2.2, label=label)
        ax.plot(x, s.latency["p50_ms"], color=color, lw=0.9, ls=":")
        return True
    if what == "rate" and s.rate is not None and len(s.rate):
        # Each rate is over the interval ending at its sample: a step back to the previous one.
        x = s.rate["second"].to_numpy(np.float64) / div
        ax.step(x, s.rate["pulled_eps"], where="pre", color=color, lw=1.1, label=label)
        ax.step(x, s.rate["released_eps"], where="pre", color=color, lw=0.9, ls="--")
        return True
    if what in ("cpu", "rss") and s.resources is not None and len(s.resources):
        ax.plot(s.resources["second"].to_numpy(np.float64) / div,
                s.resources["cpu_percent" if what == "cpu" else "rss_mib"], color=color, lw=1.1, label=label)
        return True
    return False
