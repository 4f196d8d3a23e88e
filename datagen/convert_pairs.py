"""The correlated pairs of a converted tick dataset: the user's pairs CSV (symbol1, symbol2) and
the `pairs-aux.json` model built from it (written by kit.workload.aux), which the query generator
reads as it reads a generated one."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from datagen.convert_csv import CsvRecords, check_readable
from datagen.csv_values import printable
from kit.errors import at
from kit.scale import MAX_STRATEGIES_PER_PAIR, STRATEGIES_PER_SF
from kit.workload.aux import Correlation, PairsAux, symbol_problem


@dataclass(frozen=True)
class Pair:
    line: int
    symbol1: str
    symbol2: str


def read_correlations(path: Path) -> list[Pair]:
    """The correlated pairs CSV: columns symbol1, symbol2; a symbol is in at most one pair."""
    display = os.fspath(path)
    check_readable(path, "correlations file")
    pairs: list[Pair] = []
    where: dict[str, int] = {}
    header: list[str] | None = None
    i1 = i2 = 0
    last_line = 0
    for line, row in CsvRecords(path, display):
        last_line = line
        if header is None:
            header = [h.strip() for h in row]
            for name in ("symbol1", "symbol2"):
                if name not in header:
                    raise at(display, line, f"missing column {name!r} (columns: {', '.join(map(printable, header))})")
            i1, i2 = header.index("symbol1"), header.index("symbol2")
            continue
        if len(row) != len(header):
            raise at(display, line, f"expected {len(header)} fields as in the header, got {len(row)}")
        s1, s2 = row[i1].strip(), row[i2].strip()
        for name, s in (("symbol1", s1), ("symbol2", s2)):
            if not s:
                raise at(display, line, f"field {name!r}: expected a symbol, got an empty value")
            if (why := symbol_problem(s)) is not None:
                raise at(display, line, f"field {name!r}: {why}")
            if s in where:
                raise at(display, line, f"symbol {s!r} is already paired on line {where[s]} "
                                        f"(a symbol is in at most one pair)")
        if s1 == s2:
            raise at(display, line, f"symbol {s1!r} cannot be paired with itself")
        where[s1] = where[s2] = line
        pairs.append(Pair(line, s1, s2))
    if header is None:
        raise at(display, 1, "empty file (expected a header line symbol1,symbol2)")
    if not pairs:
        raise at(display, last_line + 1, "no pairs after the header")
    return pairs


def check_pairs_present(correlations: Path, source: Path, pairs: list[Pair], present: set[str]) -> None:
    for p in pairs:
        for s in (p.symbol1, p.symbol2):
            if s not in present:
                raise at(os.fspath(correlations), p.line, f"symbol {s!r} does not occur in {source}")


def converted_aux(scale_factor: int, symbols: list[str], pairs: list[Pair]) -> PairsAux:
    """pairs-aux.json of a converted dataset: one market, no generator seed or correlation.

    A user's data rarely has the 25 pairs per SF the scale model assumes: the strategy count is
    25 x SF capped at what the pairs hold (10 per pair), so the query generator's default fits
    (`querygen pairs --count` asks for another number)."""
    return PairsAux(
        scale_factor=scale_factor, markets=1,
        num_strategies=min(STRATEGIES_PER_SF * scale_factor, MAX_STRATEGIES_PER_PAIR * len(pairs)),
        max_strategies_per_pair=MAX_STRATEGIES_PER_PAIR, seed=None,
        symbols=tuple((s, 0) for s in symbols),
        correlations=tuple(Correlation(p.symbol1, p.symbol2, 0) for p in pairs),
        correlation=None)
