"""The four adaptivity-to-bursts metrics of thesis 4.5.5, over a run with the adaptivity profile.

The profile (kit.profiles.adaptivity_profile) has the phases warm-up, steady, peak and recovery.
Each output is placed in the phase of its triggering event (its inputTS, see validator.latency);
latencies are event-time latencies (arrivalTS - inputTS, the thesis' "scheduled time" formula (3)
of Figure 3.4) unless `latency="processing"` asks for arrivalTS - ingestTS.

- Maximum peak latency: the largest latency of the outputs triggered during or after the peak
  phase (inputTS at or after the peak's start).
- Peak latency degradation ratio: p99.9(peak) / p99.9(steady), nearest-rank percentiles over the
  outputs triggered in each phase.
- Recovery time: tau_recovery - tau_peak. tau_peak is the end of the peak phase on the wall clock
  (the last peak input is released just before it). tau_recovery is the arrival time of the first
  output arriving at or after tau_peak whose latency is <= the steady phase's mean latency. With
  `smoothing_ms` > 0 (default 1000) that output is searched only inside the first time bucket
  [tau_peak + k*w, tau_peak + (k+1)*w) whose *mean* latency is <= the steady mean, so a single
  lucky output (e.g. the newest event of a catch-up micro-batch) does not count as recovery.
  `smoothing_ms=0` is the thesis' literal rule.
- Post-peak latency variation ratio: mean latency of the recovery-phase outputs arriving at or
  after tau_recovery, over the steady phase's mean latency.

Recovery time and the post-peak ratio are None when the run never recovers; ratios are None when
their denominator is zero.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from kit.errors import CepkitError
from kit.outputlog import ARRIVAL_TS, INGEST_TS
from kit.profiles import RateProfile
from kit.workload import INPUT_TS
from validator.latency import PERCENTILES, nearest_rank
from validator.outputlog import Clocks

STEADY, PEAK, RECOVERY = "steady", "peak", "recovery"
DEFAULT_SMOOTHING_MS = 1000
LATENCY_KINDS = {"event": INPUT_TS, "processing": INGEST_TS}


@dataclass(frozen=True)
class AdaptivityMetrics:
    """Thesis Table 4.5's metrics plus the figures they are computed from (times in ms)."""

    max_peak_latency_ms: int
    degradation_ratio: float | None
    recovery_time_ms: float | None
    post_peak_variation_ratio: float | None
    steady_mean_ms: float
    steady_p999_ms: int
    peak_p999_ms: int
    tau_peak_wall_ms: float
    tau_recovery_wall_ms: int | None
    after_recovery_mean_ms: float | None
    steady_outputs: int
    peak_outputs: int
    after_recovery_outputs: int
    smoothing_ms: int
    latency: str = "event"

    def __post_init__(self) -> None:
        if self.steady_outputs < 1 or self.peak_outputs < 1:
            raise CepkitError("adaptivity: needs outputs in the steady and the peak phase")
        if self.latency not in LATENCY_KINDS:
            raise CepkitError(f"adaptivity: latency must be one of {', '.join(LATENCY_KINDS)}, got {self.latency!r}")
        recovered = self.tau_recovery_wall_ms is not None
        if recovered != (self.recovery_time_ms is not None):
            raise CepkitError("adaptivity: recovery time and recovery instant must both be set or both be None")
        if recovered and self.recovery_time_ms < 0:
            raise CepkitError(f"adaptivity: negative recovery time {self.recovery_time_ms}")
        if self.max_peak_latency_ms < self.peak_p999_ms:
            raise CepkitError("adaptivity: the maximum peak latency is below the peak's p99.9")

    @property
    def recovered(self) -> bool:
        return self.tau_recovery_wall_ms is not None

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"recovered": self.recovered}


def adaptivity_metrics(outputs: pd.DataFrame, profile: RateProfile, clocks: Clocks, *,
                       smoothing_ms: int = DEFAULT_SMOOTHING_MS, latency: str = "event") -> AdaptivityMetrics:
    """The 4.5.5 metrics of one output stream of an adaptivity run (see the module docstring)."""
    if latency not in LATENCY_KINDS:
        raise CepkitError(f"adaptivity: latency must be one of {', '.join(LATENCY_KINDS)}, got {latency!r}")
    if isinstance(smoothing_ms, bool) or not isinstance(smoothing_ms, int) or smoothing_ms < 0:
        raise CepkitError(f"adaptivity: smoothing_ms must be an integer >= 0, got {smoothing_ms!r}")
    names = [p.name for p in profile.phases]
    for needed in (STEADY, PEAK, RECOVERY):
        if needed not in names:
            raise CepkitError(f"adaptivity: profile {profile.name} has no {needed!r} phase (has {', '.join(names)}); "
                              "run with the adaptivity profile")
    start_col = LATENCY_KINDS[latency]
    for col in (ARRIVAL_TS, INPUT_TS, start_col):
        if col not in outputs.columns:
            raise CepkitError(f"adaptivity: the output rows have no {col} column")

    arrival = outputs[ARRIVAL_TS].to_numpy(dtype=np.float64, na_value=np.nan)
    input_ts = outputs[INPUT_TS].to_numpy(dtype=np.float64, na_value=np.nan)
    lat = arrival - outputs[start_col].to_numpy(dtype=np.float64, na_value=np.nan)
    ok = ~np.isnan(lat) & ~np.isnan(input_ts)
    arrival, input_ts, lat = arrival[ok], input_ts[ok], lat[ok]
    run_ms = clocks.run_ms(input_ts)

    def in_phase(name: str) -> np.ndarray:
        lo, hi = profile.phase_window(name)
        return (run_ms >= lo) & (run_ms < hi)

    steady, peak = np.sort(lat[in_phase(STEADY)]), np.sort(lat[in_phase(PEAK)])
    if not len(steady) or not len(peak):
        raise CepkitError(f"adaptivity: no outputs triggered in the {STEADY if not len(steady) else PEAK} phase, "
                          "so the adaptivity metrics cannot be computed")
    peak_start_ms, peak_end_ms = profile.phase_window(PEAK)
    during_or_after = lat[run_ms >= peak_start_ms]
    steady_mean = float(steady.mean())
    num, den = PERCENTILES["p999"]
    steady_p999, peak_p999 = nearest_rank(steady, num, den), nearest_rank(peak, num, den)

    tau_peak = float(clocks.wall_ms(peak_end_ms))
    tau_rec = recovery_instant(arrival, lat, tau_peak, steady_mean, smoothing_ms)
    after_mean, after_n = None, 0
    if tau_rec is not None:
        after = in_phase(RECOVERY) & (arrival >= tau_rec)
        after_n = int(after.sum())
        after_mean = float(lat[after].mean()) if after_n else None
    return AdaptivityMetrics(
        max_peak_latency_ms=int(during_or_after.max()),
        degradation_ratio=peak_p999 / steady_p999 if steady_p999 > 0 else None,
        recovery_time_ms=tau_rec - tau_peak if tau_rec is not None else None,
        post_peak_variation_ratio=after_mean / steady_mean if after_mean is not None and steady_mean > 0 else None,
        steady_mean_ms=steady_mean, steady_p999_ms=int(steady_p999), peak_p999_ms=int(peak_p999),
        tau_peak_wall_ms=tau_peak, tau_recovery_wall_ms=int(tau_rec) if tau_rec is not None else None,
        after_recovery_mean_ms=after_mean, steady_outputs=len(steady), peak_outputs=len(peak),
        after_recovery_outputs=after_n, smoothing_ms=smoothing_ms, latency=latency)


def recovery_instant(arrival_ms: np.ndarray, latency_ms: np.ndarray, tau_peak_ms: float,
                     steady_mean_ms: float, smoothing_ms: int) -> float | None:
    """Arrival time of the first output at or after tau_peak that shows recovery (module docstring)."""
    after = arrival_ms >= tau_peak_ms
    a, lat = arrival_ms[after], latency_ms[after]
    order = np.argsort(a, kind="stable")
    a, lat = a[order], lat[order]
    low = lat <= steady_mean_ms
    if smoothing_ms == 0:
        hits = np.flatnonzero(low)
        return float(a[hits[0]]) if len(hits) else None
    # Only the buckets that hold an output (in order): an arrival far after the others (an input's
    # number) must not size an array by its distance from tau_peak.
    buckets, bucket = np.unique(((a - tau_peak_ms) // smoothing_ms).astype(np.int64), return_inverse=True)
    bucket = bucket.reshape(-1)
    counts = np.bincount(bucket, minlength=len(buckets))
    sums = np.bincount(bucket, weights=lat, minlength=len(buckets))
    good = np.flatnonzero(sums / counts <= steady_mean_ms) if len(buckets) else np.zeros(0, dtype=np.int64)
    if not len(good):
        return None
    # A bucket whose mean is <= the steady mean holds at least one output that low.
    first = np.flatnonzero((bucket == good[0]) & low)[0]
    return float(a[first])
