"""Generating the Pairs strategies of a dataset (thesis 7.3.1, 7.3.5, B.2).

Assignment (specs/STRATEGIES.md): strategies fill the markets in order. Within a market, rounds of
one strategy per correlated pair follow each other (each round visits the pairs in a fresh random
order) until every pair has `max_strategies_per_pair` strategies; then the next market starts.
With the default scale model (25 pairs per market, 25 strategies per scale-factor step, 10 per
pair) that is exactly "a new market every ten scale-factor steps". Users own five consecutive
strategies, so the strategies of one pair always belong to different users. Parameters are drawn
uniformly from Table B.1's sets, redrawn when they would repeat an earlier strategy of the same
pair ("each with its own parameters").
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kit.errors import CepkitError
from kit.scale import STRATEGIES_PER_USER
from kit.workload.aux import Correlation, PairsAux
from kit.workload.strategies import (AVAILABLE_FUNDS_CENTS, BANDS_MULTIPLIERS, NUM_PERIODS, PERIOD_LENGTHS_S,
                                     STOP_LOSS_PERCS, PairsStrategy, StrategySet, strategy_alias, user_name)

_PARAMETER_SETS = (AVAILABLE_FUNDS_CENTS, PERIOD_LENGTHS_S, NUM_PERIODS, BANDS_MULTIPLIERS, STOP_LOSS_PERCS)
# Table B.1 allows 3*5*10*4*3 = 1800 combinations; ten per pair rarely collide, so a few redraws do.
_MAX_REDRAWS = 1000


def assign_pairs(aux: PairsAux, rng: np.random.Generator) -> list[Correlation]:
    """The correlated pair of each of the aux file's `num_strategies` strategies, in strategy order."""
    count = aux.num_strategies
    capacity = len(aux.correlations) * aux.max_strategies_per_pair
    if count > capacity:        # before anything is sized by the count
        raise CepkitError(f"{count} strategies do not fit the dataset: {len(aux.correlations)} correlated pairs "
                          f"x {aux.max_strategies_per_pair} strategies per pair = {capacity}; ask for at most "
                          f"{capacity} (querygen pairs --count, config pairs.strategies)")
    out: list[Correlation] = []
    for market in range(aux.markets):
        pairs = aux.market_pairs(market)
        for _ in range(aux.max_strategies_per_pair):
            if len(out) >= count or not pairs:
                break
            out.extend(pairs[i] for i in rng.permutation(len(pairs))[: count - len(out)])
    if len(out) < count:
        capacity = sum(len(aux.market_pairs(m)) for m in range(aux.markets)) * aux.max_strategies_per_pair
        raise CepkitError(f"{count} strategies do not fit the dataset: {len(aux.correlations)} correlated pairs "
                          f"x {aux.max_strategies_per_pair} strategies per pair = {capacity}; ask for at most "
                          f"{capacity} (querygen pairs --count, config pairs.strategies)")
    return out


def _draw(rng: np.random.Generator) -> tuple:
    return tuple(values[int(rng.integers(len(values)))] for values in _PARAMETER_SETS)


def generate_strategies(aux: PairsAux, rng: np.random.Generator, *, seed: int) -> StrategySet:
    """All strategies for the dataset `aux` describes; `seed` is recorded in the file (it seeded `rng`)."""
    used: dict[frozenset[str], set[tuple]] = {}
    strategies = []
    for i, pair in enumerate(assign_pairs(aux, rng)):
        taken = used.setdefault(frozenset((pair.symbol1, pair.symbol2)), set())
        for _ in range(_MAX_REDRAWS):
            params = _draw(rng)
            if params not in taken:
                break
        taken.add(params)
        funds, period, num_periods, bands, stop_loss = params
        strategies.append(PairsStrategy(alias=strategy_alias(i + 1), user=user_name(i // STRATEGIES_PER_USER + 1),
                                        available_funds=funds, symbol1=pair.symbol1, symbol2=pair.symbol2,
                                        period_length=period, num_periods=num_periods, bands_multiplier=bands,
                                        stop_loss_perc=stop_loss))
    return StrategySet(scale_factor=aux.scale_factor, seed=seed, strategies=tuple(strategies))


def with_strategy_count(aux: PairsAux, count: int | None) -> PairsAux:
    """`aux` asking for `count` strategies instead of its own `num_strategies` (None: unchanged)."""
    if count is None:
        return aux
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise CepkitError(f"strategy count must be a positive integer, got {count!r}")
    capacity = len(aux.correlations) * aux.max_strategies_per_pair
    if count > capacity:
        raise CepkitError(f"{count} strategies do not fit the dataset: {len(aux.correlations)} correlated pairs "
                          f"x {aux.max_strategies_per_pair} strategies per pair = {capacity}; ask for at most "
                          f"{capacity} (querygen pairs --count, config pairs.strategies)")
    return dataclasses.replace(aux, num_strategies=count)


def strategies_for(aux: PairsAux, seed: int) -> StrategySet:
    """Convenience: the strategies for `aux` drawn with `numpy.random.default_rng(seed)`."""
    return generate_strategies(aux, np.random.default_rng(seed), seed=seed)
