"""The Pairs scale-factor model (thesis 7.3.5, B.1, Appendix A).

Scaling rules: every started block of ten scale-factor steps is a market of 100 symbols, a
quarter of which form correlated pairs (so half the symbols are monitored); there are 25
strategies per scale-factor step; the basis input rate is 5,000 events/s per market and the
peak rate is 1.5 times the basis. Counts a config leaves unset are derived within what the
given ones hold (at least one pair, a pair within one market, at most ten strategies per pair), so
a dataset generated from any accepted config is one the query generator accepts.

`load(sf)` is Appendix A's work-per-second figure (with the constant 25*lambda removed) and
`pscore` divides it by the 99th-percentile MarketOrder latency in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kit.errors import CepkitError

SYMBOLS_PER_MARKET = 100
STRATEGIES_PER_SF = 25
STRATEGIES_PER_USER = 5
BASIS_RATE_PER_MARKET_EPS = 5000.0
PEAK_FACTOR = 1.5
MAX_STRATEGIES_PER_PAIR = 10


def markets_for(scale_factor: int) -> int:
    """Number of markets: ceil(SF / 10)."""
    _check_sf(scale_factor)
    return math.ceil(scale_factor / 10)


@dataclass(frozen=True)
class ScaleModel:
    """Workload sizes for one scale factor; `None` overrides in `from_sf` mean 'derive'."""

    scale_factor: int
    markets: int
    symbols: int
    correlations: int
    strategies: int
    users: int
    basis_rate_eps: float
    peak_rate_eps: float

    def __post_init__(self) -> None:
        _check_sf(self.scale_factor)
        if self.markets < 1:
            raise CepkitError(f"markets must be >= 1, got {self.markets}")
        if self.symbols < 2:
            raise CepkitError(f"symbols must be >= 2, got {self.symbols}")
        capacity = pair_capacity(self.symbols, self.markets)
        if capacity < 1:
            raise CepkitError(f"symbols: {self.symbols} symbols over {self.markets} markets leave no market with "
                              f"two symbols to pair; give at least {self.markets + 1}")
        if not 1 <= self.correlations <= capacity:
            raise CepkitError(f"correlations must be in [1, {capacity}] ({self.symbols} symbols over "
                              f"{self.markets} market(s), a pair within one market), got {self.correlations}")
        if self.strategies < 1:
            raise CepkitError(f"strategies must be >= 1, got {self.strategies}")
        # The query generator assigns at most MAX_STRATEGIES_PER_PAIR strategies to a pair: a count
        # the dataset cannot hold is refused here, not by the next command.
        if self.strategies > self.correlations * MAX_STRATEGIES_PER_PAIR:
            raise CepkitError(f"strategies must be <= {self.correlations * MAX_STRATEGIES_PER_PAIR} "
                              f"({self.correlations} correlated pairs x {MAX_STRATEGIES_PER_PAIR} strategies per "
                              f"pair), got {self.strategies}")
        if not (self.basis_rate_eps > 0 and self.peak_rate_eps >= self.basis_rate_eps):
            raise CepkitError(
                f"rates must satisfy 0 < basis <= peak, got basis={self.basis_rate_eps} peak={self.peak_rate_eps}")

    @classmethod
    def from_sf(cls, scale_factor: int, *, symbols: int | None = None,
                correlations: int | None = None, strategies: int | None = None,
                basis_rate_eps: float | None = None, peak_factor: float = PEAK_FACTOR) -> "ScaleModel":
        markets = markets_for(scale_factor)
        n_symbols = SYMBOLS_PER_MARKET * markets if symbols is None else symbols
        # A quarter of the symbols, at least one pair and no more than the markets can hold (a
        # few symbols over many markets).
        n_corr = (min(max(1, n_symbols // 4), pair_capacity(n_symbols, markets)) if correlations is None
                  else correlations)
        # 25 per scale-factor step, no more than the pairs hold (as for a converted dataset).
        n_strat = (min(STRATEGIES_PER_SF * scale_factor, MAX_STRATEGIES_PER_PAIR * n_corr) if strategies is None
                   else strategies)
        basis = BASIS_RATE_PER_MARKET_EPS * markets if basis_rate_eps is None else float(basis_rate_eps)
        return cls(scale_factor=scale_factor, markets=markets, symbols=n_symbols,
                   correlations=n_corr, strategies=n_strat,
                   users=math.ceil(n_strat / STRATEGIES_PER_USER),
                   basis_rate_eps=basis, peak_rate_eps=basis * peak_factor)


def pair_capacity(symbols: int, markets: int) -> int:
    """How many correlated pairs `symbols` can form when split into `markets` contiguous blocks
    as even as possible (numpy.array_split, as datagen does): a pair lies within one market."""
    q, r = divmod(symbols, markets)
    return r * ((q + 1) // 2) + (markets - r) * (q // 2)


def load(scale_factor: int) -> int:
    """Appendix A: SF*M + 2*(10*(M-1) + (SF-1) mod 10 + 1), in work units per second."""
    m = markets_for(scale_factor)
    return scale_factor * m + 2 * (10 * (m - 1) + (scale_factor - 1) % 10 + 1)


def pscore(scale_factor: int, p99_latency_s: float) -> float:
    """pscore = load(SF) / p99 MarketOrder latency (seconds), in work/s^2."""
    if not p99_latency_s > 0:
        raise CepkitError(f"p99 latency must be > 0 seconds, got {p99_latency_s}")
    return load(scale_factor) / p99_latency_s


def _check_sf(scale_factor: int) -> None:
    if isinstance(scale_factor, bool) or not isinstance(scale_factor, int) or scale_factor < 1:
        raise CepkitError(f"scale factor must be a positive integer, got {scale_factor!r}")
