"""Distribution-free 95 % confidence intervals for percentiles, and the one wording of a percentile.

A latency percentile measured on a handful of outputs is mostly noise: the nearest-rank p99 of
fewer than 100 values is simply their maximum. This module says how far a measured percentile can
be trusted, without assuming anything about the latency distribution (specs/VALIDATION.md,
"Confidence intervals of percentiles"):

- `ci_ranks(n, num, den)`: the ranks (l, u) of the order statistics x(l) <= Q <= x(u) that bound
  the num/den quantile Q with at least 95 % probability, from the Binomial(n, num/den)
  distribution; None on a side that n samples cannot bound.
- `Percentile`: a measured percentile with its sample count and interval; `percentile_text` is
  the only place that turns one into words ("p99 = 752 ms (the maximum of 6 orders: too few for
  a p99; 95 % CI ≥ 402 ms)"), for the CLI, the text and HTML reports and the micro summaries.

The binomial CDF is scipy's (`scipy.stats.binom`, the regularized incomplete beta function): a
hand-written sum of lgamma-based terms loses ~1e-7 of the CDF to cancellation at tens of millions of
samples, enough to put a rank off by one (n = 43,902,618, p99: tests/validator/test_latency.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from kit.errors import CepkitError

# Name -> percentile as an exact fraction (numerator, denominator).
PERCENTILES = {"p50": (50, 100), "p90": (90, 100), "p95": (95, 100), "p99": (99, 100), "p999": (999, 1000)}
LABELS = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99.9"}
CONFIDENCE = Fraction(95, 100)
ALPHA = 1 - CONFIDENCE               # 5 %: 2.5 % per side for a two-sided interval
# Binomial mass further than this many standard deviations (+ a margin for small counts) from
# the mean is below 1e-30: the CDF is evaluated only between, so a count of millions costs ~10k points.
_WINDOW_SD, _WINDOW_PAD = 12.0, 40


def _check_q(num: int, den: int) -> None:
    if not (isinstance(num, int) and isinstance(den, int)) or not 0 < num < den:
        raise CepkitError(f"percentile: need integers 0 < num < den, got {num}/{den}")


def _count_of(n, what: str) -> int:
    """n as a plain int >= 0 (numpy integers too: counts often come from arrays)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise CepkitError(f"{what}: the sample count must be an integer >= 0, got {n!r}")
    return int(n)


def nearest_rank_of(n: int, num: int, den: int) -> int:
    """ceil(num * n / den), at least 1: the 1-based rank of the nearest-rank num/den percentile."""
    return max(1, -(-num * n // den))


def maximum_below(num: int, den: int) -> int:
    """The largest n for which the nearest-rank num/den percentile of n values is their maximum.

    ceil(q·n) = n  <=>  q·n > n − 1  <=>  n < 1 / (1 − q): 99 for p99, 999 for p99.9.
    """
    _check_q(num, den)
    return -(-den // (den - num)) - 1


@lru_cache(maxsize=None)
def min_count(num: int, den: int, alpha: Fraction) -> int:
    """The smallest n with (num/den)^n <= alpha, exactly (rational arithmetic, no rounding).

    With q = num/den, (num/den)^n is P(all n samples lie below the q-quantile): the chance that
    x(n) misses it. So min_count(q) at alpha = 2.5 % is the n from which the sample maximum can be
    an upper bound (368 for p99); min_count(1 - q) the same for the minimum as a lower bound.
    """
    _check_q(num, den)
    alpha = Fraction(alpha)
    n = max(1, math.ceil(math.log(alpha) / math.log(num / den)))   # a float guess, then exact steps
    while n > 1 and Fraction(num, den) ** (n - 1) <= alpha:
        n -= 1
    while Fraction(num, den) ** n > alpha:
        n += 1
    return n


def _binomial_cdf(n: int, p: float) -> tuple[int, np.ndarray]:
    """(k0, cdf) with cdf[i] = P(B <= k0 + i) for B ~ Binomial(n, p), over a window around n·p
    that holds all but < 1e-30 of the mass on either side."""
    # Imported here: scipy.stats takes about a second to import, and most importers of this module
    # (the reports, the CLI's wording of percentiles) never compute an interval.
    from scipy.stats import binom

    sd = math.sqrt(n * p * (1 - p))
    k0 = max(0, math.floor(n * p - _WINDOW_SD * sd) - _WINDOW_PAD)
    k1 = min(n, math.ceil(n * p + _WINDOW_SD * sd) + _WINDOW_PAD)
    return k0, binom.cdf(np.arange(k0, k1 + 1), n, p)


def ci_ranks(n: int, num: int, den: int) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the 95 % confidence interval [x(l), x(u)] of the num/den quantile
    of n samples; None for a side that cannot be bounded (the interval is open there).

    B ~ Binomial(n, q) counts the samples below the quantile Q; for any distribution (ties
    included) P(x(l) > Q) <= P(B <= l − 1) and P(x(u) < Q) <= P(B >= u). The rule:

    - a side is *available* when its extreme sample misses Q with probability <= 2.5 %:
      the lower side when (1 − q)^n <= 2.5 %, the upper side when q^n <= 2.5 %;
    - both available: equal tails, l the largest rank with P(B <= l − 1) <= 2.5 %, u the
      smallest with P(B >= u) <= 2.5 %: a two-sided interval;
    - one available: that side alone, as a one-sided 95 % bound (its tail <= 5 %);
    - none: a one-sided 95 % bound on the lower side when q >= 1/2 (upper when q < 1/2) if its
      extreme sample misses Q with probability <= 5 %, else no bound at all.
    """
    _check_q(num, den)
    return _ci_ranks(_count_of(n, "percentile interval"), num, den)


@lru_cache(maxsize=4096)
def _ci_ranks(n: int, num: int, den: int) -> tuple[int | None, int | None]:
    if n == 0:
        return None, None
    half = ALPHA / 2
    lower = n >= min_count(den - num, den, half)
    upper = n >= min_count(num, den, half)
    if lower and upper:
        tails = (half, half)
    elif lower or upper:
        tails = (ALPHA if lower else None, ALPHA if upper else None)
    elif 2 * num >= den:
        tails = (ALPHA if n >= min_count(den - num, den, ALPHA) else None, None)
    else:
        tails = (None, ALPHA if n >= min_count(num, den, ALPHA) else None)
    k0, cdf = _binomial_cdf(n, num / den)
    low = high = None
    if tails[0] is not None:
        # l − 1 = the largest k with P(B <= k) <= tail; availability was decided exactly above,
        # so a CDF a rounding error above the tail at k = 0 still gives rank 1.
        low = max(1, k0 + int(np.searchsorted(cdf, float(tails[0]), side="right")))
    if tails[1] is not None:
        # u − 1 = the smallest k with P(B <= k) >= 1 − tail.
        high = min(n, k0 + int(np.searchsorted(cdf, float(1 - tails[1]), side="left")) + 1)
    r = nearest_rank_of(n, num, den)
    if (low is not None and low > r) or (high is not None and high < r):
        raise AssertionError(f"interval ranks {low}..{high} miss the nearest rank {r} (n={n}, q={num}/{den})")
    return low, high


def ci_values(sorted_values: np.ndarray, num: int, den: int) -> tuple:
    """(x(l), x(u)) of ascending `sorted_values` for the num/den quantile; None where open."""
    low, high = ci_ranks(len(sorted_values), num, den)
    return (None if low is None else sorted_values[low - 1].item(),
            None if high is None else sorted_values[high - 1].item())


@dataclass(frozen=True)
class Percentile:
    """A measured nearest-rank percentile: `name` (a key of PERCENTILES), the sample count `n`,
    the value, and its 95 % interval [low, high] (None on an open side, as `ci_ranks` says)."""

    name: str
    n: int
    value: float | None
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if self.name not in PERCENTILES:
            raise CepkitError(f"percentile: unknown name {self.name!r} (known: {', '.join(PERCENTILES)})")
        object.__setattr__(self, "n", _count_of(self.n, f"percentile {self.name}"))
        if (self.value is None) != (self.n == 0):
            raise CepkitError(f"percentile {self.name}: a value needs samples and samples a value "
                              f"(n={self.n}, value={self.value})")
        ranks = ci_ranks(self.n, *PERCENTILES[self.name])
        if (self.low is None, self.high is None) != (ranks[0] is None, ranks[1] is None):
            raise CepkitError(f"percentile {self.name}: {self.n} samples give a 95 % interval with ranks {ranks}, "
                              f"but the bounds given are {self.low}, {self.high}")
        if (self.low is not None and self.low > self.value) or (self.high is not None and self.high < self.value):
            raise CepkitError(f"percentile {self.name}: {self.value} lies outside its interval "
                              f"[{self.low}, {self.high}]")

    @property
    def label(self) -> str:
        return LABELS[self.name]

    @property
    def is_maximum(self) -> bool:
        """True when n is so small that the nearest-rank percentile is the largest sample."""
        return self.n >= 1 and self.n <= maximum_below(*PERCENTILES[self.name])

    @property
    def closed_from(self) -> int:
        """The sample count from which both sides of the interval are bounded."""
        num, den = PERCENTILES[self.name]
        return max(min_count(num, den, ALPHA / 2), min_count(den - num, den, ALPHA / 2))


def interval_text(low, high, fmt=lambda v: f"{v:,}", unit: str = "") -> str:
    """'a–b unit', '≥ a unit', '≤ b unit' or 'unbounded' for an interval with open sides as None."""
    u = f" {unit}" if unit else ""
    if low is not None and high is not None:
        return f"{fmt(low)}–{fmt(high)}{u}"
    if low is not None:
        return f"≥ {fmt(low)}{u}"
    if high is not None:
        return f"≤ {fmt(high)}{u}"
    return "unbounded"


def _singular(noun: str) -> str:
    return noun[:-1] if noun.endswith("s") else noun


def _count(n: int, noun: str) -> str:
    return f"{n:,} {_singular(noun) if n == 1 else noun}"


def percentile_note(p: Percentile, noun: str = "samples") -> str:
    """What the sample count means for the percentile: '6 orders', or the small-sample warning
    'the maximum of 6 orders: too few for a p99' (n <= 99 for a p99)."""
    if p.n == 0:
        return f"no {noun}"
    if p.is_maximum:
        which = f"the only {_singular(noun)}" if p.n == 1 else f"the maximum of {_count(p.n, noun)}"
        return f"{which}: too few for a {p.label}"
    return _count(p.n, noun)


def percentile_text(p: Percentile, noun: str = "samples", unit: str = "ms", short: bool = False) -> str:
    """THE wording of a percentile, used wherever one is shown (see the module docstring).

    Long: 'p99 = 752 ms (the maximum of 6 orders: too few for a p99; 95 % CI ≥ 402 ms)',
    'p99 = 310 ms (250 orders; 95 % CI ≥ 280 ms, no upper bound below 368 orders)',
    'p99 = 310 ms (1,000 orders; 95 % CI 290–340 ms)'. Short, for a table cell or a legend whose
    header names the percentile: '752 ms (max of 6: too few; CI ≥ 402)', '310 ms (CI 290–340)'
    (unit="" when the column names the unit too).
    """
    fmt = lambda v: f"{v:,.0f}" if isinstance(v, float) else f"{v:,}"  # noqa: E731
    if p.n == 0:
        return "–" if short else f"{p.label}: none ({percentile_note(p, noun)})"
    u = f" {unit}" if unit else ""
    if short:
        ci = interval_text(p.low, p.high, fmt)
        head = f"max of {p.n:,}: too few; " if p.is_maximum else ""
        return f"{fmt(p.value)}{u} ({head}CI {ci})"
    ci = interval_text(p.low, p.high, fmt, unit)
    missing = "lower" if p.low is None else "upper" if p.high is None else None
    if missing and not p.is_maximum and (p.low is not None or p.high is not None):
        ci += f", no {missing} bound below {_count(p.closed_from, noun)}"
    return f"{p.label} = {fmt(p.value)}{u} ({percentile_note(p, noun)}; 95 % CI {ci})"
