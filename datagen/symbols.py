"""Unique six-capital-letter ticker symbols (as in the thesis' examples, e.g. MCBEIV)."""

from __future__ import annotations

import numpy as np

LETTERS = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", dtype=np.uint8)


def make_symbols(n: int, rng: np.random.Generator, length: int = 6) -> list[str]:
    """`n` distinct random symbols, in generation order (deterministic for a given rng state)."""
    if n > 26 ** length // 2:
        raise ValueError(f"cannot draw {n} distinct {length}-letter symbols")
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        codes = LETTERS[rng.integers(0, 26, size=(n - len(out) + 8, length))]
        for row in codes:
            s = row.tobytes().decode("ascii")
            if s not in seen:
                seen.add(s)
                out.append(s)
                if len(out) == n:
                    break
    return out
