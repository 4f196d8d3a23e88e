"""Reading finished run directories for `cepkit compare`: the figures of one engine's run, by unit.

A run directory is recognised by what the pipelines write (cepkit_app/pipelines/pairs.py, micro.py):

- Pairs: `config.toml`, `engine/run.json` (the harness's record), `engine/metrics/resources.csv`
  and `backlog.csv`, `engine/outputs/` (the output log) and `report/summary.json` (the validation;
  absent when the engine run did not complete, since a stopped run is not validated);
- micro: `config.toml`, `suite.xml`, `summary.json` (kind cepkit.micro-summary, mode fixed-rate or
  sustainable) and per workload `<workload>/engine/` (fixed rate), or `<workload>/search.json` and
  its step directories (sustainable: the figures are the best step's, as in the suite report).

`read_run(path)` gives a `RunResult`: the engine (config.toml's `run.engine`), the kind and mode,
and per unit (the Pairs run; each micro workload) a `UnitResult`, its table cells in a fixed order
and its time series on the run's own clock (wall seconds since the run start). Nothing is written.

A record that is missing or malformed (run.json, a summary, search.json, config.toml) is one
CepkitError line naming the file and the key. An output log or a metrics file that cannot be read
costs only its chart and its recomputed intervals, and a note says so: a stopped run keeps what
it has.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from kit.errors import CepkitError, at
from kit.inputs import read_input_bytes, require_regular
from kit.jsonfile import read_json_object
from kit.outputlog import ARRIVAL_TS
from kit.workload import INPUT_TS, read_suite
from validator.latency import LatencyStats, Pscore, event_time_latency_ms, latency_stats, per_second_series
from validator.order_stats import Percentile, percentile_text
from validator.outputlog import OutputLog, read_output_log, read_resources

ENGINE_RUN_KIND = "cepkit.engine-run"
PAIRS_SUMMARY_KIND = "cepkit.validation-summary"
MICRO_SUMMARY_KIND = "cepkit.micro-summary"
SEARCH_KIND = "cepkit.sustainable-search"
MODES = ("pairs", "fixed-rate", "sustainable")
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

    def to_dict(self) -> dict:
        return {"text": self.text, "value": self.value, "count": self.count, "ci_low": self.ci_low,
                "ci_high": self.ci_high}


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
    mode: str                       # "pairs", "fixed-rate" or "sustainable"
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
    """"pairs" or "micro" by the files the pipelines write; a CepkitError for anything else."""
    p = Path(path)
    if not p.is_dir():
        raise CepkitError(f"{p}: not a run directory ({'not found' if not p.exists() else 'not a directory'})")
    if (p / "summary.json").exists():
        return "micro"
    if (p / "engine").exists() or (p / "report").exists():
        return "pairs"
    raise CepkitError(f"{p}: not a cepkit run directory: it has neither engine/run.json (cepkit pairs) nor "
                      f"summary.json (cepkit micro)")


def _config(run: Path) -> dict:
    path = run / "config.toml"
    raw = read_input_bytes(path, "config", what="a config file",
                           missing="not found: every run directory holds its resolved config")
    try:
        return tomllib.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise at(path, None, f"cannot read: {e}") from None


def read_run(path: str | Path) -> RunResult:
    """The figures of the run directory at `path` (module docstring)."""
    run = Path(path)
    kind = run_kind(run)
    config = _config(run)
    engine = _get(config, "run.engine", run / "config.toml", "text", required=True)
    return _read_pairs(run, engine, config) if kind == "pairs" else _read_micro(run, engine)


# -- shared parts ------------------------------------------------------------------------------

def engine_record(path: Path) -> dict:
    """The harness's run.json, checked for what the comparison reads."""
    doc = read_json_object(path, missing="not found: the harness writes it at the end of every engine run",
                           what="an engine run record", kind="run")
    if doc.get("kind") != ENGINE_RUN_KIND:
        raise at(path, "kind", f"expected {ENGINE_RUN_KIND!r}, got {doc.get('kind')!r}")
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
    """Mean CPU, peak RSS, duration, events and outputs of run.json."""
    if rec is None:
        return
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


def _rates(path: Path, start: float | None) -> pd.DataFrame | None:
    """Released and pulled events per second between successive backlog.csv samples (the
    harness's monitor writes cumulative counts, about once a second)."""
    if not path.exists():
        return None
    require_regular(path, what="a CSV file")
    try:
        table = pacsv.read_csv(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise CepkitError(f"{path}: cannot read: {str(e).splitlines()[0] if str(e) else e}") from None
    for col in BACKLOG_COLUMNS:
        kind = table.column(col).type if col in table.column_names else None
        if kind is None or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            raise at(path, 1, f"missing or non-numeric column {col!r} (has {', '.join(table.column_names)})")
    df = table.to_pandas().sort_values("ts_ms", kind="stable")
    ts = df["ts_ms"].to_numpy(np.float64)
    dt = np.diff(ts) / 1000.0
    keep = dt > 0
    origin = start if start is not None else (ts[0] if len(ts) else 0.0)
    return pd.DataFrame({"second": ((ts[1:] - origin) / 1000.0)[keep],
                         "released_eps": (np.diff(df["released"].to_numpy(np.float64)) / np.where(keep, dt, 1))[keep],
                         "pulled_eps": (np.diff(df["pulled"].to_numpy(np.float64)) / np.where(keep, dt, 1))[keep]})


# -- Pairs -------------------------------------------------------------------------------------

def _pairs_summary(path: Path) -> tuple[str, dict[str, LatencyStats], Pscore | None]:
    doc = read_json_object(path, missing="not found", what="a validation summary")
    if doc.get("kind") != PAIRS_SUMMARY_KIND:
        raise at(path, "kind", f"expected {PAIRS_SUMMARY_KIND!r}, got {doc.get('kind')!r}")
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
    doc = read_json_object(path, missing="not found", what="a microbenchmark suite summary")
    if doc.get("kind") != MICRO_SUMMARY_KIND:
        raise at(path, "kind", f"expected {MICRO_SUMMARY_KIND!r}, got {doc.get('kind')!r}")
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
        if rec is not None:
            unit.series = _series(edir, rec, log, notes)
        units.append(unit)
    return RunResult(run, engine, "micro", mode, tuple(units), tuple(notes))


def _sustainable(unit: UnitResult, row: dict, wdir: Path, streams: int | None, path: Path, prefix: str
                 ) -> Path | None:
    """The search's cells (verdict, rate per stream and over all streams) and its best step's
    engine directory (None: no step kept up)."""
    eps = _get(row, "sustainable_eps", path, prefix=prefix)
    confirmed = bool(row.get("confirmed"))
    search_path = wdir / "search.json"
    search = read_json_object(search_path, missing="not found: a sustainable search writes it when it ends",
                              what="a sustainable-throughput search")
    if search.get("kind") != SEARCH_KIND:
        raise at(search_path, "kind", f"expected {SEARCH_KIND!r}, got {search.get('kind')!r}")
    steps = search.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise at(search_path, "steps", "expected a list of step objects")
    for j, s in enumerate(steps):
        _get(s, "rate_eps", search_path, required=True, prefix=f"steps[{j}].")
        _get(s, "run_dir", search_path, "text", required=True, prefix=f"steps[{j}].")
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
    # The step's directory by name, next to search.json: the recorded path may be relative to
    # wherever the suite ran, or the run directory may have moved since.
    return None if best is None else wdir / Path(best["run_dir"]).name / "engine"
