"""Reading finished run directories for `cepkit compare`: the figures of one engine's run, by unit.

A run directory is recognised by what the pipelines write (cepkit_app/pipelines/pairs.py, micro.py):

- Pairs: `config.toml`, `engine/run.json` (the harness's record), `engine/metrics/resources.csv`
  and `backlog.csv`, `engine/outputs/` (the output log) and `report/summary.json` (the validation;
  absent when the engine run did not complete, since a stopped run is not validated);
- micro: `config.toml`, `suite.xml`, `summary.json` (kind cepkit.micro-summary, mode fixed-rate or
  sustainable) and per workload `<workload>/engine/` (fixed rate), or `<workload>/search.json` and
  its step directories (sustainable: the figures are the best step's, as in the suite report).

- repetitions (`cepkit pairs --repeat K`): `repeat.json` (kind cepkit.repeat) naming its Pairs run
  directories (`run-1` ... `run-K`, or `ENGINE/run-i` per engine); a sustainable micro search
  repeated (`cepkit micro --sustainable --repeat K`) keeps its searches in `<workload>/run-i/`,
  which the summary row's `repeat.search_dir` points into.

`read_run(path)` gives a `RunResult`: the engine (config.toml's `run.engine`), the kind and mode,
and per unit (the Pairs run; each micro workload) a `UnitResult`, its table cells in a fixed order
and its time series on the run's own clock (wall seconds since the run start). Nothing is written.

Repetitions are summed up by their spread (specs/VALIDATION.md, "Repetitions"): `spread(values)`
is the median and range (min-max) of one figure over the runs that count (completed and PASSED);
`pairs_figures(run_dir)` reads the figures of one Pairs run that enter it (verdict, status,
MarketOrder p99 with its order count and interval, pscore, throughput, CPU, RSS);
`read_repeat(path)` reads a repeat.json; `spread_result` turns one engine's runs into one
`RunResult` (mode "repeat") whose cells are the median and range over them, for a repetition
directory (`repeat_results`) or for run directories given together (`grouped_results`).

A record that is missing or malformed (run.json, a summary, search.json, config.toml) is one
CepkitError line naming the file and the key. An output log or a metrics file that cannot be read
costs only its chart and its recomputed intervals, and a note says so: a stopped run keeps what
it has.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from kit.config import read_config_document
from kit.datafiles import read_data_table
from kit.errors import CepkitError, at
from kit.inputs import require_regular
from kit.jsonfile import read_document
from kit.outputlog import ARRIVAL_TS
from kit.workload import INPUT_TS, read_suite
from validator.latency import LatencyStats, Pscore, event_time_latency_ms, latency_stats, per_second_series
from validator.order_stats import Percentile, percentile_text
from validator.outputlog import OutputLog, read_output_log, read_resources

ENGINE_RUN_KIND = "cepkit.engine-run"
PAIRS_SUMMARY_KIND = "cepkit.validation-summary"
MICRO_SUMMARY_KIND = "cepkit.micro-summary"
SEARCH_KIND = "cepkit.sustainable-search"
REPEAT_KIND = "cepkit.repeat"
REPEAT_SCHEMA_VERSION = 1
REPEAT_DOC = "repeat.json"
MODES = ("pairs", "fixed-rate", "sustainable", "repeat")
VERDICTS = ("PASSED", "FAILED", "NOT VALIDATED")
BACKLOG_COLUMNS = ("ts_ms", "released", "pulled")


@dataclass(frozen=True)
class Cell:
    """One table cell: the text shown, and the number behind it with its sample count and 95 %
    interval where it has them (for compare.json)."""

    text: str
    value: object = None
    count: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    # Over repeated runs: the Spread's dict (median, range, n); `value` is then the median and
    # `count` the runs behind it. Only such cells carry the key in compare.json.
    spread: dict | None = None

    def to_dict(self) -> dict:
        out = {"text": self.text, "value": self.value, "count": self.count, "ci_low": self.ci_low,
               "ci_high": self.ci_high}
        if self.spread is not None:
            out["spread"] = dict(self.spread)
        return out


@dataclass(frozen=True)
class Series:
    """One run's time series, x in wall seconds since its run start: `latency` (second, p50_ms,
    p99_ms: seconds in which outputs arrived), `rate` (second, released_eps, pulled_eps) and
    `resources` (second, cpu_percent, rss_mib). None where the run has no such data."""

    latency: pd.DataFrame | None = None
    rate: pd.DataFrame | None = None
    resources: pd.DataFrame | None = None

    @property
    def empty(self) -> bool:
        return all(d is None or not len(d) for d in (self.latency, self.rate, self.resources))


@dataclass
class UnitResult:
    """One unit of a run (the Pairs run, or one micro workload): key -> (row label, cell), in
    table order, and its series."""

    name: str
    cells: dict[str, tuple[str, Cell]] = field(default_factory=dict)
    series: Series = field(default_factory=Series)

    def add(self, key: str, label: str, cell: Cell | None) -> None:
        if cell is not None:
            self.cells[key] = (label, cell)


@dataclass(frozen=True)
class RunResult:
    path: Path
    engine: str
    kind: str                       # "pairs" or "micro"
    mode: str                       # "pairs", "fixed-rate", "sustainable", or "repeat" (a spread of Pairs runs)
    units: tuple[UnitResult, ...]
    notes: tuple[str, ...] = ()


def _get(doc, key: str, source: Path, want: str = "number", required: bool = False, prefix: str = ""):
    """`doc`'s dotted `key`; None when absent or null unless `required`; refused (one line naming
    `source` and `prefix + key`) when of another type. `want`: "number", "int", "text", "object"."""
    v = doc
    parts = key.split(".")
    for i, part in enumerate(parts):
        if v is None:
            break
        if not isinstance(v, dict):
            raise at(source, prefix + ".".join(parts[:i]), f"expected an object, got {v!r}")
        v = v.get(part)
    if v is None:
        if required:
            raise at(source, prefix + key, "missing")
        return None
    number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ok = {"number": number, "int": number and isinstance(v, int), "text": isinstance(v, str),
          "object": isinstance(v, dict)}[want]
    if not ok:
        words = {"number": "a finite number", "int": "an integer", "text": "a string", "object": "an object"}
        raise at(source, prefix + key, f"expected {words[want]}, got {v!r}")
    return v


# -- what kind of run ------------------------------------------------------------------------

def run_kind(path: Path) -> str:
    """"pairs", "micro" or "repeat" (a repetition directory) by the files the pipelines write; a
    CepkitError for anything else."""
    p = Path(path)
    if not p.is_dir():
        raise CepkitError(f"{p}: not a run directory ({'not found' if not p.exists() else 'not a directory'})")
    if (p / REPEAT_DOC).exists():
        return "repeat"
    if (p / "summary.json").exists():
        return "micro"
    if (p / "engine").exists() or (p / "report").exists():
        return "pairs"
    raise CepkitError(f"{p}: not a cepkit run directory: it has neither engine/run.json (cepkit pairs) nor "
                      f"summary.json (cepkit micro) nor repeat.json (cepkit pairs --repeat)")


def _config(run: Path) -> dict:
    path = run / "config.toml"
    return read_config_document(path, missing="not found: every run directory holds its resolved config")


def read_run(path: str | Path) -> RunResult:
    """The figures of the run directory at `path` (module docstring)."""
    run = Path(path)
    kind = run_kind(run)
    if kind == "repeat":        # several runs, maybe of several engines: not one RunResult
        raise CepkitError(f"{run}: a repetition directory (repeat.json): read it with read_repeat")
    config = _config(run)
    engine = _get(config, "run.engine", run / "config.toml", "text", required=True)
    return _read_pairs(run, engine, config) if kind == "pairs" else _read_micro(run, engine)


# -- shared parts ------------------------------------------------------------------------------

def engine_record(path: Path) -> dict:
    """The harness's run.json, checked for what the comparison reads."""
    doc = read_document(path, ENGINE_RUN_KIND, 1, missing="not found: the harness writes it at the end of every engine run",
                        what="an engine run record", cap="run")
    _get(doc, "status", path, "text", required=True)
    for key in ("resources.peak_rss_bytes", "resources.mean_cpu_percent", "timings.duration_s",
                "timings.run_start_wall_ms", "events.released", "events.total"):
        _get(doc, key, path)
    outputs = doc.get("outputs") or {}
    if not isinstance(outputs, dict):
        raise at(path, "outputs", f"expected an object of rows per stream, got {outputs!r}")
    for name in outputs:
        _get(outputs, name, path, "int", prefix="outputs.")
    return doc


def _engine_cells(unit: UnitResult, rec: dict | None, path: Path) -> None:
    """The plan and what bounded the run (beside the verdict, "not recorded" where run.json has
    neither), then mean CPU, peak RSS, duration, events and outputs of run.json."""
    if rec is None:
        return
    from validator.report_page import run_record_facts

    plan, bound = run_record_facts(rec)
    unit.add("plan", "plan", Cell(plan or "not recorded", plan))
    unit.add("bound", "what bounded the run", Cell(bound or "not recorded", bound))
    head = [k for k in ("verdict", "status", "plan", "bound") if k in unit.cells]
    unit.cells = {k: unit.cells[k] for k in [*head, *(k for k in unit.cells if k not in head)]}
    cpu = _get(rec, "resources.mean_cpu_percent", path)
    rss = _get(rec, "resources.peak_rss_bytes", path)
    duration = _get(rec, "timings.duration_s", path)
    released, total = _get(rec, "events.released", path), _get(rec, "events.total", path)
    unit.add("mean_cpu_percent", "mean CPU (% of one core)", Cell(_num(cpu, 1, " %"), cpu))
    mib = None if rss is None else rss / 2**20
    unit.add("peak_rss_mib", "peak RSS (MiB)", Cell(_num(mib, 0, " MiB"), None if mib is None else round(mib, 1)))
    unit.add("duration_s", "duration (s, start-up included)", Cell(_num(duration, 1, " s"), duration))
    events = released if released is not None else total
    text = _num(events) + (f" of {total:,}" if released is not None and total is not None and total != released else "")
    unit.add("events", "events released", Cell(text, events))
    outputs = sum((rec.get("outputs") or {}).values())
    unit.add("outputs", "output rows", Cell(_num(outputs), outputs))


def _num(v, digits: int = 0, unit: str = "") -> str:
    if v is None:
        return "–"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}{unit}"
    return f"{float(v):,.{digits}f}{unit}"


def percentile_cell(p: Percentile, noun: str) -> Cell:
    """A percentile in the words of validator.order_stats, with its count and interval."""
    return Cell(percentile_text(p, noun), p.value, p.n, p.low, p.high)


def _latency_cells(unit: UnitResult, stream: str, stats: LatencyStats, noun: str, where: str) -> None:
    for name in ("p50", "p99"):
        unit.add(f"{name}_ms[{stream}]", f"{stream} latency {name} ({where})",
                 percentile_cell(stats.percentile(name), noun))


def _read_log(engine_dir: Path, notes: list[str]) -> OutputLog | None:
    if not (engine_dir / "outputs").exists():
        return None
    try:
        return read_output_log(engine_dir / "outputs")
    except CepkitError as e:
        notes.append(f"no latency chart for {engine_dir}: {e}")
        return None


def _log_latencies(log: OutputLog) -> dict[str, np.ndarray]:
    """Event-time latencies (ms) per stream of the log, every row that has an inputTS."""
    return {name: event_time_latency_ms(df) for name, df in log.streams.items() if INPUT_TS in df.columns}


def _series(engine_dir: Path, rec: dict | None, log: OutputLog | None, notes: list[str]) -> Series:
    start = log.clocks.run_start_wall_ms if log is not None else (
        _get(rec, "timings.run_start_wall_ms", engine_dir / "run.json") if rec is not None else None)
    latency = rate = resources = None
    if log is not None:
        rows = [df[[ARRIVAL_TS, INPUT_TS]] for df in log.streams.values() if INPUT_TS in df.columns and len(df)]
        if rows:
            per_s = per_second_series(pd.concat(rows, ignore_index=True), log.clocks)
            latency = per_s[per_s["outputs"] > 0][["second", "p50_ms", "p99_ms"]].reset_index(drop=True)
    try:
        rate = _rates(engine_dir / "metrics" / "backlog.csv", start)
    except CepkitError as e:
        notes.append(f"no rate chart for {engine_dir}: {e}")
    try:
        df = read_resources(engine_dir)
        if df is not None:
            origin = start if start is not None else float(df["ts_ms"].iloc[0]) if len(df) else 0.0
            resources = pd.DataFrame({"second": (df["ts_ms"].to_numpy(np.float64) - origin) / 1000.0,
                                      "cpu_percent": df["cpu_percent"].to_numpy(np.float64),
                                      "rss_mib": df["rss_bytes"].to_numpy(np.float64) / 2**20})
    except CepkitError as e:
        notes.append(f"no CPU and memory chart for {engine_dir}: {e}")
    return Series(latency, rate, resources)


def _backlog(path: Path) -> pd.DataFrame:
    """backlog.csv's samples (cumulative released and pulled counts), in time order."""
    require_regular(path, what="a CSV file")
    table = read_data_table(path, "csv")
    for col in BACKLOG_COLUMNS:
        kind = table.column(col).type if col in table.column_names else None
        if kind is None or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            raise at(path, 1, f"missing or non-numeric column {col!r} (has {', '.join(table.column_names)})")
    return table.to_pandas().sort_values("ts_ms", kind="stable")


def _rates(path: Path, start: float | None) -> pd.DataFrame | None:
    """Released and pulled events per second between successive backlog.csv samples (the
    harness's monitor writes cumulative counts, about once a second)."""
    if not path.exists():
        return None
    df = _backlog(path)
    ts = df["ts_ms"].to_numpy(np.float64)
    dt = np.diff(ts) / 1000.0
    keep = dt > 0
    origin = start if start is not None else (ts[0] if len(ts) else 0.0)
    return pd.DataFrame({"second": ((ts[1:] - origin) / 1000.0)[keep],
                         "released_eps": (np.diff(df["released"].to_numpy(np.float64)) / np.where(keep, dt, 1))[keep],
                         "pulled_eps": (np.diff(df["pulled"].to_numpy(np.float64)) / np.where(keep, dt, 1))[keep]})


# -- Pairs -------------------------------------------------------------------------------------

def _pairs_summary(path: Path) -> tuple[str, dict[str, LatencyStats], Pscore | None]:
    doc = read_document(path, PAIRS_SUMMARY_KIND, 1, what="a validation summary")
    verdict = _get(doc, "verdict", path, "text", required=True)
    if verdict not in VERDICTS:
        raise at(path, "verdict", f"expected one of {', '.join(VERDICTS)}, got {verdict!r}")
    latency = {}
    for stream in _get(doc, "latency", path, "object") or {}:
        key = f"latency.{stream}.event"
        stats = _get(doc, key, path, "object", required=True)
        try:
            latency[stream] = LatencyStats(**stats)
        except (TypeError, CepkitError) as e:
            raise at(path, key, str(e)) from None
    pscore = None
    if _get(doc, "pscore", path, "object") is not None:
        try:
            pscore = Pscore(**doc["pscore"])
        except (TypeError, CepkitError) as e:
            raise at(path, "pscore", str(e)) from None
    return verdict, latency, pscore


def _read_pairs(run: Path, engine: str, config: dict) -> RunResult:
    notes: list[str] = []
    edir = run / "engine"
    rec = engine_record(edir / "run.json")
    status = rec["status"]
    summary = run / "report" / "summary.json"
    log = _read_log(edir, notes)
    if summary.exists():
        verdict, latency, pscore = _pairs_summary(summary)
        where = "measurement interval"
    else:
        # A run that did not complete is not validated (cepkit_app/pipelines/pairs.py): its
        # latencies are still facts, over every output it delivered.
        verdict, pscore, where = "NOT VALIDATED", None, "whole run"
        latency = {s: latency_stats(a) for s, a in _log_latencies(log).items()} if log is not None else {}
        notes.append(f"{run}: no report/summary.json (engine run {status}), so not validated; its latencies "
                     f"cover every output of the log")
    unit = UnitResult("Pairs")
    unit.add("verdict", "verdict", Cell(verdict, verdict))
    unit.add("status", "run status", Cell(status, status))
    sf = _get(config, "pairs.scale_factor", run / "config.toml", "int")
    sf = pscore.scale_factor if pscore is not None else sf
    unit.add("scale_factor", "scale factor", Cell(_num(sf), sf))
    # The pscore's stream first: its p99 is the one the benchmark scores.
    for stream in sorted(latency, key=lambda s: s != "MarketOrder"):
        _latency_cells(unit, stream, latency[stream], "orders" if stream == "MarketOrder" else "outputs", where)
    if pscore is not None:
        unit.add("pscore", "pscore", Cell(pscore.text().removeprefix("pscore: "), pscore.pscore, pscore.mi_rows,
                                          pscore.pscore_ci_low, pscore.pscore_ci_high))
    else:
        unit.add("pscore", "pscore", Cell("–"))
    _engine_cells(unit, rec, edir / "run.json")
    unit.series = _series(edir, rec, log, notes)
    return RunResult(run, engine, "pairs", "pairs", (unit,), tuple(notes))


# -- micro -------------------------------------------------------------------------------------

def _stream_counts(run: Path, notes: list[str]) -> dict[str, int]:
    """Input streams per workload, from the suite as run (sustainable rates are per stream)."""
    try:
        return {w.name: w.dataset.streams for w in read_suite(run / "suite.xml").workloads}
    except (CepkitError, OSError) as e:
        notes.append(f"{run}: no all-streams throughput: {e}")
        return {}


def _best_step(steps: list[dict], sustainable_eps: float | None) -> dict | None:
    """The step whose figures stand for the search, as SearchResult.best_step picks it: the
    fastest step that kept up, at or below the confirmed rate."""
    ok = [s for s in steps if s.get("sustainable")]
    if sustainable_eps is not None:
        ok = [s for s in ok if s["rate_eps"] <= sustainable_eps]
    return max(ok, key=lambda s: s["rate_eps"]) if ok else None


def _micro_latency(unit: UnitResult, row: dict, log: OutputLog | None, path: Path, prefix: str,
                   notes: list[str]) -> None:
    """p50 and p99 over every output row of every query (what the validator computes). From the
    log when it can be read, which also gives the p50's interval; else the summary's."""
    count = _get(row, "latency_count", path, "int", prefix=prefix)
    p50, p99 = _get(row, "p50_ms", path, prefix=prefix), _get(row, "p99_ms", path, prefix=prefix)
    stats = None
    if log is not None:
        lat = _log_latencies(log)
        stats = latency_stats(np.concatenate(list(lat.values())) if lat else np.zeros(0, np.int64))
        if count is not None and stats.count != count:
            notes.append(f"{unit.name}: the output log holds {stats.count:,} latencies, the summary {count:,}; "
                         f"the summary's figures are shown")
            stats = None
    if stats is not None:
        _latency_cells(unit, "all queries", stats, "outputs", "every output")
        return
    if count is not None:
        try:
            p = Percentile("p99", count, p99, _get(row, "p99_ci_low_ms", path, prefix=prefix),
                           _get(row, "p99_ci_high_ms", path, prefix=prefix))
        except CepkitError as e:
            raise at(path, prefix + "p99_ms", str(e)) from None
        unit.add("p50_ms[all queries]", "all queries latency p50 (every output)",
                 Cell("–" if p50 is None else f"p50 = {p50:,} ms ({count:,} outputs)", p50, count))
        unit.add("p99_ms[all queries]", "all queries latency p99 (every output)", percentile_cell(p, "outputs"))
        return
    # Not validated and no log: the sink's own histogram, sample count unknown.
    for name, v in (("p50", p50), ("p99", p99)):
        unit.add(f"{name}_ms[all queries]", f"all queries latency {name} (every output)",
                 Cell("–" if v is None else f"{name} = {v:,} ms (the sink's; count unknown)", v))


def _read_micro(run: Path, engine: str) -> RunResult:
    path = run / "summary.json"
    doc = read_document(path, MICRO_SUMMARY_KIND, 1, what="a microbenchmark suite summary")
    mode = _get(doc, "mode", path, "text", required=True)
    if mode not in ("fixed-rate", "sustainable"):
        raise at(path, "mode", f"expected fixed-rate or sustainable, got {mode!r}")
    rows = doc.get("workloads")
    if not isinstance(rows, list):
        raise at(path, "workloads", f"expected a list, got {rows!r}")
    notes: list[str] = []
    streams = _stream_counts(run, notes) if mode == "sustainable" else {}
    units = []
    for i, row in enumerate(rows):
        prefix = f"workloads[{i}]."
        if not isinstance(row, dict):
            raise at(path, f"workloads[{i}]", f"expected an object, got {row!r}")
        name = _get(row, "workload", path, "text", required=True, prefix=prefix)
        unit = UnitResult(name)
        wdir = run / name
        if mode == "fixed-rate":
            edir = wdir / "engine"
            verdict = _get(row, "verdict", path, "text", required=True, prefix=prefix)
            status = _get(row, "status", path, "text", required=True, prefix=prefix)
            unit.add("verdict", "verdict", Cell(verdict, verdict))
            unit.add("status", "run status", Cell(status, status))
            eps = _get(row, "input_eps", path, prefix=prefix)
            unit.add("input_eps", "input rate (ev/s, mean)", Cell(_num(eps, 0, " ev/s"), eps))
        else:
            edir = _sustainable(unit, row, wdir, streams.get(name), path, prefix)
        # A workload that never ran (not translated, or no step kept up) has no engine directory.
        rec = engine_record(edir / "run.json") if edir is not None and edir.exists() else None
        log = _read_log(edir, notes) if rec is not None else None
        _micro_latency(unit, row, log, path, prefix, notes)
        _engine_cells(unit, rec, None if edir is None else edir / "run.json")
        if mode == "sustainable" and isinstance(row.get("bound"), str) and row["bound"] != "-":
            # A search is bounded where its first step failed, not where its best step kept up.
            why = row.get("bound_why")
            text = row["bound"] + (f": {why}" if isinstance(why, str) and why else "")
            unit.add("bound", "what bounded the search (its first failing step)", Cell(text, row["bound"]))
        if rec is not None:
            unit.series = _series(edir, rec, log, notes)
        units.append(unit)
    return RunResult(run, engine, "micro", mode, tuple(units), tuple(notes))


def read_search(row: dict, wdir: Path, path: Path, prefix: str) -> tuple[Path, list[dict]]:
    """The directory and steps of the search a micro summary's row (`path`, key `prefix`) stands
    for: `wdir`/search.json, or a repeated search's representative's."""
    # A repeated search (--repeat K) keeps each search in <workload>/run-i/; the row's own figures
    # are those of the search `repeat.search_dir` names.
    repeat = _get(row, "repeat", path, "object", prefix=prefix)
    sdir = wdir
    if repeat is not None:
        where = _get(repeat, "search_dir", path, "text", required=True, prefix=prefix + "repeat.")
        if not where or Path(where).is_absolute() or ".." in Path(where).parts:
            raise at(path, prefix + "repeat.search_dir", f"expected a directory inside {wdir}, got {where!r}")
        sdir = wdir / where
    search_path = sdir / "search.json"
    search = read_document(search_path, SEARCH_KIND, 1, missing="not found: a sustainable search writes it when it ends",
                           what="a sustainable-throughput search")
    steps = search.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise at(search_path, "steps", "expected a list of step objects")
    for j, s in enumerate(steps):
        _get(s, "rate_eps", search_path, required=True, prefix=f"steps[{j}].")
        _get(s, "run_dir", search_path, "text", required=True, prefix=f"steps[{j}].")
    return sdir, steps


def lowest_failing_eps(steps: list[dict]) -> float | None:
    """The lowest rate a search found unsustainable (None: every step kept up, so the limit lies
    above the found rate), as SearchResult.lowest_failing_eps."""
    failed = [float(s["rate_eps"]) for s in steps if not s.get("sustainable")]
    return min(failed) if failed else None


def _sustainable(unit: UnitResult, row: dict, wdir: Path, streams: int | None, path: Path, prefix: str
                 ) -> Path | None:
    """The search's cells (verdict, rate per stream and over all streams) and its best step's
    engine directory (None: no step kept up)."""
    eps = _get(row, "sustainable_eps", path, prefix=prefix)
    confirmed = bool(row.get("confirmed"))
    repeat = _get(row, "repeat", path, "object", prefix=prefix)
    sdir, steps = read_search(row, wdir, path, prefix)
    best = _best_step(steps, eps)
    # As the suite report: a confirmed search passed, an unconfirmed one is no result.
    verdict = "PASSED" if confirmed else "NOT CONFIRMED"
    unit.add("verdict", "verdict", Cell(verdict, verdict))
    status = "completed" if best else "unsustainable"
    unit.add("status", "run status", Cell(status, status))
    unit.add("sustainable_eps", "sustainable throughput (ev/s per stream)",
             Cell(_num(eps, 0, " ev/s") + ("" if confirmed or eps is None else " (not confirmed)"), eps))
    total = None if eps is None or streams is None else eps * streams
    unit.add("sustainable_total_eps", "sustainable throughput (ev/s, all streams)",
             Cell(_num(total, 0, " ev/s"), total))
    unit.add("search_steps", "search steps (best step's rate)",
             Cell(f"{len(steps)}" + ("" if best is None else f" (best {best['rate_eps']:,.0f} ev/s)"), len(steps)))
    if repeat is not None:
        _search_spread(unit, repeat, path, prefix + "repeat.")
    # The step's directory by name, next to search.json: the recorded path may be relative to
    # wherever the suite ran, or the run directory may have moved since.
    return None if best is None else sdir / Path(best["run_dir"]).name / "engine"


SEARCH_NOUN = ("search", "searches")


def _search_spread(unit: UnitResult, repeat: dict, path: Path, prefix: str) -> None:
    """The repeated searches' found rates: median and range over the confirmed ones."""
    found = repeat.get("searches")
    if not isinstance(found, list) or not found or not all(isinstance(x, dict) for x in found):
        raise at(path, prefix + "searches", f"expected a list of search objects, got {found!r}")
    rates = []
    for j, x in enumerate(found):
        eps = _get(x, "sustainable_eps", path, prefix=f"{prefix}searches[{j}].")
        if x.get("confirmed") is True and eps is not None:
            rates.append(eps)
    sp = spread(rates, len(found))
    unit.add("sustainable_eps_spread", "sustainable throughput over repeated searches (ev/s per stream)",
             Cell(sp.text(unit="ev/s", noun=SEARCH_NOUN, counted="confirmed"), sp.median, sp.n, spread=sp.to_dict()))


# -- repetitions -------------------------------------------------------------------------------

RUN_NOUN = ("run", "runs")


@dataclass(frozen=True)
class Spread:
    """One figure over repeated runs (specs/VALIDATION.md, "Repetitions"): the median and the range
    [low, high] (the minimum and maximum) of the `n` values that count, out of `of` runs made.
    Median and range are None when no run counts (n = 0). The median of an even n is the mean of
    the two middle values."""

    n: int
    of: int
    median: float | None
    low: float | None
    high: float | None

    def __post_init__(self) -> None:
        for name in ("n", "of"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise CepkitError(f"spread: {name} must be an integer >= 0, got {v!r}")
        if self.n > self.of:
            raise CepkitError(f"spread: {self.n} values counted of only {self.of} runs")
        given = (self.median, self.low, self.high)
        if self.n == 0 and any(v is not None for v in given):
            raise CepkitError("spread: a median or range without any value behind it")
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in given)
        if self.n > 0 and (not numbers or not self.low <= self.median <= self.high):
            raise CepkitError(f"spread: need numbers min <= median <= max, got {self.low!r}, {self.median!r}, "
                              f"{self.high!r}")

    def basis(self, noun: tuple[str, str] = RUN_NOUN) -> str:
        """'median of 3 runs', or 'median of 2 of 3 runs' when some did not count."""
        one, many = noun
        if self.n == self.of:
            return f"median of {self.n} {one if self.n == 1 else many}"
        return f"median of {self.n} of {self.of} {one if self.of == 1 else many}"

    def text(self, fmt=lambda v: f"{v:,.0f}", unit: str = "", noun: tuple[str, str] = RUN_NOUN,
             counted: str = "completed, PASSED") -> str:
        """'612 ms [580–700 ms] (median of 3 runs)'; '– (no completed, PASSED run of 3)'."""
        u = f" {unit}" if unit else ""
        if self.n == 0:
            return f"– (no {counted} {noun[0]} of {self.of})"
        return f"{fmt(self.median)}{u} [{fmt(self.low)}–{fmt(self.high)}{u}] ({self.basis(noun)})"

    def to_dict(self) -> dict:
        return {"median": self.median, "min": self.low, "max": self.high, "n": self.n, "of": self.of}

    @classmethod
    def from_dict(cls, d: dict) -> "Spread":
        """The Spread of `to_dict`'s document (a CepkitError for anything else)."""
        try:
            return cls(d["n"], d["of"], d["median"], d["min"], d["max"])
        except (KeyError, TypeError) as e:
            raise CepkitError(f"spread: expected median, min, max, n and of, got {d!r}") from None


def spread(values, of: int | None = None) -> Spread:
    """The Spread of `values` (finite numbers: the figures of the runs that count; `of` the runs
    made, default len(values))."""
    vals = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
            raise CepkitError(f"spread: expected finite numbers, got {v!r}")
        vals.append(v.item() if isinstance(v, (np.integer, np.floating)) else v)
    vals.sort()
    n = len(vals)
    of = n if of is None else of
    if n == 0:
        return Spread(0, of, None, None, None)
    mid = n // 2
    median = vals[mid] if n % 2 else (vals[mid - 1] + vals[mid]) / 2
    return Spread(n, of, median, vals[0], vals[-1])


def taken_eps(engine_dir: Path, rec: dict) -> float | None:
    """Mean input events per second the engine took: the events pulled by the first backlog.csv
    sample that shows the most of them pulled, over the seconds from the run start to that
    sample. Without samples after the start: run.json's events pulled over the driver's release
    interval. None when the run records neither."""
    path = Path(engine_dir) / "run.json"
    start = _get(rec, "timings.run_start_wall_ms", path)
    if start is None:
        return None
    backlog = Path(engine_dir) / "metrics" / "backlog.csv"
    if backlog.exists():
        df = _backlog(backlog)
        df = df[df["ts_ms"] > start]
        if len(df):
            pulled = df["pulled"].to_numpy(np.float64)
            i = int(np.argmax(pulled))          # the first sample at the highest count
            seconds = (float(df["ts_ms"].iloc[i]) - start) / 1000.0
            return float(pulled[i]) / seconds if pulled[i] > 0 else None
    pulled, end = _get(rec, "events.pulled", path), _get(rec, "timings.driver_finished_ms", path)
    if pulled is None or end is None or end <= start:
        return None
    return pulled / ((end - start) / 1000.0)


@dataclass(frozen=True)
class RunFigures:
    """The figures of one Pairs run that a repetition gathers: its verdict and status, the
    MarketOrder p99 of the measurement interval (the pscore's, with its order count and 95 %
    interval), pscore, throughput (`taken_eps`), mean CPU and peak RSS. A run *counts* towards
    the medians when its engine run completed and its validation PASSED."""

    run_dir: Path
    engine: str
    verdict: str
    status: str
    scale_factor: int | None = None
    p99: Percentile | None = None
    pscore: float | None = None
    pscore_ci_low: float | None = None
    pscore_ci_high: float | None = None
    throughput_eps: float | None = None
    mean_cpu_percent: float | None = None
    peak_rss_mib: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def counted(self) -> bool:
        return self.status == "completed" and self.verdict == "PASSED"

    def figure(self, key: str) -> float | None:
        """A figure by the key of SPREAD_FIGURES."""
        if key == "p99_ms":
            return None if self.p99 is None else self.p99.value
        return getattr(self, key)

    def to_dict(self, base: Path | None = None) -> dict:
        p = self.p99
        where = os.path.relpath(self.run_dir, base) if base is not None else str(self.run_dir)
        return {"run_dir": where, "engine": self.engine, "verdict": self.verdict, "status": self.status,
                "counted": self.counted, "scale_factor": self.scale_factor,
                "p99_ms": None if p is None else p.value, "orders": None if p is None else p.n,
                "p99_ci_low_ms": None if p is None else p.low, "p99_ci_high_ms": None if p is None else p.high,
                "p99_text": None if p is None else percentile_text(p, "orders"),
                "pscore": self.pscore, "pscore_ci_low": self.pscore_ci_low, "pscore_ci_high": self.pscore_ci_high,
                "throughput_eps": self.throughput_eps, "mean_cpu_percent": self.mean_cpu_percent,
                "peak_rss_mib": self.peak_rss_mib}


def pairs_figures(path: str | Path) -> RunFigures:
    """The RunFigures of the Pairs run directory at `path`: from config.toml, engine/run.json,
    report/summary.json (absent: NOT VALIDATED, no p99 or pscore) and engine/metrics/backlog.csv.
    Reads no output log. A backlog.csv that cannot be read costs only the throughput (a note)."""
    run = Path(path)
    if run_kind(run) != "pairs":
        raise CepkitError(f"{run}: not a Pairs run directory (no engine/ nor report/)")
    config = _config(run)
    engine = _get(config, "run.engine", run / "config.toml", "text", required=True)
    edir = run / "engine"
    rec = engine_record(edir / "run.json")
    verdict, p99, ps = "NOT VALIDATED", None, None
    summary = run / "report" / "summary.json"
    if summary.exists():
        verdict, latency, ps = _pairs_summary(summary)
        orders = latency.get("MarketOrder")
        p99 = ps.p99 if ps is not None else (orders.percentile("p99") if orders is not None and orders.count else None)
    notes: list[str] = []
    try:
        eps = taken_eps(edir, rec)
    except CepkitError as e:
        eps = None
        notes.append(f"no throughput for {run}: {e}")
    rss = _get(rec, "resources.peak_rss_bytes", edir / "run.json")
    return RunFigures(
        run, engine, verdict, rec["status"],
        ps.scale_factor if ps is not None else _get(config, "pairs.scale_factor", run / "config.toml", "int"),
        p99, None if ps is None else ps.pscore, None if ps is None else ps.pscore_ci_low,
        None if ps is None else ps.pscore_ci_high, None if eps is None else round(eps, 1),
        _get(rec, "resources.mean_cpu_percent", edir / "run.json"), None if rss is None else round(rss / 2**20, 1),
        tuple(notes))


# (key, row label, number format, unit) of the figures a repetition sums up, in table order.
SPREAD_FIGURES = (
    ("p99_ms", "MarketOrder p99 (median [min–max] over runs)", lambda v: f"{v:,.0f}", "ms"),
    ("pscore", "pscore (median [min–max] over runs)", lambda v: f"{v:,.2f}", ""),
    ("throughput_eps", "throughput (input ev/s the engine took; median [min–max])", lambda v: f"{v:,.0f}", "ev/s"),
    ("mean_cpu_percent", "mean CPU (% of one core; median [min–max])", lambda v: f"{v:,.1f}", "%"),
    ("peak_rss_mib", "peak RSS (MiB; median [min–max])", lambda v: f"{v:,.0f}", "MiB"),
)


def spreads(figures) -> dict[str, Spread]:
    """Per figure of SPREAD_FIGURES: its Spread over the runs that count (completed and PASSED)."""
    counted = [f for f in figures if f.counted]
    return {key: spread([v for f in counted if (v := f.figure(key)) is not None], len(figures))
            for key, *_ in SPREAD_FIGURES}


def run_outcome(f: RunFigures) -> str:
    """'PASSED', or what kept the run from counting: 'FAILED', 'NOT VALIDATED (unsustainable)'."""
    return f.verdict if f.status == "completed" else f"{f.verdict} ({f.status})"


@dataclass(frozen=True)
class RepeatRecord:
    """A repeat.json: the benchmark, runs asked per engine (`repeat`), the engines, and the run
    directories made, (engine, path) in the order they ran."""

    path: Path
    benchmark: str
    repeat: int
    engines: tuple[str, ...]
    runs: tuple[tuple[str, Path], ...]

    def groups(self) -> list[tuple[str, list[Path]]]:
        """(engine, its run directories) per engine, in the order of `engines`."""
        return [(e, [p for engine, p in self.runs if engine == e]) for e in self.engines]


def read_repeat(path: str | Path) -> RepeatRecord:
    """The repeat.json of the repetition directory `path` (or the file itself), checked: kind,
    schema version, `repeat`, `engines` and `runs` (each an engine and a run directory inside the
    repetition directory)."""
    p = Path(path)
    doc_path = p / REPEAT_DOC if p.is_dir() else p
    base = doc_path.parent
    doc = read_document(doc_path, REPEAT_KIND, REPEAT_SCHEMA_VERSION, missing="not found: `cepkit pairs --repeat` writes it",
                        what="a repetition summary")
    benchmark = _get(doc, "benchmark", doc_path, "text", required=True)
    if benchmark != "pairs":
        raise at(doc_path, "benchmark", f"expected 'pairs', got {benchmark!r}")
    repeat = _get(doc, "repeat", doc_path, "int", required=True)
    if repeat < 1:
        raise at(doc_path, "repeat", f"expected an integer >= 1, got {repeat}")
    rows = doc.get("runs")
    if not isinstance(rows, list):
        raise at(doc_path, "runs", f"expected a list, got {rows!r}")
    runs = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise at(doc_path, f"runs[{i}]", f"expected an object, got {row!r}")
        engine = _get(row, "engine", doc_path, "text", required=True, prefix=f"runs[{i}].")
        where = _get(row, "run_dir", doc_path, "text", required=True, prefix=f"runs[{i}].")
        rel = Path(where)
        # Inside the repetition directory: the record names its own runs, never another place.
        if not where or rel.is_absolute() or ".." in rel.parts:
            raise at(doc_path, f"runs[{i}].run_dir", f"expected a path inside {base}, got {where!r}")
        runs.append((engine, base / rel))
    engines = doc.get("engines")
    if not isinstance(engines, list) or not all(isinstance(e, str) and e for e in engines):
        raise at(doc_path, "engines", f"expected a list of engine names, got {engines!r}")
    if stray := sorted({e for e, _ in runs} - set(engines)):
        raise at(doc_path, "runs", f"runs of {', '.join(stray)}, which engines does not name")
    return RepeatRecord(base, benchmark, repeat, tuple(dict.fromkeys(engines)), tuple(runs))


def spread_result(path: Path, engine: str, figures, notes: tuple[str, ...] = ()) -> RunResult:
    """One engine's repeated Pairs runs (`figures`, RunFigures in run order) as one column: the
    runs that count, the verdict (PASSED only when every run did), the scale factor, then the
    median and range of each figure (SPREAD_FIGURES) and the p99 of each run."""
    figures = list(figures)
    unit = UnitResult("Pairs")
    counted = [f for f in figures if f.counted]
    left_out = [f"{f.run_dir.name}: {run_outcome(f)}" for f in figures if not f.counted]
    text = f"{len(counted)} of {len(figures)}" + (f" (not counted: {'; '.join(left_out)})" if left_out else "")
    unit.add("runs", "runs that count (completed and PASSED, of those made)", Cell(text, len(counted), len(figures)))
    verdict = "PASSED" if figures and len(counted) == len(figures) else "FAILED"
    unit.add("verdict", "verdict (every run)", Cell(verdict, verdict))
    sfs = sorted({f.scale_factor for f in figures if f.scale_factor is not None})
    unit.add("scale_factor", "scale factor", Cell(", ".join(f"{sf:,}" for sf in sfs) or "–",
                                                  sfs[0] if len(sfs) == 1 else None))
    s = spreads(figures)
    for key, label, fmt, unit_text in SPREAD_FIGURES:
        sp = s[key]
        unit.add(key, label, Cell(sp.text(fmt, unit_text), sp.median, sp.n, spread=sp.to_dict()))
        if key == "p99_ms":
            each = [f"{f.run_dir.name}: " + ("–" if f.p99 is None else
                                             f"{f.p99.n:,} orders: {percentile_text(f.p99, short=True)}")
                    + ("" if f.counted else f" ({run_outcome(f)})") for f in figures]
            unit.add("p99_runs", "MarketOrder p99 of each run (orders; 95 % CI)", Cell("; ".join(each)))
    return RunResult(Path(path), engine, "pairs", "repeat", (unit,), tuple(notes) + tuple(n for f in figures
                                                                                           for n in f.notes))


def repeat_results(path: str | Path) -> list[RunResult]:
    """The repetition directory at `path` as one spread column per engine (spread_result)."""
    record = read_repeat(path)
    out = []
    for engine, dirs in record.groups():
        figures = [pairs_figures(d) for d in dirs]
        for f in figures:
            if f.engine != engine:
                raise CepkitError(f"{f.run_dir}: a run of {f.engine}, but {record.path / REPEAT_DOC} lists it "
                                  f"under {engine}")
        notes = () if len(dirs) >= record.repeat else (
            f"{record.path}: {len(dirs)} of the {record.repeat} {engine} runs asked were made",)
        out.append(spread_result(record.path, engine, figures, notes))
    return out


def grouped_results(paths) -> list[RunResult]:
    """Pairs run directories given together, one spread column per engine (first-seen order); the
    column's path is its first run's."""
    groups: dict[str, list[RunFigures]] = {}
    for p in paths:
        f = pairs_figures(p)
        groups.setdefault(f.engine, []).append(f)
    return [spread_result(figs[0].run_dir, engine, figs) for engine, figs in groups.items()]
