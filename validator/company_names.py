"""Invented company names for the ticker symbols of a generated Pairs dataset, for reading a report.

A generated dataset's symbols are random capitals ("QZKXVA"); a report reads more easily with a
name beside each ("QZKXVA · Gonzalez, Ortega and Hamilton"). `names_seed(manifest_doc)` says
whether a dataset gets names (only one the Pairs generator made, which has a seed; never a
dataset converted from a user's real ticks, whose symbols are real companies); `company_names(
seed, symbols)` gives them. The rule is pinned in specs/VALIDATION.md ("Report").

The names are display only: derived from the seed and the symbol when the report is drawn, never
written to a file another tool reads (not summary.json, not the expected answers) and never used
by any computation. They come from `faker`'s en_US company provider, so another faker version may
name a symbol differently.
"""

from __future__ import annotations

from typing import Iterable, Mapping

# The generator name `datagen.pairs` writes into its manifest (kit.manifest.write_manifest).
GENERATED_BY = "pairs"
LOCALE = "en_US"

_faker = None   # one instance, built on first use and re-seeded per symbol


def names_seed(manifest_doc: Mapping) -> int | None:
    """The seed names are derived from: the generator's seed of a generated Pairs dataset, else None."""
    seed = manifest_doc.get("seed")
    if manifest_doc.get("generator") != GENERATED_BY or isinstance(seed, bool) or not isinstance(seed, int):
        return None
    return seed


def company_names(seed: int | None, symbols: Iterable[str]) -> dict[str, str]:
    """symbol -> invented company name, the same for the same seed and symbol; {} when seed is None."""
    wanted = sorted(set(symbols))
    if seed is None or not wanted:
        return {}
    fake = _instance()
    names = {}
    for symbol in wanted:
        # Seeding by the pair, not once for the list, so a symbol's name does not depend on which
        # other symbols a report happens to show.
        fake.seed_instance(f"{seed}:{symbol}")
        names[symbol] = fake.company()
    return names


def _instance():
    global _faker
    if _faker is None:
        # Imported here: faker takes a noticeable share of a second to import and build, which
        # only a report that shows names should pay.
        from faker import Faker
        _faker = Faker(LOCALE)
    return _faker
