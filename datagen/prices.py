"""Tick prices from geometric Brownian motions, correlated within symbol pairs.

Symbols tick round-robin, so the k-th round gives every symbol one tick. Each symbol's log price
moves by (mu - sigma^2/2) dt + sigma sqrt(dt) Z between its consecutive ticks, with dt the simulated
time (hours) since its previous tick. For a correlated pair (a, b) the normal draws of the same
round are mixed, Z_b = rho Z_a + sqrt(1 - rho^2) E, so their log-returns correlate at rho;
uncorrelated symbols use independent draws. Prices are rounded to whole cents (at least 1).
"""

from __future__ import annotations

import numpy as np

MS_PER_HOUR = 3_600_000.0
MAX_PRICE_CENTS = 2**31 - 1


class CorrelatedGBM:
    """Price state of all symbols; `step_rounds` advances it by whole rounds of ticks."""

    def __init__(self, n_symbols: int, pairs: np.ndarray, rng: np.random.Generator, *,
                 correlation: float, drift_per_hour: float, volatility_per_hour: float,
                 initial_min_cents: int, initial_max_cents: int):
        self.n = n_symbols
        self.a = np.asarray(pairs[:, 0], dtype=np.int64) if len(pairs) else np.empty(0, np.int64)
        self.b = np.asarray(pairs[:, 1], dtype=np.int64) if len(pairs) else np.empty(0, np.int64)
        self.rng = rng
        self.rho = correlation
        self.mu = drift_per_hour
        self.sigma = volatility_per_hour
        start = rng.integers(initial_min_cents, initial_max_cents + 1, size=n_symbols)
        self.log_price = np.log(start.astype(np.float64))
        self.last_t_ms = np.zeros(n_symbols)

    def step_rounds(self, t_ms: np.ndarray) -> np.ndarray:
        """Prices (int32 cents) for ticks at `t_ms`, which must start at a round boundary.

        `t_ms` holds consecutive ticks in symbol order 0..n-1, 0..n-1, ...; a last partial round
        is allowed only at the very end of the run.
        """
        m = len(t_ms)
        rounds = -(-m // self.n)
        t = np.full(rounds * self.n, np.nan)
        t[:m] = t_ms
        t = t.reshape(rounds, self.n)
        prev = np.vstack([self.last_t_ms[None, :], t[:-1]])
        dt_h = (t - prev) / MS_PER_HOUR
        z = self.rng.standard_normal((rounds, self.n))
        if len(self.a):
            z[:, self.b] = self.rho * z[:, self.a] + np.sqrt(1.0 - self.rho**2) * z[:, self.b]
        incr = (self.mu - 0.5 * self.sigma**2) * dt_h + self.sigma * np.sqrt(dt_h) * z
        logp = self.log_price[None, :] + np.cumsum(incr, axis=0)
        full = rounds if m % self.n == 0 else rounds - 1
        if full:
            self.log_price = logp[full - 1].copy()
            self.last_t_ms = t[full - 1].copy()
        cents = np.rint(np.exp(logp.reshape(-1)[:m]))
        return np.clip(cents, 1, MAX_PRICE_CENTS).astype(np.int32)
