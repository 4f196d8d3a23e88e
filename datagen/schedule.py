"""When events happen: the rate profile of a generator config, file split points, phase tallies.

Shared by every generator so that profiles, file splits and per-phase counts mean the same thing
for Pairs ticks and microbenchmark streams.
"""

from __future__ import annotations

import numpy as np

from kit.config import RateConfig
from kit.profiles import RateProfile, build_profile


def profile_for(rate: RateConfig, basis_eps: float) -> RateProfile:
    """The profile a rate config asks for, around `basis_eps` (peak = basis * peak_factor)."""
    return build_profile(rate.profile, basis_eps=basis_eps, peak_eps=basis_eps * rate.peak_factor,
                         quick=rate.quick, varying=rate.varying,
                         duration_ms=None if rate.duration_s is None else int(round(rate.duration_s * 1000)))


def file_bounds(profile: RateProfile, file_count: int, start_epoch_ms: int) -> list[int]:
    """First timestamp of files 2..F: where the expected event count reaches i/F of the total."""
    cut_ms = profile.inverse_cumulative(np.arange(1, file_count) * profile.expected_events / file_count)
    return [start_epoch_ms + int(np.floor(t)) for t in cut_ms]


def phase_counts(profile: RateProfile, rel_ms: np.ndarray) -> np.ndarray:
    """How many of the events at `rel_ms` (ms since the run start) fall in each phase."""
    starts = profile.phase_starts_ms()
    n = len(profile.phases)
    return np.bincount(np.searchsorted(starts, rel_ms, side="right") - 1, minlength=n)[:n]


def phase_summary(profile: RateProfile, rows_per_phase: np.ndarray) -> list[dict]:
    """Manifest entries: each phase's window, its generated rows and the expected count."""
    starts = profile.phase_starts_ms()
    return [{"name": ph.name, "rows": int(rows_per_phase[i]), "expected_rows": ph.expected_events,
             "start_ms": int(starts[i]), "end_ms": int(starts[i + 1])} for i, ph in enumerate(profile.phases)]
