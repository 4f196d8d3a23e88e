"""The Pairs strategies spec (thesis B.2, Table B.1, Figure B.2): one `PairsStrategy` per strategy.

Value sets are Table B.1's; units and the readings where the thesis is loose are pinned in
`specs/STRATEGIES.md` (availableFunds in integer cents, periodLength in seconds, stopLossPerc a
fraction). A `StrategySet` also enforces the scenario rules of 7.3.1: five strategies per user,
at most ten strategies per correlated pair, and unique aliases.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from kit.config import MAX_SCALE_FACTOR
from kit.scale import MAX_STRATEGIES_PER_PAIR, STRATEGIES_PER_USER
from kit.workload.aux import symbol_problem
from kit.workload.common import as_tuple, integer, need, one_of

# Table B.1. Funds are 10k, 20k and 50k dollars written in cents (Figure B.2 shows 1000000).
AVAILABLE_FUNDS_CENTS = (1_000_000, 2_000_000, 5_000_000)
PERIOD_LENGTHS_S = (5, 10, 20, 30, 60)
NUM_PERIODS = (5, 6, 7, 8, 9, 10, 15, 20, 25, 30)
BANDS_MULTIPLIERS = (1.2, 1.5, 1.8, 2.0)
STOP_LOSS_PERCS = (0.1, 0.2, 0.3)

ALIAS_RE = re.compile(r"st_[0-9]{5,}\Z")
USER_RE = re.compile(r"u_[0-9]{5,}\Z")


def strategy_alias(number: int) -> str:
    """`st_00001` for the first strategy (Figure B.2's spelling, see STRATEGIES.md)."""
    return f"st_{number:05d}"


def user_name(number: int) -> str:
    return f"u_{number:05d}"


@dataclass(frozen=True)
class PairsStrategy:
    """One strategy: Figure B.2's attributes plus the user who owns it."""

    alias: str
    user: str
    available_funds: int          # cents
    symbol1: str
    symbol2: str
    period_length: int            # seconds
    num_periods: int
    bands_multiplier: float
    stop_loss_perc: float         # a fraction: 0.1 is 10%

    def __post_init__(self) -> None:
        need(isinstance(self.alias, str) and bool(ALIAS_RE.match(self.alias)),
             f"alias must look like st_00001, got {self.alias!r}")
        need(isinstance(self.user, str) and bool(USER_RE.match(self.user)),
             f"user must look like u_00001, got {self.user!r}")
        for name, sym in (("symbol1", self.symbol1), ("symbol2", self.symbol2)):
            why = symbol_problem(sym)      # the one rule every tool applies (kit.workload.aux)
            need(why is None, f"{name}: {why}")
        need(self.symbol1 != self.symbol2, f"symbol1 and symbol2 must differ, both are {self.symbol1}")
        one_of("availableFunds", self.available_funds, AVAILABLE_FUNDS_CENTS)
        one_of("periodLength", self.period_length, PERIOD_LENGTHS_S)
        one_of("numPeriods", self.num_periods, NUM_PERIODS)
        one_of("bandsMultiplier", self.bands_multiplier, BANDS_MULTIPLIERS)
        one_of("stopLossPerc", self.stop_loss_perc, STOP_LOSS_PERCS)

    @property
    def pair(self) -> tuple[str, str]:
        return (self.symbol1, self.symbol2)

    @property
    def period_length_ms(self) -> int:
        return self.period_length * 1000


@dataclass(frozen=True)
class StrategySet:
    """The strategies file: the scale factor and seed it was generated for, and the strategies in order."""

    scale_factor: int
    seed: int
    strategies: tuple[PairsStrategy, ...]

    def __post_init__(self) -> None:
        as_tuple(self, "strategies")
        integer("scaleFactor", self.scale_factor, 1)
        need(self.scale_factor <= MAX_SCALE_FACTOR, f"scaleFactor must be <= {MAX_SCALE_FACTOR}, got {self.scale_factor}")
        integer("seed", self.seed, 0)
        need(len(self.strategies) > 0, "a strategies file needs at least one PairsStrategy")
        seen: set[str] = set()
        per_user: Counter[str] = Counter()
        per_pair: Counter[frozenset[str]] = Counter()
        for s in self.strategies:
            need(s.alias not in seen, f"duplicate alias {s.alias}", s.alias)
            seen.add(s.alias)
            per_user[s.user] += 1
            need(per_user[s.user] <= STRATEGIES_PER_USER,
                 f"user {s.user} has more than {STRATEGIES_PER_USER} strategies", s.alias)
            per_pair[frozenset(s.pair)] += 1
            need(per_pair[frozenset(s.pair)] <= MAX_STRATEGIES_PER_PAIR,
                 f"pair {s.symbol1}/{s.symbol2} has more than {MAX_STRATEGIES_PER_PAIR} strategies", s.alias)

    def __len__(self) -> int:
        return len(self.strategies)

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.user for s in self.strategies))

    def by_alias(self, alias: str) -> PairsStrategy:
        for s in self.strategies:
            if s.alias == alias:
                return s
        raise KeyError(alias)


def check_against_aux(strategy: PairsStrategy, aux) -> None:
    """The strategy must watch a correlated pair of the dataset described by `aux` (a `PairsAux`)."""
    for name, sym in (("symbol1", strategy.symbol1), ("symbol2", strategy.symbol2)):
        need(sym in aux.symbol_set, f"{name} {sym} is not a symbol of the auxiliary file")
    need(frozenset(strategy.pair) in aux.pair_set,
         f"{strategy.symbol1}/{strategy.symbol2} is not a correlated pair of the auxiliary file")
