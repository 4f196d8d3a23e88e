"""The Pairs auxiliary file (`pairs-aux.json`, thesis B.1): symbols, markets and correlated pairs.

The one model (`PairsAux`), writer (`write_aux`) and reader (`load_aux`) of the file. Datagen
writes it next to the ticks (the Pairs generator and the CSV converter); the query generator reads
it to assign strategies to pairs, and the strategies reader uses it to check that every strategy
watches a correlated pair of the dataset. The layout is documented in `specs/DATA.md`.

It also holds the one rule of what a ticker symbol is (`symbol_problem`, specs/DATA.md "Ticker
symbols"): the converter applies it to the user's ticks and pairs, this model to the file, and the
strategies spec to every strategy, so a dataset one command writes is one the next accepts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kit.errors import at
from kit.jsonfile import read_json_object, write_json
from kit.config import MAX_SCALE_FACTOR
from kit.scale import MAX_STRATEGIES_PER_PAIR
from kit.workload.common import SpecError, as_tuple, integer, need, number

AUX_KIND = "cepkit.pairs-aux"
AUX_SCHEMA_VERSION = 1
AUX_FILE = "pairs-aux.json"

# A ticker symbol (specs/DATA.md): what generated symbols (six capitals), real tickers (BRK.B,
# BRK-B, RDS_A, 7203) and the strategies XML all share. Kept to characters that need no quoting in
# a CSV, an XML attribute or a generated program, and short enough for a report's table.
SYMBOL_MAX_CHARS = 32
SYMBOL_RE = re.compile(rf"[A-Za-z0-9._-]{{1,{SYMBOL_MAX_CHARS}}}")
SYMBOL_RULE = f"1 to {SYMBOL_MAX_CHARS} characters, each a letter A-Z or a-z, a digit, '.', '_' or '-'"


def symbol_problem(symbol: object) -> str | None:
    """None if `symbol` is a ticker symbol by the one rule, else why not (for a message)."""
    if not isinstance(symbol, str):
        return f"a ticker symbol must be text, got {symbol!r}"
    if SYMBOL_RE.fullmatch(symbol) is None:
        shown = repr(symbol) if len(symbol) <= 60 else repr(symbol[:60]) + "..."
        return f"{shown} is not a ticker symbol ({SYMBOL_RULE})"
    return None


@dataclass(frozen=True)
class Correlation:
    """A correlated pair; `symbol2` is the symbol whose moves follow `symbol1`'s."""

    symbol1: str
    symbol2: str
    market: int


@dataclass(frozen=True)
class PairsAux:
    scale_factor: int
    markets: int
    num_strategies: int
    max_strategies_per_pair: int
    seed: int | None                            # None for a dataset converted from CSV
    symbols: tuple[tuple[str, int], ...]        # (symbol, market) in the dataset's order
    correlations: tuple[Correlation, ...]       # market by market
    correlation: float | None = None            # the generator's price correlation; None when converted

    def __post_init__(self) -> None:
        as_tuple(self, "symbols", "correlations")
        integer("scale_factor", self.scale_factor, 1)
        # The strategies file generated from this one carries the scale factor, and refuses more.
        need(self.scale_factor <= MAX_SCALE_FACTOR,
             f"scale_factor must be <= {MAX_SCALE_FACTOR}, got {self.scale_factor}")
        integer("markets", self.markets, 1)
        integer("num_strategies", self.num_strategies, 1)
        integer("max_strategies_per_pair", self.max_strategies_per_pair, 1)
        # The counts that size the query generator's work, checked against the rest of the file
        # before anything loops over them (issue 45): every market holds symbols, so there are no
        # more markets than symbols; a pair takes at most MAX_STRATEGIES_PER_PAIR strategies.
        need(self.markets <= max(1, len(self.symbols)),
             f"markets is {self.markets} but only {len(self.symbols)} symbols are listed (a market holds symbols)")
        need(self.max_strategies_per_pair <= MAX_STRATEGIES_PER_PAIR,
             f"max_strategies_per_pair must be <= {MAX_STRATEGIES_PER_PAIR}, got {self.max_strategies_per_pair}")
        capacity = len(self.correlations) * self.max_strategies_per_pair
        need(self.num_strategies <= capacity,
             f"num_strategies is {self.num_strategies} but the {len(self.correlations)} correlated pairs listed x "
             f"{self.max_strategies_per_pair} strategies per pair hold at most {capacity}")
        if self.seed is not None:
            integer("seed", self.seed, 0)
        if self.correlation is not None:
            number("correlation", self.correlation)
        market_of = dict(self.symbols)
        need(len(market_of) == len(self.symbols), "symbols: a symbol is listed twice")
        for sym, m in self.symbols:
            why = symbol_problem(sym)
            need(why is None, f"symbols: {why}")
            need(isinstance(m, int) and 0 <= m < self.markets,
                 f"symbols: {sym} has market {m}, expected 0..{self.markets - 1}")
        for i, c in enumerate(self.correlations):
            for s in (c.symbol1, c.symbol2):
                need(s in market_of, f"correlations[{i}]: unknown symbol {s}")
                need(market_of[s] == c.market, f"correlations[{i}]: {s} is in market {market_of[s]}, not {c.market}")
            need(c.symbol1 != c.symbol2, f"correlations[{i}]: a symbol cannot be paired with itself")

    @property
    def symbol_set(self) -> frozenset[str]:
        return frozenset(s for s, _ in self.symbols)

    @property
    def pair_set(self) -> frozenset[frozenset[str]]:
        return frozenset(frozenset((c.symbol1, c.symbol2)) for c in self.correlations)

    def market_pairs(self, market: int) -> tuple[Correlation, ...]:
        return tuple(c for c in self.correlations if c.market == market)


def aux_from_document(doc: dict) -> PairsAux:
    """Build the model from the JSON document; a `SpecError` names the bad key."""
    need(isinstance(doc, dict), "expected a JSON object")
    need(doc.get("kind") == AUX_KIND, f"kind must be {AUX_KIND}, got {doc.get('kind')!r}")
    need(type(doc.get("schema_version")) is int and doc.get("schema_version") == AUX_SCHEMA_VERSION,
         f"schema_version must be {AUX_SCHEMA_VERSION}, got {doc.get('schema_version')!r}")
    keys = ("scale_factor", "markets", "num_strategies", "max_strategies_per_pair", "seed", "symbols",
            "correlations")
    missing = [k for k in keys if k not in doc]
    need(not missing, f"missing key(s): {', '.join(missing)}")
    try:
        symbols = tuple((str(s["symbol"]), s["market"]) for s in doc["symbols"])
        correlations = tuple(Correlation(str(c["symbol1"]), str(c["symbol2"]), c["market"])
                             for c in doc["correlations"])
    except (TypeError, KeyError) as e:
        raise SpecError(f"symbols/correlations entries are malformed ({e})") from None
    aux = PairsAux(scale_factor=doc["scale_factor"], markets=doc["markets"],
                   num_strategies=doc["num_strategies"], max_strategies_per_pair=doc["max_strategies_per_pair"],
                   seed=doc["seed"], symbols=symbols, correlations=correlations,
                   correlation=doc.get("correlation"))
    for key, n in (("num_symbols", len(aux.symbols)), ("num_correlations", len(aux.correlations))):
        if key in doc:
            need(doc[key] == n, f"{key} is {doc[key]!r} but {n} are listed")
    return aux


def aux_document(aux: PairsAux) -> dict:
    """The JSON document of `aux`, keys in the documented order (specs/DATA.md)."""
    return {
        "kind": AUX_KIND, "schema_version": AUX_SCHEMA_VERSION,
        "scale_factor": aux.scale_factor, "markets": aux.markets, "num_symbols": len(aux.symbols),
        "num_correlations": len(aux.correlations), "num_strategies": aux.num_strategies,
        "max_strategies_per_pair": aux.max_strategies_per_pair,
        "seed": aux.seed, "correlation": aux.correlation,
        "symbols": [{"symbol": s, "market": m} for s, m in aux.symbols],
        "correlations": [{"symbol1": c.symbol1, "symbol2": c.symbol2, "market": c.market} for c in aux.correlations],
    }


def write_aux(directory: str | os.PathLike, aux: PairsAux) -> Path:
    """Write `directory/pairs-aux.json`; returns its path."""
    path = Path(directory) / AUX_FILE
    write_json(path, aux_document(aux))
    return path


def aux_path(path: str | os.PathLike) -> Path:
    """A dataset directory stands for the auxiliary file inside it."""
    p = Path(path)
    return p / AUX_FILE if p.is_dir() else p


def load_aux(path: str | os.PathLike) -> PairsAux:
    """Read `pairs-aux.json` (or a dataset directory holding one); errors are one line naming the file."""
    p = aux_path(path)
    doc = read_json_object(p, missing="auxiliary file not found", what="an auxiliary file")
    try:
        return aux_from_document(doc)
    except SpecError as e:
        raise at(p, None, e.message) from None
