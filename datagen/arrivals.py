"""Arrival times that follow a rate profile.

Poisson arrivals with a time-varying rate are drawn by time rescaling: the points of a unit-rate
Poisson process (cumulative sums of Exp(1) gaps) are mapped through the inverse of the profile's
cumulative intensity Lambda(t). The result is an exact non-homogeneous Poisson process; inside a
constant-rate phase the gaps are exponential with that rate. The constant-gap alternative uses
unit gaps in rescaled time, i.e. evenly spaced events at the profile's instantaneous rate.

Times are float milliseconds since the run start; the caller floors them to integer ms.
"""

from __future__ import annotations

import numpy as np

from kit.profiles import RateProfile


class ArrivalStream:
    """Draws the arrival times of one run chunk by chunk, continuing where the last chunk ended."""

    def __init__(self, profile: RateProfile, rng: np.random.Generator, arrivals: str = "poisson"):
        if arrivals not in ("poisson", "constant"):
            raise ValueError(f"unknown arrival law {arrivals!r}")
        self.profile = profile
        self.rng = rng
        self.poisson = arrivals == "poisson"
        self.total = profile.expected_events
        self._u = 0.0          # rescaled time of the last event drawn
        self.done = False

    def take(self, n: int) -> np.ndarray:
        """Up to `n` further arrival times (float ms, non-decreasing); fewer once the run ends."""
        if self.done or n <= 0:
            return np.empty(0, dtype=np.float64)
        gaps = self.rng.standard_exponential(n) if self.poisson else np.ones(n)
        u = self._u + np.cumsum(gaps)
        if u[-1] >= self.total:
            u = u[u < self.total]
            self.done = True
        if len(u):
            self._u = float(u[-1])
        return self.profile.inverse_cumulative(u)


def arrival_times_ms(profile: RateProfile, rng: np.random.Generator, arrivals: str = "poisson") -> np.ndarray:
    """All arrival times of a (small) run at once; for tests and small datasets."""
    stream = ArrivalStream(profile, rng, arrivals)
    parts = []
    while not stream.done:
        parts.append(stream.take(1 << 20))
    return np.concatenate(parts) if parts else np.empty(0)
