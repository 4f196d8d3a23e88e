"""Pairs strategies: counts and pair coverage per scale factor, Table B.1's values, determinism."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from datagen.pairs import make_plan, pairs_aux
from kit.config import PairsConfig
from kit.errors import CepkitError
from kit.workload import (AVAILABLE_FUNDS_CENTS, BANDS_MULTIPLIERS, NUM_PERIODS, PERIOD_LENGTHS_S, STOP_LOSS_PERCS,
                          parse_spec, to_xml)
from kit.workload.aux import aux_document, aux_from_document
from querygen.strategies import assign_pairs, generate_strategies, strategies_for, with_strategy_count

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)


def aux_for(sf: int, **changes):
    return aux_from_document(aux_document(pairs_aux(make_plan(PairsConfig(scale_factor=sf, **changes)))))


@pytest.fixture(scope="module")
def auxes():
    return {sf: aux_for(sf) for sf in (1, 2, 10, 11, 15)}


# sf -> (strategies per market, strategies per pair in each market)
EXPECTED = {1: ([25], [1]), 2: ([50], [2]), 10: ([250], [10]), 11: ([250, 25], [10, 1]),
            15: ([250, 125], [10, 5])}


@pytest.mark.parametrize("sf", sorted(EXPECTED))
def test_counts_and_pair_coverage(auxes, sf):
    aux = auxes[sf]
    spec = strategies_for(aux, 42)
    per_market, per_pair = EXPECTED[sf]
    market_of = dict(aux.symbols)
    assert len(spec) == 25 * sf
    assert [Counter(market_of[s.symbol1] for s in spec.strategies)[m] for m in range(aux.markets)] == per_market
    pair_counts = Counter(frozenset(s.pair) for s in spec.strategies)
    for m, expected in enumerate(per_pair):
        pairs = aux.market_pairs(m)
        assert len(pairs) == 25
        # every correlated pair of the market is watched, and all equally often
        assert [pair_counts[frozenset((c.symbol1, c.symbol2))] for c in pairs] == [expected] * 25
    assert set(pair_counts) <= aux.pair_set
    # 5 strategies per user, users numbered in order
    users = Counter(s.user for s in spec.strategies)
    assert len(users) == 5 * sf and set(users.values()) == {5}
    assert [s.alias for s in spec.strategies] == [f"st_{i:05d}" for i in range(1, 25 * sf + 1)]
    assert spec.strategies[5].user == "u_00002" and spec.strategies[-1].user == f"u_{5 * sf:05d}"


def test_rounds_cover_each_pair_once_before_repeating(auxes):
    aux = auxes[15]
    spec = strategies_for(aux, 3)
    market_pairs = [{frozenset((c.symbol1, c.symbol2)) for c in aux.market_pairs(m)} for m in range(2)]
    for start in range(0, 375, 25):
        block = {frozenset(s.pair) for s in spec.strategies[start:start + 25]}
        assert block == market_pairs[0 if start < 250 else 1], start
    # rounds visit the pairs in a fresh order
    assert [s.pair for s in spec.strategies[:25]] != [s.pair for s in spec.strategies[25:50]]


def test_pair_strategies_belong_to_different_users_and_differ(auxes):
    spec = strategies_for(auxes[10], 11)
    by_pair: dict[frozenset, list] = {}
    for s in spec.strategies:
        by_pair.setdefault(frozenset(s.pair), []).append(s)
    assert len(by_pair) == 25
    for strategies in by_pair.values():
        assert len({s.user for s in strategies}) == 10
        params = {(s.available_funds, s.period_length, s.num_periods, s.bands_multiplier, s.stop_loss_perc)
                  for s in strategies}
        assert len(params) == 10


def test_parameters_come_only_from_table_b1(auxes):
    assert AVAILABLE_FUNDS_CENTS == (1_000_000, 2_000_000, 5_000_000)
    assert PERIOD_LENGTHS_S == (5, 10, 20, 30, 60)
    assert NUM_PERIODS == (5, 6, 7, 8, 9, 10, 15, 20, 25, 30)
    assert BANDS_MULTIPLIERS == (1.2, 1.5, 1.8, 2.0)
    assert STOP_LOSS_PERCS == (0.1, 0.2, 0.3)
    spec = strategies_for(auxes[15], 42)
    seen = {name: Counter(getattr(s, name) for s in spec.strategies)
            for name in ("available_funds", "period_length", "num_periods", "bands_multiplier", "stop_loss_perc")}
    # 375 uniform draws hit every value of every set, and nothing else
    assert set(seen["available_funds"]) == set(AVAILABLE_FUNDS_CENTS)
    assert set(seen["period_length"]) == set(PERIOD_LENGTHS_S)
    assert set(seen["num_periods"]) == set(NUM_PERIODS)
    assert set(seen["bands_multiplier"]) == set(BANDS_MULTIPLIERS)
    assert set(seen["stop_loss_perc"]) == set(STOP_LOSS_PERCS)
    # roughly uniform: each of the 3 funds values about 125 times
    assert all(90 <= n <= 160 for n in seen["available_funds"].values())


def test_deterministic_for_a_seed_and_different_for_another(auxes):
    aux = auxes[2]
    a = to_xml(strategies_for(aux, 7))
    assert a == to_xml(strategies_for(aux, 7))
    assert a == to_xml(generate_strategies(aux, np.random.default_rng(7), seed=7))
    assert a != to_xml(strategies_for(aux, 8))
    assert b'seed="7"' in a.splitlines()[1] and b'scaleFactor="2"' in a.splitlines()[1]
    # the aux file's own seed drives the symbols, not the strategies: same pairs, new draws
    assert parse_spec(a, "a.xml", aux=aux) == strategies_for(aux, 7)


def test_too_many_strategies_for_the_pairs_is_an_error():
    # The config refuses it (tests/kit/test_config.py), the aux model too (an aux file edited by
    # hand: below), and --count.
    with pytest.raises(CepkitError, match=r"251 strategies do not fit the dataset: 25 correlated pairs x 10 .* = 250"):
        strategies_for(with_strategy_count(aux_for(1), 251), 1)


def test_every_config_in_range_gives_an_aux_the_query_generator_accepts():
    # Issue 27: symbols = 2 or 3 derived zero pairs; few symbols over many markets, or 25 strategies
    # per SF on one pair, wrote an aux file the query generator then refused.
    for sf, changes in [(1, {"symbols": 2}), (1, {"symbols": 3}), (21, {"symbols": 4}), (95, {"symbols": 11}),
                        (1, {"symbols": 3, "strategies": 10}), (11, {"symbols": 6, "correlations": 2})]:
        aux = aux_for(sf, **changes)
        assert len(strategies_for(aux, 1)) == aux.num_strategies >= 1


@pytest.mark.parametrize("change, message", [
    (lambda d: d["symbols"][0].update(symbol="AB CD"), "symbols: 'AB CD' is not a ticker symbol"),
    (lambda d: d["symbols"][0].update(symbol="X" * 33), "is not a ticker symbol (1 to 32 characters"),
    (lambda d: d.update(scale_factor=10_001), "scale_factor must be <= 10000, got 10001"),
])
def test_aux_file_holds_only_what_the_strategies_file_can(change, message):
    # The one rule (kit.workload.aux): an aux file the strategies file could not be written from is refused.
    doc = aux_document(aux_for(1))
    change(doc)
    with pytest.raises(CepkitError, match=re.escape(message)):
        aux_from_document(doc)


def test_overridden_pair_count_follows_the_same_rule():
    aux = aux_for(1, correlations=30, strategies=45)
    pairs = assign_pairs(aux, np.random.default_rng(0))
    counts = Counter(frozenset((c.symbol1, c.symbol2)) for c in pairs)
    assert len(counts) == 30 and sorted(Counter(counts.values()).items()) == [(1, 15), (2, 15)]
    assert {frozenset((c.symbol1, c.symbol2)) for c in pairs[:30]} == aux.pair_set


@pytest.mark.parametrize("changes, message", [
    ({"markets": 10**12}, r"markets is 1000000000000 but only 100 symbols are listed"),
    ({"max_strategies_per_pair": 10**15}, r"max_strategies_per_pair must be <= 10, got 1000000000000000"),
    ({"num_strategies": 10**13}, r"num_strategies is 10000000000000 but the 25 correlated pairs listed x 10 "
                                 r"strategies per pair hold at most 250"),
])
def test_a_count_in_the_aux_file_is_checked_against_the_file_before_it_sizes_work(tmp_path, changes, message):
    """Issue 45, class: a number from an input file that sizes the query generator's loops is checked
    against the rest of that file first (before: `markets` = 10^12 looped over markets for good, and
    a huge `max_strategies_per_pair` with `num_strategies` to match grew the pair list without end);
    `cepkit querygen pairs` refuses it at once, in one line naming the file, exit 2."""
    doc = aux_document(pairs_aux(make_plan(PairsConfig(scale_factor=1))))
    doc.update({"num_strategies": 10**13} if "max_strategies_per_pair" in changes else {}, **changes)
    path = tmp_path / "pairs-aux.json"
    path.write_text(json.dumps(doc))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "querygen", "pairs", "--aux", str(path),
                           "--out", str(tmp_path / "s.xml")], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert re.search(rf"{re.escape(str(path))}: {message}", line), line
    assert time.monotonic() - started < 30 and not (tmp_path / "s.xml").exists()


def test_more_strategies_than_the_pairs_hold_are_refused_before_any_is_assigned():
    with pytest.raises(CepkitError, match=r"^num_strategies is 10000000000000 but the 25 correlated pairs listed x "
                                          r"10 strategies per pair hold at most 250"):
        dataclasses.replace(aux_for(1), num_strategies=10**13)
    with pytest.raises(CepkitError, match=r"^10000000000000 strategies do not fit the dataset: .* at most 250 "
                                          r"\(querygen pairs --count"):
        with_strategy_count(aux_for(1), 10**13)
