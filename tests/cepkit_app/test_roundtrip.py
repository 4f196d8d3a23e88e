"""The kit's own outputs round-trip: what one cepkit command writes, the next accepts (issue 27).

Two chains, over generated inputs (hypothesis), each command run in-process through the CLI:

- `datagen convert` of a ticks CSV (generated symbols, prices in cents or dollars, times, sizes)
  with a correlations CSV -> `querygen pairs` -> `querygen check --aux` -> `translate pairs`
  (every engine);
- `datagen pairs` with a small generated config (scale factor, symbols, correlations,
  strategies, each in its documented range) -> `querygen pairs` -> `querygen check --aux`.

The property: the first command either refuses the input (exit 2, one line) or succeeds, and then
every command after it succeeds. The inputs mix values every tool takes with values near and past
the shared rules (symbols that are not ticker symbols, scale factors past the config's range), so a
tool that accepts what the next refuses fails the test. Budgets as tests/fuzz.py: a few examples by
default, more under `-m slow`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kit.config import MAX_SCALE_FACTOR
from kit.engines import ENGINE_NAMES
from kit.scale import MAX_STRATEGIES_PER_PAIR, markets_for, pair_capacity
from tests.fuzz import fuzz_settings, run_cli, slow_settings

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

# Few examples by default: each runs four to six commands (a translation is ~0.2 s).
ROUNDTRIP_EXAMPLES = 8
default_settings = settings(fuzz_settings, max_examples=ROUNDTRIP_EXAMPLES)

# A ticker symbol as specs/DATA.md pins it (1 to 32 of A-Z a-z 0-9 . _ -), or now and then
# other text a CSV field can hold unquoted (spaces inside, punctuation, accents, too long).
TICKER = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-",
                 min_size=1, max_size=32)
OTHER = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters=',"'),
                min_size=1, max_size=40).map(str.strip).filter(bool)
SYMBOL = st.one_of(TICKER, TICKER, TICKER, OTHER)


@st.composite
def tick_inputs(draw):
    """(ticks CSV text, pairs CSV text, extra convert options)."""
    symbols = draw(st.lists(SYMBOL, min_size=2, max_size=8, unique=True))
    n_pairs = draw(st.integers(1, len(symbols) // 2))
    paired = symbols[: 2 * n_pairs]
    dollars = draw(st.booleans())
    rows = draw(st.lists(st.tuples(st.sampled_from(symbols), st.integers(1, 2**31 - 1), st.integers(1, 10_000),
                                   st.integers(0, 10_000)), min_size=1, max_size=30))
    # every paired symbol occurs in the data (the converter checks it)
    rows = [(s, 100, 1, 0) for s in paired] + rows
    t0 = draw(st.integers(0, 4_000_000_000_000))
    lines = ["symbol,price,size,tickTS"]
    for s, cents, size, dt in sorted(rows, key=lambda r: r[3]):
        price = f"{cents // 100}.{cents % 100:02d}" if dollars else str(cents)
        lines.append(f"{draw(st.sampled_from(['', ' ']))}{s},{price},{size},{t0 + dt}")
    pairs = ["symbol1,symbol2"] + [f"{paired[2 * i]},{paired[2 * i + 1]}" for i in range(n_pairs)]
    options = ["--price-unit", "dollars"] if dollars else []
    options += ["--sf", str(draw(st.one_of(st.sampled_from([1, 2, MAX_SCALE_FACTOR, MAX_SCALE_FACTOR + 1]),
                                           st.integers(1, 2 * MAX_SCALE_FACTOR))))]
    options += ["--format", draw(st.sampled_from(["parquet", "csv"]))]
    return "\n".join(lines) + "\n", "\n".join(pairs) + "\n", options


def ok(argv: list[str]) -> str:
    code, out, err = run_cli(argv)
    assert code == 0, f"cepkit {' '.join(argv)} exited {code}:\n{out}{err}"
    return out


def check_convert_chain(case) -> None:
    ticks, pairs, options = case
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "ticks.csv").write_text(ticks)
        (d / "pairs.csv").write_text(pairs)
        argv = ["datagen", "convert", str(d / "ticks.csv"), "--kind", "ticks", "--correlations",
                str(d / "pairs.csv"), *options, "--out", str(d / "ds")]
        code, out, err = run_cli(argv)
        if code != 0:       # refused: by the contract, and never after writing anything
            assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in out + err, err
            assert not (d / "ds").exists()
            return
        ok(["querygen", "pairs", "--aux", str(d / "ds"), "--out", str(d / "st.xml")])
        ok(["querygen", "check", str(d / "st.xml"), "--aux", str(d / "ds")])
        for engine in ENGINE_NAMES:
            ok(["translate", "pairs", "--strategies", str(d / "st.xml"), "--engine", engine,
                "--out", str(d / f"prog-{engine}.py")])


@st.composite
def pairs_configs(draw):
    """--set options of a small, valid Pairs config: sizes anywhere in their documented ranges."""
    sf = draw(st.sampled_from([1, 2, 11, 21, 95]))
    markets = markets_for(sf)
    symbols = draw(st.one_of(st.none(), st.integers(2, 40)))
    n = 100 * markets if symbols is None else symbols
    assume(pair_capacity(n, markets) >= 1)          # the config refuses fewer symbols than markets + 1
    corr = draw(st.one_of(st.none(), st.integers(1, pair_capacity(n, markets))))
    derived = corr if corr is not None else min(max(1, n // 4), pair_capacity(n, markets))
    strategies = draw(st.one_of(st.none(), st.integers(1, derived * MAX_STRATEGIES_PER_PAIR)))
    sets = [f"pairs.scale_factor={sf}", "pairs.rate.profile=constant", "pairs.rate.duration_s=0.05",
            f"pairs.seed={draw(st.integers(0, 2**63 - 1))}"]
    for key, value in (("symbols", symbols), ("correlations", corr), ("strategies", strategies)):
        if value is not None:
            sets.append(f"pairs.{key}={value}")
    return [a for s in sets for a in ("--set", s)]


def check_datagen_chain(options: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        ok(["datagen", "pairs", *options, "--out", str(d / "ds")])
        ok(["querygen", "pairs", "--aux", str(d / "ds"), "--out", str(d / "st.xml")])
        ok(["querygen", "check", str(d / "st.xml"), "--aux", str(d / "ds")])


@default_settings
@given(tick_inputs())
def test_convert_querygen_check_translate(case):
    check_convert_chain(case)


@default_settings
@given(pairs_configs())
def test_datagen_querygen(options):
    check_datagen_chain(options)


@pytest.mark.slow
@slow_settings
@given(tick_inputs())
def test_convert_chain_slow(case):
    check_convert_chain(case)


@pytest.mark.slow
@slow_settings
@given(pairs_configs())
def test_datagen_chain_slow(options):
    check_datagen_chain(options)


# The members of the class found by hand, each a fixed case (they fail on the code before issue 27).

@pytest.mark.parametrize("sets", [
    ["pairs.symbols=2"], ["pairs.symbols=3"],                          # derived correlations were 0
    ["pairs.scale_factor=21", "pairs.symbols=4"],                      # more markets than pairs
    ["pairs.symbols=3", "pairs.strategies=10"],                        # 25/SF strategies on one pair
])
def test_small_documented_configs_round_trip(sets):
    check_datagen_chain([*(a for s in sets for a in ("--set", s)), "--set", "pairs.rate.profile=constant",
                         "--set", "pairs.rate.duration_s=0.05"])


def test_converted_dataset_at_the_largest_scale_factor_round_trips():
    check_convert_chain(("symbol,price,size,tickTS\nAAA,100,1,0\nBBB,200,1,1\n", "symbol1,symbol2\nAAA,BBB\n",
                         ["--sf", str(MAX_SCALE_FACTOR)]))
