"""Long-run health of a run: how fast each figure of `metrics/health.csv` grows per hour.

The harness samples, every 5 s of the run (harness/health.py), the resident memory of the harness
process (the sink), of the driver (the feed), of the engine's JVMs and of its Python processes,
the engine's state on disk, its checkpoint directory (bytes and files) and the output log's size.
`read_health(path)` reads that file strictly (one CepkitError line naming the file, line and
column for anything malformed; None when it does not exist), `health_growth(frame)` fits each
series, `read_health_report(path)` does both. The rules (specs/VALIDATION.md, "Long-run health"):

- **Warm-up**: the first `WARMUP_FRACTION` (25 %) of the sampled span (first to last sample, wall
  time) is left out: JVM heaps, allocator pools and the first checkpoints settle there.
- **Level**: the series' median after the warm-up.
- **Growth per hour**: the least-squares slope of the series against wall time over the samples
  after the warm-up, in units per hour (a straight line through the cloud: a series that only
  follows the load's ups and downs has a slope near 0; the standard rate profile after its warm-up
  tilts a series that follows the rate exactly by ~9 % of its swing per hour).
- **Flag**: "grows" when the growth per hour exceeds `RELATIVE_PER_H` (10 %) of the level *and*
  the series' absolute floor (64 MiB/h for memory, 1 MiB/h for sizes on disk, 100 files/h);
  "grows by design" for the output log (append-only) when it would be "grows"; "ok" otherwise;
  "too few samples" below `MIN_SAMPLES` values after the warm-up; "no data" for an empty column.
- A run sampled for less than `SHORT_RUN_S` (10 min) extrapolates minutes to an hour: its figures
  are marked weak wherever they are shown (`HealthReport.short`).

The validator imports only kit, so the columns are written here again (tests/validator/
test_health.py keeps them equal to harness/health.py's).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kit.errors import CepkitError, at
from kit.inputs import require_regular

HEALTH_COLUMNS = ("ts_ms", "harness_rss_bytes", "driver_rss_bytes", "jvm_rss_bytes", "python_rss_bytes",
                  "state_bytes", "checkpoint_bytes", "checkpoint_files", "output_bytes", "sample_ms")
HEALTH_CSV = "health.csv"
WARMUP_FRACTION = 0.25
RELATIVE_PER_H = 0.10
MIN_SAMPLES = 5
SHORT_RUN_S = 600.0
# A hostile file is refused past this many rows (at one row per 5 s: 58 days).
MAX_ROWS = 1_000_000
MIB = 2**20

OK, GROWS, BY_DESIGN, FEW, NO_DATA = "ok", "grows", "grows by design", "too few samples", "no data"
_INT = re.compile(r"[0-9]{1,19}")
_DECIMAL = re.compile(r"[0-9]{1,19}(\.[0-9]{1,9})?")


@dataclass(frozen=True)
class Series:
    """One column of health.csv as the report shows it."""

    column: str
    label: str
    unit: str                 # "bytes" or "files"
    floor_per_h: float        # the absolute part of the "grows" rule, in units per hour
    panel: str                # "memory" or "disk": where the figure draws it
    by_design: bool = False   # grows because it should (the output log)


SERIES = (
    Series("harness_rss_bytes", "harness process (sink, monitor) RSS", "bytes", 64 * MIB, "memory"),
    Series("driver_rss_bytes", "driver (feed) RSS", "bytes", 64 * MIB, "memory"),
    Series("jvm_rss_bytes", "engine JVMs RSS", "bytes", 64 * MIB, "memory"),
    Series("python_rss_bytes", "engine Python processes RSS", "bytes", 64 * MIB, "memory"),
    Series("state_bytes", "engine state on disk", "bytes", 1 * MIB, "disk"),
    Series("checkpoint_bytes", "checkpoint directory", "bytes", 1 * MIB, "disk"),
    Series("checkpoint_files", "checkpoint files", "files", 100, "files"),
    Series("output_bytes", "output log", "bytes", 1 * MIB, "disk", by_design=True),
)


@dataclass(frozen=True)
class SeriesGrowth:
    """One series after the warm-up: its level (median), growth per hour (least-squares slope)
    and flag; `fit_at_ms` and `fit_values` are the fitted line's ends, for the figure."""

    series: Series
    samples: int
    level: float | None
    growth_per_h: float | None
    flag: str
    fit_at_ms: tuple[int, int] | None = None
    fit_values: tuple[float, float] | None = None

    @property
    def growth_pct_per_h(self) -> float | None:
        if self.growth_per_h is None or not self.level:
            return None
        return 100.0 * self.growth_per_h / self.level

    def to_dict(self) -> dict:
        return {"column": self.series.column, "label": self.series.label, "unit": self.series.unit,
                "samples": self.samples, "level": self.level, "growth_per_h": self.growth_per_h,
                "growth_pct_per_h": self.growth_pct_per_h, "flag": self.flag,
                "floor_per_h": self.series.floor_per_h}


@dataclass(frozen=True)
class HealthReport:
    """The growth of every series of one run's health.csv (`health_growth`)."""

    path: Path | None
    frame: pd.DataFrame
    first_ms: int
    last_ms: int
    fit_from_ms: int
    series: tuple[SeriesGrowth, ...]

    @property
    def span_s(self) -> float:
        return (self.last_ms - self.first_ms) / 1000.0

    @property
    def fit_span_s(self) -> float:
        return (self.last_ms - self.fit_from_ms) / 1000.0

    @property
    def short(self) -> bool:
        """Sampled for less than SHORT_RUN_S: each per-hour figure extrapolates minutes."""
        return self.span_s < SHORT_RUN_S

    @property
    def interval_s(self) -> float | None:
        ts = self.frame["ts_ms"].to_numpy(np.float64)
        return float(np.median(np.diff(ts))) / 1000.0 if len(ts) > 1 else None

    @property
    def max_sample_ms(self) -> float | None:
        col = self.frame["sample_ms"].to_numpy(np.float64)
        return float(np.nanmax(col)) if np.isfinite(col).any() else None

    @property
    def growing(self) -> tuple[SeriesGrowth, ...]:
        return tuple(g for g in self.series if g.flag == GROWS)

    def short_note(self) -> str | None:
        if not self.short:
            return None
        return (f"The run was sampled for {self.span_s / 60:.1f} min (less than {SHORT_RUN_S / 60:.0f} min): each "
                f"growth per hour extrapolates {self.fit_span_s / 60:.1f} min of samples after the warm-up to an "
                "hour, a weak figure.")

    def to_dict(self) -> dict:
        return {"file": str(self.path) if self.path is not None else None, "samples": len(self.frame),
                "interval_s": self.interval_s, "first_ms": self.first_ms, "last_ms": self.last_ms,
                "span_s": self.span_s, "warmup_fraction": WARMUP_FRACTION, "fit_from_ms": self.fit_from_ms,
                "fit_span_s": self.fit_span_s, "short": self.short, "short_note": self.short_note(),
                "max_sample_ms": self.max_sample_ms, "relative_per_h": RELATIVE_PER_H,
                "series": [g.to_dict() for g in self.series]}


# -- reading -----------------------------------------------------------------------------------

def read_health(path: str | Path) -> pd.DataFrame | None:
    """health.csv as a DataFrame (`ts_ms` int64, every other column float64 with NaN where the
    harness left a cell empty), or None when the file does not exist. Strict: a missing column,
    a row of the wrong width, a value that is not a non-negative number, or time going backwards
    is one CepkitError line naming the file, line and column. Extra columns are ignored."""
    p = Path(path)
    if not p.exists():
        return None
    require_regular(p, what="a CSV file")
    try:
        with open(p, newline="", encoding="utf-8") as fh:
            return _parse(p, csv.reader(fh))
    except UnicodeDecodeError as e:
        raise at(p, None, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise at(p, None, f"not a CSV file: {e}") from None
    except OSError as e:
        raise at(p, None, f"cannot read: {e.strerror or e}") from None


def _parse(p: Path, reader) -> pd.DataFrame:
    header = next(reader, None)
    if not header:
        raise at(p, 1, f"no header (expected {','.join(HEALTH_COLUMNS)})")
    if len(set(header)) != len(header):
        raise at(p, 1, f"a column name repeats: {','.join(header)}")
    missing = [c for c in HEALTH_COLUMNS if c not in header]
    if missing:
        raise at(p, 1, f"missing column {missing[0]!r} (has {', '.join(header)})")
    index = [header.index(c) for c in HEALTH_COLUMNS]
    rows: list[list[float]] = []
    last_ts = None
    for line, fields in enumerate(reader, start=2):
        if len(rows) >= MAX_ROWS:
            raise at(p, line, f"more than {MAX_ROWS:,} rows: not a run's health samples")
        if len(fields) != len(header):
            raise at(p, line, f"{len(fields)} fields, the header has {len(header)}")
        row = []
        for col, i in zip(HEALTH_COLUMNS, index):
            text = fields[i]
            if text == "":
                if col == "ts_ms":
                    raise at(p, line, "column 'ts_ms': empty (every row has its time)")
                row.append(math.nan)
                continue
            pattern = _DECIMAL if col == "sample_ms" else _INT
            if not pattern.fullmatch(text):
                kind = "a number >= 0" if col == "sample_ms" else "an integer >= 0"
                raise at(p, line, f"column {col!r}: expected {kind} or empty, got {text[:40]!r}")
            row.append(float(text))
        if last_ts is not None and row[0] < last_ts:
            raise at(p, line, f"column 'ts_ms': {int(row[0])} is earlier than the row before ({int(last_ts)})")
        last_ts = row[0]
        rows.append(row)
    data = np.array(rows, dtype=np.float64).reshape(len(rows), len(HEALTH_COLUMNS))
    frame = pd.DataFrame(data, columns=list(HEALTH_COLUMNS))
    frame["ts_ms"] = frame["ts_ms"].astype(np.int64)
    return frame


# -- growth ------------------------------------------------------------------------------------

def slope_per_h(ts_ms: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """(slope per hour, fitted value at the first time) of the least-squares line through the
    points (both arrays of equal length >= 2, times not all equal)."""
    t = (np.asarray(ts_ms, dtype=np.float64) - float(ts_ms[0])) / 3.6e6
    y = np.asarray(values, dtype=np.float64)
    tc = t - t.mean()
    slope = float((tc * (y - y.mean())).sum() / (tc * tc).sum())
    return slope, float(y.mean() - slope * t.mean())


def flag_of(series: Series, level: float, growth_per_h: float) -> str:
    """The rule of the module doc: above 10 % of the level per hour and above the series' floor."""
    grows = growth_per_h > RELATIVE_PER_H * max(level, 0.0) and growth_per_h > series.floor_per_h
    if not grows:
        return OK
    return BY_DESIGN if series.by_design else GROWS


def health_growth(frame: pd.DataFrame, path: Path | None = None) -> HealthReport | None:
    """Each series' level, growth per hour and flag (module doc); None for a file without rows."""
    if frame is None or not len(frame):
        return None
    ts = frame["ts_ms"].to_numpy(np.int64)
    first, last = int(ts[0]), int(ts[-1])
    fit_from = first + int(math.ceil(WARMUP_FRACTION * (last - first)))
    after = ts >= fit_from
    out = []
    for s in SERIES:
        y = frame[s.column].to_numpy(np.float64)
        keep = after & np.isfinite(y)
        n = int(keep.sum())
        if not np.isfinite(y).any():
            out.append(SeriesGrowth(s, 0, None, None, NO_DATA))
            continue
        level = float(np.median(y[keep])) if n else None
        t_keep = ts[keep]
        if n < MIN_SAMPLES or t_keep[-1] == t_keep[0]:
            out.append(SeriesGrowth(s, n, level, None, FEW))
            continue
        slope, at_start = slope_per_h(t_keep, y[keep])
        end = at_start + slope * (t_keep[-1] - t_keep[0]) / 3.6e6
        out.append(SeriesGrowth(s, n, level, slope, flag_of(s, level, slope),
                                (int(t_keep[0]), int(t_keep[-1])), (at_start, end)))
    return HealthReport(path, frame, first, last, fit_from, tuple(out))


def read_health_report(path: str | Path) -> HealthReport | None:
    """`health_growth(read_health(path))`: None when the file does not exist or has no row."""
    frame = read_health(path)
    return None if frame is None else health_growth(frame, Path(path))


def metrics_dir(log: str | Path) -> Path:
    """The `metrics/` directory of the engine run whose output log is `log` (the run directory,
    its `outputs/` or `output-log.json`): metrics/ lies beside outputs/."""
    p = Path(log)
    if p.name == "output-log.json":
        p = p.parent
    if (p / "outputs").is_dir() and not (p / "output-log.json").exists():
        return p / "metrics"           # the engine run directory itself
    return p.parent / "metrics"


# -- as table cells ----------------------------------------------------------------------------

def amount_text(value: float | None, unit: str, signed: bool = False) -> str:
    """12.3 MiB, 512 KiB, 1.20 GiB, 1,234 files; "+" before growth; None as an en dash."""
    if value is None or not math.isfinite(value):
        return "–"
    sign = ("+" if value >= 0 else "−") if signed else ("−" if value < 0 else "")
    v = abs(value)
    if unit == "files":
        return f"{sign}{v:,.0f} files"
    for size, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if v >= size:
            return f"{sign}{v / size:,.{2 if size == 2**30 else 1}f} {name}"
    return f"{sign}{v:,.0f} B"


def table_rows(report: HealthReport) -> list[dict]:
    """The health table's rows: series, level, growth per hour (and in % of the level), flag."""
    return [{**growth_cells(g.to_dict()), "flag_class": g.flag.replace(" ", "-"),
             "weak": report.short and g.growth_per_h is not None} for g in report.series]


def growth_cells(g: dict) -> dict:
    """One series' cells from its `SeriesGrowth.to_dict()` (as a report's summary.json keeps it)."""
    pct, growth = g.get("growth_pct_per_h"), g.get("growth_per_h")
    return {"label": g["label"], "column": g["column"], "level": amount_text(g.get("level"), g["unit"]),
            "growth": "–" if growth is None else amount_text(growth, g["unit"], True) + "/h",
            "pct": "–" if pct is None else f"{pct:+,.1f} %".replace("-", "−"), "flag": g["flag"]}
