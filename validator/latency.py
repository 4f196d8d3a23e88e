"""Latency statistics, per-second series, the measurement-interval cut and pscore.

Latencies are integer milliseconds taken from the output log's stamps (specs/OUTPUT_LOG.md):
event-time latency = arrivalTS - inputTS (from the input event's scheduled release to the sink),
processing-time latency = arrivalTS - ingestTS (from the engine's source pulling the event).

Percentiles are nearest-rank: the p-th percentile of n values is the value of rank
ceil(p/100 * n) (1-based) in ascending order, so it is always an observed latency. This is numpy's
`method="inverted_cdf"`, computed here with exact integer rank arithmetic because numpy's floating
q*n rounds up at some sizes (n = 1000, p = 99.9 gives rank 1000 in numpy instead of 999).

Every percentile of `LatencyStats` comes with its sample count and its distribution-free 95 %
confidence interval (validator.order_stats; open, None, on a side too few samples cannot bound),
and so does the p99 behind a `Pscore`, whose interval follows from it.

Outputs are placed on the rate profile's time axis by their `inputTS`, so an output belongs to the
phase during which its triggering event was released (see `Clocks`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from kit.errors import CepkitError
from kit.outputlog import ARRIVAL_TS, INGEST_TS
from kit.profiles import RateProfile
from kit.scale import load, pscore
from kit.workload import INPUT_TS
from validator.order_stats import (PERCENTILES, Percentile, ci_values, interval_text, nearest_rank_of,
                                   percentile_note)
from validator.outputlog import Clocks


def nearest_rank(sorted_values: np.ndarray, num: int, den: int):
    """The num/den quantile of ascending `sorted_values` by nearest rank (None when empty)."""
    n = len(sorted_values)
    if n == 0:
        return None
    return sorted_values[nearest_rank_of(n, num, den) - 1].item()


@dataclass(frozen=True)
class LatencyStats:
    """Summary of latencies in ms; every value is None when there are no latencies.

    `count` is the sample count behind every percentile; `<p>_ci_low_ms` and `<p>_ci_high_ms` are
    the 95 % interval of percentile <p> (validator.order_stats.ci_ranks), None on an open side.
    """

    count: int
    mean_ms: float | None
    min_ms: int | None
    max_ms: int | None
    p50_ms: int | None
    p90_ms: int | None
    p95_ms: int | None
    p99_ms: int | None
    p999_ms: int | None
    negatives: int
    p50_ci_low_ms: int | None = None
    p50_ci_high_ms: int | None = None
    p90_ci_low_ms: int | None = None
    p90_ci_high_ms: int | None = None
    p95_ci_low_ms: int | None = None
    p95_ci_high_ms: int | None = None
    p99_ci_low_ms: int | None = None
    p99_ci_high_ms: int | None = None
    p999_ci_low_ms: int | None = None
    p999_ci_high_ms: int | None = None

    def __post_init__(self) -> None:
        if self.count < 0 or not 0 <= self.negatives <= self.count:
            raise CepkitError(f"latency stats: bad counts (count={self.count}, negatives={self.negatives})")
        values = [self.min_ms, self.p50_ms, self.p90_ms, self.p95_ms, self.p99_ms, self.p999_ms, self.max_ms]
        if self.count == 0:
            bounds = [getattr(self, f"{p}_ci_{side}_ms") for p in PERCENTILES for side in ("low", "high")]
            if any(v is not None for v in values + bounds + [self.mean_ms]):
                raise CepkitError("latency stats: values given for zero latencies")
            return
        if any(v is None for v in values + [self.mean_ms]) or values != sorted(values):
            raise CepkitError(f"latency stats: percentiles must run min <= p50 <= ... <= max, got {values}")
        if not self.min_ms <= self.mean_ms <= self.max_ms:
            raise CepkitError(f"latency stats: mean {self.mean_ms} outside [{self.min_ms}, {self.max_ms}]")
        for name in PERCENTILES:
            p = self.percentile(name)       # checks which sides are open and low <= value <= high
            if any(b is not None and not self.min_ms <= b <= self.max_ms for b in (p.low, p.high)):
                raise CepkitError(f"latency stats: the {name} interval [{p.low}, {p.high}] leaves "
                                  f"[{self.min_ms}, {self.max_ms}]")

    @property
    def empty(self) -> bool:
        return self.count == 0

    def percentile(self, name: str) -> Percentile:
        """Percentile `name` (p50, p90, p95, p99, p999) with its count and 95 % interval."""
        if name not in PERCENTILES:
            raise CepkitError(f"latency stats: no percentile {name!r} (have {', '.join(PERCENTILES)})")
        return Percentile(name, self.count, getattr(self, f"{name}_ms"), getattr(self, f"{name}_ci_low_ms"),
                          getattr(self, f"{name}_ci_high_ms"))

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def latency_stats(latencies_ms) -> LatencyStats:
    """Count, mean, min, max, nearest-rank p50/p90/p95/p99/p99.9 and negatives of an array of ms."""
    a = np.asarray(latencies_ms)
    if a.ndim != 1:
        raise CepkitError(f"latencies must be a 1-d array, got shape {a.shape}")
    if len(a) == 0:
        return LatencyStats(0, None, None, None, None, None, None, None, None, 0)
    if not np.issubdtype(a.dtype, np.integer):
        if not np.all(np.isfinite(a)):
            raise CepkitError("latencies must be finite numbers")
    s = np.sort(a)
    pct = {f"{name}_ms": nearest_rank(s, num, den) for name, (num, den) in PERCENTILES.items()}
    for name, (num, den) in PERCENTILES.items():
        pct[f"{name}_ci_low_ms"], pct[f"{name}_ci_high_ms"] = ci_values(s, num, den)
    return LatencyStats(count=len(s), mean_ms=float(s.mean(dtype=np.float64)), min_ms=s[0].item(), max_ms=s[-1].item(),
                        negatives=int((s < 0).sum()), **pct)


def _stamp(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df.columns:
        raise CepkitError(f"output rows have no {col} column (have {', '.join(map(str, df.columns))})")
    return df[col].to_numpy(dtype=np.float64, na_value=np.nan)


def event_time_latency_ms(df: pd.DataFrame) -> np.ndarray:
    """arrivalTS - inputTS per row (int64 ms); rows without an inputTS are left out."""
    lat = _stamp(df, ARRIVAL_TS) - _stamp(df, INPUT_TS)
    return lat[~np.isnan(lat)].astype(np.int64)


def processing_time_latency_ms(df: pd.DataFrame) -> np.ndarray | None:
    """arrivalTS - ingestTS per row (int64 ms), or None when the log has no ingestTS column."""
    if INGEST_TS not in df.columns:
        return None
    lat = _stamp(df, ARRIVAL_TS) - _stamp(df, INGEST_TS)
    return lat[~np.isnan(lat)].astype(np.int64)


# A per-second series lists its empty seconds (with 0) as long as its span is at most this many
# seconds (about 11.6 days) or the number of stamps it counts; a longer span (an origin or a stamp
# far from the others in an input file) lists only the seconds that hold a stamp, so the work is
# bounded by the rows already in memory, never by a difference of two stamps (specs/OUTPUT_LOG.md).
MAX_DENSE_SECONDS = 1_000_000


def _seconds_axis(sec: np.ndarray, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """The seconds a series lists and each stamp's index into them (`sec` within [first, last]):
    every second of [first, last] when the span allows (MAX_DENSE_SECONDS), else only those in `sec`."""
    if last - first + 1 <= max(MAX_DENSE_SECONDS, len(sec)):
        return np.arange(first, last + 1, dtype=np.int64), sec - first
    seconds, index = np.unique(sec, return_inverse=True)
    return seconds.astype(np.int64), index.reshape(-1)


def per_second_counts(ts_ms, origin_ms: int, seconds: int | None = None) -> pd.DataFrame:
    """How many timestamps fall in each second [origin + s*1000, origin + (s+1)*1000), s = 0, 1, ...

    Columns `second` and `count`; every second up to the last one seen (or `seconds`) is listed,
    empty ones with 0, unless that span exceeds MAX_DENSE_SECONDS and the stamps: then only the
    seconds with a timestamp are. Timestamps before `origin_ms` are ignored.
    """
    t = np.asarray(ts_ms, dtype=np.int64)
    sec = (t - int(origin_ms)) // 1000
    sec = sec[sec >= 0]
    if seconds is not None:
        sec = sec[sec < int(seconds)]
    last = int(seconds) - 1 if seconds is not None else (int(sec.max()) if len(sec) else -1)
    if last < 0:
        return pd.DataFrame({"second": np.zeros(0, dtype=np.int64), "count": np.zeros(0, dtype=np.int64)})
    axis, index = _seconds_axis(sec, 0, last)
    counts = np.bincount(index, minlength=len(axis))
    return pd.DataFrame({"second": axis, "count": counts.astype(np.int64)})


def per_second_series(df: pd.DataFrame, clocks: Clocks) -> pd.DataFrame:
    """Outputs and event-time latency per wall-clock second of arrival since the run start.

    Columns: `second` (wall seconds since run_start_wall_ms), `outputs` (rows that arrived in that
    second), `p50_ms`, `p99_ms` (nearest-rank over those rows' latencies; NaN when there are none).
    The series spans the observed arrivals, from the first second with an output to the last,
    empty seconds included (0 outputs, NaN latencies) unless that span exceeds MAX_DENSE_SECONDS
    and the rows: then only the seconds with outputs are listed. Rows that arrived before the run
    start are left out.
    """
    arrival = _stamp(df, ARRIVAL_TS)
    lat_all = arrival - _stamp(df, INPUT_TS)
    after = arrival >= clocks.run_start_wall_ms
    sec_raw = ((arrival[after] - clocks.run_start_wall_ms) // 1000).astype(np.int64)
    # Sized by the arrivals seen, not by their distance from run_start_wall_ms (an input's number:
    # 0 there once asked for 1.8e9 seconds, 13.4 GiB).
    axis, sec_all = _seconds_axis(sec_raw, int(sec_raw.min()), int(sec_raw.max())) if len(sec_raw) \
        else (np.zeros(0, dtype=np.int64), sec_raw)
    n = len(axis)
    outputs = np.bincount(sec_all, minlength=n).astype(np.int64)
    valid = ~np.isnan(lat_all[after])
    sec, lat = sec_all[valid], lat_all[after][valid]
    sizes = np.bincount(sec, minlength=n)
    p50, p99 = np.full(n, np.nan), np.full(n, np.nan)
    if len(sec):
        # Sort by (second, latency): each second's latencies are then one contiguous sorted run.
        order = np.lexsort((lat, sec))
        l_sorted = lat[order]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        has = sizes > 0
        for out, (num, den) in ((p50, PERCENTILES["p50"]), (p99, PERCENTILES["p99"])):
            rank = np.maximum(1, -(-num * sizes // den))
            out[has] = l_sorted[starts[has] + rank[has] - 1]
    return pd.DataFrame({"second": axis, "outputs": outputs, "p50_ms": p50, "p99_ms": p99})


def phase_index(input_ts_ms, profile: RateProfile, clocks: Clocks) -> np.ndarray:
    """Index into profile.phases of the phase each inputTS falls in; -1 outside the run."""
    run_ms = clocks.run_ms(input_ts_ms)
    starts = profile.phase_starts_ms()
    k = np.searchsorted(starts, run_ms, side="right") - 1
    inside = (run_ms >= 0) & (run_ms < profile.duration_ms) & ~np.isnan(run_ms)
    return np.where(inside, k, -1)


def measurement_mask(input_ts_ms, profile: RateProfile, clocks: Clocks) -> np.ndarray:
    """True for outputs whose inputTS falls in the profile's measurement interval [start, end)."""
    run_ms = clocks.run_ms(input_ts_ms)
    start_ms, end_ms = profile.measurement_window()
    return (run_ms >= start_ms) & (run_ms < end_ms)


def pscore_interval(scale_factor: int, p99_ci_low_ms, p99_ci_high_ms) -> tuple[float | None, float | None]:
    """The 95 % interval of pscore from that of its p99 (ms): pscore = load / p99 falls as p99
    rises, so it is [load / p99_high, load / p99_low]. An open p99 side opens the opposite pscore
    side, and so does a p99 bound <= 0 ms (pscore would be unbounded)."""
    low = None if p99_ci_high_ms is None or p99_ci_high_ms <= 0 else pscore(scale_factor, p99_ci_high_ms / 1000.0)
    high = None if p99_ci_low_ms is None or p99_ci_low_ms <= 0 else pscore(scale_factor, p99_ci_low_ms / 1000.0)
    return low, high


@dataclass(frozen=True)
class Pscore:
    """pscore of a Pairs run: load(SF) / p99 MarketOrder event-time latency (s) over the MI.

    `mi_rows` is the number of orders behind the p99; `p99_ci_low_ms`/`p99_ci_high_ms` its 95 %
    interval and `pscore_ci_low`/`pscore_ci_high` the pscore's (see `pscore_interval`), None on
    an open side.
    """

    scale_factor: int
    load: int
    p99_latency_s: float
    pscore: float
    mi_rows: int
    mi_start_ms: int
    mi_end_ms: int
    p99_ci_low_ms: int | None
    p99_ci_high_ms: int | None
    pscore_ci_low: float | None
    pscore_ci_high: float | None

    def __post_init__(self) -> None:
        if self.load != load(self.scale_factor):
            raise CepkitError(f"pscore: load {self.load} is not load({self.scale_factor})")
        if self.mi_rows < 1 or not self.p99_latency_s > 0 or not math.isclose(
                self.pscore, self.load / self.p99_latency_s, rel_tol=1e-12):
            raise CepkitError(f"pscore: inconsistent values {self}")
        self.p99                            # checks the p99 interval against the order count
        expected = pscore_interval(self.scale_factor, self.p99_ci_low_ms, self.p99_ci_high_ms)
        given = (self.pscore_ci_low, self.pscore_ci_high)
        if any((e is None) != (g is None) or (e is not None and not math.isclose(e, g, rel_tol=1e-12))
               for e, g in zip(expected, given)):
            raise CepkitError(f"pscore: interval {given} does not follow from the p99 interval "
                              f"[{self.p99_ci_low_ms}, {self.p99_ci_high_ms}] ms (expected {expected})")

    @property
    def p99(self) -> Percentile:
        """The MarketOrder p99 behind the score, in ms, with its order count and interval."""
        return Percentile("p99", self.mi_rows, round(self.p99_latency_s * 1000.0), self.p99_ci_low_ms,
                          self.p99_ci_high_ms)

    def text(self, noun: str = "orders") -> str:
        """'pscore: 4.93 (95 % CI ≤ 7.46; p99 from the maximum of 6 orders: too few for a p99)':
        the pscore with its interval and what its p99 rests on, in the words of
        validator.order_stats."""
        p = self.p99
        ci = interval_text(self.pscore_ci_low, self.pscore_ci_high, lambda v: f"{v:,.2f}")
        # Too few orders for an upper p99 bound leave the pscore without a lower one; say from how
        # many it gets one, as the p99's own wording does (the maximum case already says "too few").
        if p.high is None and self.pscore_ci_high is not None and not p.is_maximum:
            ci += f", no lower bound below {p.closed_from:,} {noun}"
        return f"pscore: {self.pscore:,.2f} (95 % CI {ci}; p99 from {percentile_note(p, noun)})"

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def pscore_for_run(scale_factor: int, market_orders: pd.DataFrame, profile: RateProfile, clocks: Clocks) -> Pscore:
    """kit.scale.pscore(SF, p99 event-time latency in s of the MarketOrder rows in the MI)."""
    if len(market_orders) == 0:
        raise CepkitError("MarketOrder: the engine produced no orders, so pscore cannot be computed")
    mask = measurement_mask(_stamp(market_orders, INPUT_TS), profile, clocks)
    mi = market_orders[mask]
    start_ms, end_ms = profile.measurement_window()
    if len(mi) == 0:
        raise CepkitError(f"MarketOrder: none of the {len(market_orders)} orders has its inputTS in the measurement "
                          f"interval [{start_ms / 1000:g} s, {end_ms / 1000:g} s) of profile {profile.name}, "
                          f"so pscore cannot be computed")
    stats = latency_stats(event_time_latency_ms(mi))
    if stats.count == 0:
        raise CepkitError("MarketOrder: no order in the measurement interval has an inputTS")
    p99_s = stats.p99_ms / 1000.0
    ci_low, ci_high = pscore_interval(scale_factor, stats.p99_ci_low_ms, stats.p99_ci_high_ms)
    return Pscore(scale_factor=scale_factor, load=load(scale_factor), p99_latency_s=p99_s,
                  pscore=pscore(scale_factor, p99_s), mi_rows=stats.count, mi_start_ms=start_ms, mi_end_ms=end_ms,
                  p99_ci_low_ms=stats.p99_ci_low_ms, p99_ci_high_ms=stats.p99_ci_high_ms,
                  pscore_ci_low=ci_low, pscore_ci_high=ci_high)


@dataclass(frozen=True)
class StreamLatency:
    """Latency of one output stream: event- and processing-time stats, the per-second series and
    the raw event-time latencies (for the histogram)."""

    stream: str
    event: LatencyStats
    processing: LatencyStats | None
    series: pd.DataFrame
    event_latencies_ms: np.ndarray

    def __post_init__(self) -> None:
        if len(self.event_latencies_ms) != self.event.count:
            raise CepkitError(f"stream {self.stream}: {len(self.event_latencies_ms)} latencies but count "
                              f"{self.event.count}")
        missing = {"second", "outputs", "p50_ms", "p99_ms"} - set(self.series.columns)
        if missing:
            raise CepkitError(f"stream {self.stream}: series lacks {sorted(missing)}")

    def to_dict(self) -> dict:
        return {"event": self.event.to_dict(),
                "processing": self.processing.to_dict() if self.processing is not None else None}


def stream_latency(stream: str, df: pd.DataFrame, clocks: Clocks, profile: RateProfile | None = None) -> StreamLatency:
    """All latency figures of one stream; with a profile, stats are cut to its measurement interval
    (the series always covers the whole run)."""
    rows = df
    if profile is not None and len(df):
        rows = df[measurement_mask(_stamp(df, INPUT_TS), profile, clocks)]
    event = event_time_latency_ms(rows)
    proc = processing_time_latency_ms(rows)
    return StreamLatency(stream, latency_stats(event), latency_stats(proc) if proc is not None else None,
                         per_second_series(df, clocks), event)
