"""Input-rate profiles: piecewise-linear lists of named phases.

A profile is a sequence of phases; within a phase the rate (events per second) moves linearly
from `start_rate_eps` to `end_rate_eps`. Phase times are integer milliseconds relative to the
start of the run and every phase covers the half-open interval [start_ms, end_ms). Phases marked
`measured` form the measurement interval that performance metrics are cut to.

Profiles provided (thesis 7.3.7 / Figure 7.9 and 4.5.5 / Figure 4.16):
- standard (Pairs, 2 h): ramp-up 1 min 0 -> peak; decline 30 min peak -> basis; measurement
  interval of 60 min, basis -> peak in its first half (mi-rise) and peak -> basis in its second
  (mi-fall); final-rise 30 min basis -> peak.
- adaptivity (FINCoS): warm-up 1 min 0 -> lambda; steady 5 min at lambda; peak 10 s at
  1.5 lambda; recovery 5 min at lambda.
- constant: one steady phase.
Each has a quick variant with the same shape and a shorter total duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kit.errors import CepkitError

PROFILE_NAMES = ("standard", "adaptivity", "constant")
# Quick variants keep the shape and divide every phase by this factor.
QUICK_DIVISOR = {"standard": 60, "adaptivity": 10, "constant": 60}
CONSTANT_DEFAULT_MS = 7_200_000


@dataclass(frozen=True)
class Phase:
    """One stretch of the run; the rate moves linearly over [0, duration_ms)."""

    name: str
    duration_ms: int
    start_rate_eps: float
    end_rate_eps: float
    measured: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise CepkitError("phase name must not be empty")
        if not isinstance(self.duration_ms, int) or self.duration_ms <= 0:
            raise CepkitError(f"phase {self.name}: duration_ms must be a positive integer, got {self.duration_ms!r}")
        if self.start_rate_eps < 0 or self.end_rate_eps < 0:
            raise CepkitError(f"phase {self.name}: rates must be >= 0")

    @property
    def expected_events(self) -> float:
        return (self.start_rate_eps + self.end_rate_eps) / 2.0 * self.duration_ms / 1000.0


@dataclass(frozen=True)
class RateProfile:
    """A named sequence of phases; times are ms since the run start."""

    name: str
    phases: tuple[Phase, ...]

    def __post_init__(self) -> None:
        if not self.phases:
            raise CepkitError(f"profile {self.name}: needs at least one phase")
        names = [p.name for p in self.phases]
        if len(set(names)) != len(names):
            raise CepkitError(f"profile {self.name}: phase names must be unique, got {names}")
        if self.expected_events <= 0:
            raise CepkitError(f"profile {self.name}: the rate is zero throughout")

    @property
    def duration_ms(self) -> int:
        return sum(p.duration_ms for p in self.phases)

    @property
    def expected_events(self) -> float:
        return sum(p.expected_events for p in self.phases)

    def phase_starts_ms(self) -> np.ndarray:
        """Start of each phase, plus the end of the run as a last element."""
        return np.concatenate([[0], np.cumsum([p.duration_ms for p in self.phases])]).astype(np.int64)

    def phase_window(self, name: str) -> tuple[int, int]:
        """[start_ms, end_ms) of the named phase."""
        starts = self.phase_starts_ms()
        for i, p in enumerate(self.phases):
            if p.name == name:
                return int(starts[i]), int(starts[i + 1])
        raise CepkitError(f"profile {self.name}: no phase named {name!r} (has {[p.name for p in self.phases]})")

    def measurement_window(self) -> tuple[int, int]:
        """[start_ms, end_ms) spanning the measured phases (they must be contiguous)."""
        starts = self.phase_starts_ms()
        idx = [i for i, p in enumerate(self.phases) if p.measured]
        if not idx:
            return 0, self.duration_ms
        if idx != list(range(idx[0], idx[-1] + 1)):
            raise CepkitError(f"profile {self.name}: measured phases are not contiguous")
        return int(starts[idx[0]]), int(starts[idx[-1] + 1])

    def rate_at(self, t_ms) -> np.ndarray:
        """Rate in events/s at times t_ms (vectorized); 0 outside [0, duration)."""
        t = np.asarray(t_ms, dtype=np.float64)
        starts = self.phase_starts_ms()
        r0 = np.array([p.start_rate_eps for p in self.phases] + [0.0])
        r1 = np.array([p.end_rate_eps for p in self.phases] + [0.0])
        lengths = np.diff(starts).astype(np.float64)
        k = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(self.phases))
        frac = np.where(k < len(self.phases), (t - starts[k]) / np.append(lengths, 1.0)[k], 0.0)
        out = r0[k] + (r1[k] - r0[k]) * frac
        return np.where((t >= 0) & (t < self.duration_ms), out, 0.0)

    def expected_between(self, t0_ms: float, t1_ms: float) -> float:
        """Integral of the rate over [t0_ms, t1_ms): the expected number of events."""
        return float(self.cumulative(np.array([t1_ms]))[0] - self.cumulative(np.array([t0_ms]))[0])

    def cumulative(self, t_ms) -> np.ndarray:
        """Lambda(t): expected events in [0, t) (vectorized)."""
        t = np.clip(np.asarray(t_ms, dtype=np.float64), 0, self.duration_ms)
        starts = self.phase_starts_ms().astype(np.float64)
        r0 = np.array([p.start_rate_eps for p in self.phases])
        slope = np.array([(p.end_rate_eps - p.start_rate_eps) / p.duration_ms for p in self.phases])
        base = np.concatenate([[0.0], np.cumsum([p.expected_events for p in self.phases])])
        k = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(self.phases) - 1)
        x = t - starts[k]
        return base[k] + (r0[k] * x + 0.5 * slope[k] * x * x) / 1000.0

    def inverse_cumulative(self, u) -> np.ndarray:
        """Times t_ms with Lambda(t) = u, for u in [0, expected_events] (vectorized).

        Within a phase Lambda is quadratic in t; the root is taken in the cancellation-free form
        x = 2d / (r0 + sqrt(r0^2 + 2 s d)), which also covers zero slope and a zero start rate.
        """
        u = np.asarray(u, dtype=np.float64)
        starts = self.phase_starts_ms().astype(np.float64)
        r0 = np.array([p.start_rate_eps for p in self.phases]) / 1000.0  # events per ms
        slope = np.array([(p.end_rate_eps - p.start_rate_eps) / p.duration_ms for p in self.phases]) / 1000.0
        base = np.concatenate([[0.0], np.cumsum([p.expected_events for p in self.phases])])
        k = np.clip(np.searchsorted(base, u, side="right") - 1, 0, len(self.phases) - 1)
        d = u - base[k]
        a = r0[k]
        disc = np.maximum(a * a + 2.0 * slope[k] * d, 0.0)
        denom = a + np.sqrt(disc)
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(denom > 0, 2.0 * d / denom, 0.0)
        return np.minimum(starts[k] + x, starts[k + 1])

    def scaled_to(self, total_ms: int) -> "RateProfile":
        """The same shape stretched or squeezed to `total_ms` (phase ends rounded to whole ms)."""
        if total_ms < len(self.phases):
            raise CepkitError(f"profile {self.name}: duration {total_ms} ms is too short for {len(self.phases)} phases")
        ends = np.rint(self.phase_starts_ms()[1:] * (total_ms / self.duration_ms)).astype(np.int64)
        ends[-1] = total_ms
        starts = np.concatenate([[0], ends[:-1]])
        lengths = np.maximum(ends - starts, 1)
        phases = tuple(Phase(p.name, int(n), p.start_rate_eps, p.end_rate_eps, p.measured)
                       for p, n in zip(self.phases, lengths))
        return RateProfile(self.name, phases)

    def flattened(self, rate_eps: float) -> "RateProfile":
        """Same phases and durations at a constant rate (the 'non-varying' alternative)."""
        return RateProfile(self.name, tuple(Phase(p.name, p.duration_ms, rate_eps, rate_eps, p.measured)
                                            for p in self.phases))

    def with_measurement(self, start_ms: int | None, end_ms: int | None) -> "RateProfile":
        """The same rates with the measurement interval moved to [start_ms, end_ms) (None: the
        profile's start or end). Phases are split at those instants (rates interpolated); the pieces
        inside are measured, the others not. A window reaching past the end extends the last phase
        at its end rate, so a measurement interval can cover a drain."""
        lo = 0 if start_ms is None else int(start_ms)
        hi = self.duration_ms if end_ms is None else int(end_ms)
        if not 0 <= lo < hi:
            raise CepkitError(f"profile {self.name}: measurement interval [{lo}, {hi}) ms is empty or negative")
        phases = list(self.phases)
        if hi > self.duration_ms:
            last = phases[-1]
            phases.append(Phase(f"{last.name} (after)", hi - self.duration_ms, last.end_rate_eps, last.end_rate_eps))
        out, t0 = [], 0
        for p in phases:
            t1 = t0 + p.duration_ms
            cuts = sorted({t0, t1, *(c for c in (lo, hi) if t0 < c < t1)})
            for a, b in zip(cuts, cuts[1:]):
                r = lambda t: p.start_rate_eps + (p.end_rate_eps - p.start_rate_eps) * (t - t0) / p.duration_ms
                name = p.name if a == t0 else f"{p.name} (from {a / 1000:g} s)"
                out.append(Phase(name, b - a, r(a), r(b), measured=lo <= a and b <= hi))
            t0 = t1
        return RateProfile(self.name, tuple(out))

    def to_dict(self) -> dict:
        starts = self.phase_starts_ms()
        return {"name": self.name, "duration_ms": self.duration_ms,
                "expected_events": self.expected_events,
                "phases": [{"name": p.name, "start_ms": int(starts[i]), "end_ms": int(starts[i + 1]),
                            "start_rate_eps": p.start_rate_eps, "end_rate_eps": p.end_rate_eps,
                            "measured": p.measured} for i, p in enumerate(self.phases)]}


def standard_profile(basis_eps: float, peak_eps: float) -> RateProfile:
    """Pairs run of Figure 7.9 (2 hours)."""
    minute = 60_000
    return RateProfile("standard", (
        Phase("ramp-up", 1 * minute, 0.0, peak_eps),
        Phase("decline", 30 * minute, peak_eps, basis_eps),
        Phase("mi-rise", 30 * minute, basis_eps, peak_eps, measured=True),
        Phase("mi-fall", 30 * minute, peak_eps, basis_eps, measured=True),
        Phase("final-rise", 30 * minute, basis_eps, peak_eps),
    ))


def adaptivity_profile(lambda_eps: float, peak_factor: float = 1.5) -> RateProfile:
    """FINCoS burst test of Figure 4.16 (10 min 10 s)."""
    return RateProfile("adaptivity", (
        Phase("warm-up", 60_000, 0.0, lambda_eps),
        Phase("steady", 300_000, lambda_eps, lambda_eps, measured=True),
        Phase("peak", 10_000, lambda_eps * peak_factor, lambda_eps * peak_factor, measured=True),
        Phase("recovery", 300_000, lambda_eps, lambda_eps, measured=True),
    ))


def constant_profile(rate_eps: float, duration_ms: int = CONSTANT_DEFAULT_MS) -> RateProfile:
    return RateProfile("constant", (Phase("steady", int(duration_ms), rate_eps, rate_eps, measured=True),))


def build_profile(name: str, *, basis_eps: float, peak_eps: float, quick: bool = False,
                  duration_ms: int | None = None, varying: bool = True) -> RateProfile:
    """Resolve a profile by name; `duration_ms` rescales it, `quick` uses the short variant."""
    if name == "standard":
        prof = standard_profile(basis_eps, peak_eps)
    elif name == "adaptivity":
        prof = adaptivity_profile(basis_eps, peak_eps / basis_eps)
    elif name == "constant":
        prof = constant_profile(basis_eps)
    else:
        raise CepkitError(f"unknown rate profile {name!r} (valid: {', '.join(PROFILE_NAMES)})")
    if duration_ms is not None:
        prof = prof.scaled_to(int(duration_ms))
    elif quick:
        prof = prof.scaled_to(prof.duration_ms // QUICK_DIVISOR[name])
    if not varying:
        prof = prof.flattened(basis_eps)
    return prof


def whole_run_profile(duration_ms: int, events: int) -> RateProfile:
    """A run with no rate profile to follow (a constant-rate or pulled replay, or a converted
    dataset): one measured phase of `duration_ms` at the run's mean rate."""
    duration_ms = max(int(duration_ms), 1)
    rate = max(events, 1) * 1000.0 / duration_ms
    return RateProfile("whole run", (Phase("run", duration_ms, rate, rate, measured=True),))


def profile_from_dict(data: dict) -> RateProfile:
    """The inverse of `RateProfile.to_dict` (e.g. the profile recorded in a dataset manifest)."""
    try:
        phases = tuple(Phase(p["name"], int(p["end_ms"]) - int(p["start_ms"]), float(p["start_rate_eps"]),
                             float(p["end_rate_eps"]), bool(p.get("measured", False))) for p in data["phases"])
        return RateProfile(str(data["name"]), phases)
    except (KeyError, TypeError, ValueError) as e:
        raise CepkitError(f"profile: malformed description ({e})") from None
