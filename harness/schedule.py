"""Clocks, due times and release lateness.

- `EpochClock` gives wall-clock epoch milliseconds (float) from `time.perf_counter_ns`, anchored
  once to `time.time_ns`: monotonic and sub-millisecond, so release steps and lateness are not
  disturbed by wall-clock steps during a run.
- `Pacing` turns a chunk's simulated timestamps (or its offsets, for a fixed rate) into due times
  relative to the run start, with numpy, once per chunk: the release loop then only compares
  integers.
- `aligned_run_start` picks the run start so that rebasing TS is a shift by a whole number of
  alignment periods (SEMANTICS.md section 1: time windows stay aligned).
- `LatenessRecorder` keeps a fixed histogram of release lateness per release step.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from kit.errors import CepkitError


class EpochClock:
    """Epoch ms as a float, from the monotonic performance counter."""

    def __init__(self) -> None:
        # Take the anchor pair with the tightest bracket, so it is off by at most a few microseconds.
        best = None
        for _ in range(5):
            p0 = time.perf_counter_ns()
            wall = time.time_ns()
            p1 = time.perf_counter_ns()
            if best is None or p1 - p0 < best[0]:
                best = (p1 - p0, wall, (p0 + p1) // 2)
        _, self._wall_ns, self._perf_ns = best

    def now_ms(self) -> float:
        return (self._wall_ns + (time.perf_counter_ns() - self._perf_ns)) / 1e6


def aligned_run_start(earliest_wall_ms: float, sim_start_ms: int, align_ms: int) -> int:
    """The first instant >= `earliest_wall_ms` with `(start - sim_start_ms) % align_ms == 0`."""
    periods = math.ceil((earliest_wall_ms - sim_start_ms) / align_ms)
    return sim_start_ms + periods * align_ms


def check_aligned(start_wall_ms: int, sim_start_ms: int, align_ms: int) -> None:
    if (start_wall_ms - sim_start_ms) % align_ms:
        raise CepkitError(
            f"driver config: start_wall_ms: {start_wall_ms} - sim_start_ms {sim_start_ms} is not a multiple "
            f"of align_ms {align_ms} (use {aligned_run_start(start_wall_ms, sim_start_ms, align_ms)})")


@dataclass(frozen=True)
class Pacing:
    """Due time of each event, in integer ms after the run start (floored)."""

    mode: str                  # "tickts" or "rate"
    sim_start_ms: int
    speed: float = 1.0
    rate_eps: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("tickts", "rate", "pull"):
            raise CepkitError(f"pacing: unknown mode {self.mode!r}")
        if self.mode == "rate" and not (self.rate_eps and self.rate_eps > 0):
            raise CepkitError("pacing: rate_eps must be positive")
        if self.speed <= 0:
            raise CepkitError("pacing: speed must be positive")

    def due_rel_ms(self, first_offset: int, sim_ts_ms: np.ndarray) -> np.ndarray:
        """int64 due times for the events at offsets first_offset, first_offset+1, ..."""
        if self.mode == "pull":
            # Every event is due at once; the release loop holds them back to the engine's reads.
            return np.zeros(len(sim_ts_ms), dtype=np.int64)
        if self.mode == "rate":
            # i * 1000 is exact in float64 and IEEE division rounds correctly, so i/rate that is
            # a whole number of ms is not floored one below.
            i = np.arange(first_offset, first_offset + len(sim_ts_ms), dtype=np.float64)
            return np.floor(i * 1000.0 / self.rate_eps).astype(np.int64)
        rel = np.asarray(sim_ts_ms, dtype=np.int64) - self.sim_start_ms
        if self.speed == 1.0:
            return rel
        return np.floor(rel / self.speed).astype(np.int64)


class LatenessRecorder:
    """Histogram of (actual release time - due time) per release step, in ms.

    Bins are 0.01 ms wide below 10 ms, 0.1 ms below 100 ms, 1 ms below 10 s, then one overflow
    bin; the maximum and the mean are kept exactly. Percentiles report a bin's midpoint (capped at
    the maximum), so they are exact to 5 microseconds in the range that matters (< 10 ms).
    Written by the release thread only; readers take a snapshot.
    """

    _EDGES = np.concatenate([np.arange(0, 1000) * 0.01, 10 + np.arange(0, 900) * 0.1,
                             100 + np.arange(0, 9901) * 1.0])        # last edge: 10,000 ms

    def __init__(self) -> None:
        self.counts = [0] * len(self._EDGES)    # bin i covers [edge i, edge i+1); the last overflows
        self.steps = 0
        self.total_ms = 0.0
        self.max_ms = 0.0

    def add(self, late_ms: float) -> None:
        x = late_ms if late_ms > 0.0 else 0.0
        if x < 10.0:
            i = int(x * 100.0)
        elif x < 100.0:
            i = 1000 + int((x - 10.0) * 10.0)
        elif x < 10_000.0:
            i = 1900 + int(x - 100.0)
        else:
            i = len(self.counts) - 1
        self.counts[min(i, len(self.counts) - 1)] += 1
        self.steps += 1
        self.total_ms += x
        if x > self.max_ms:
            self.max_ms = x

    def summary(self) -> dict:
        counts = np.array(self.counts, dtype=np.int64)
        n = int(counts.sum())
        out = {"steps": n, "mean_ms": self.total_ms / n if n else None, "max_ms": self.max_ms if n else None}
        mids = np.append((self._EDGES[:-1] + self._EDGES[1:]) / 2.0, self._EDGES[-1])
        cum = np.cumsum(counts)
        for name, q in (("p50_ms", 0.50), ("p99_ms", 0.99), ("p999_ms", 0.999)):
            if n:
                k = int(np.searchsorted(cum, math.ceil(q * n), side="left"))
                out[name] = min(round(float(mids[k]), 3), self.max_ms)
            else:
                out[name] = None
        return out
