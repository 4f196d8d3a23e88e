"""Invented company names beside a generated dataset's ticker symbols (validator/company_names.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from validator.company_names import company_names, names_seed

ROOT = Path(__file__).resolve().parents[2]


def symbols(n: int) -> list[str]:
    """n distinct six-capital symbols, like the generator's."""
    out = []
    for i in range(n):
        s = ""
        for _ in range(6):
            i, r = divmod(i, 26)
            s += chr(65 + r)
        out.append(s)
    return out


def test_the_same_seed_and_symbol_give_the_same_name_whatever_else_is_named():
    alone = company_names(42, ["QZKXVA"])
    among = company_names(42, ["AAAAAA", "QZKXVA", "ZZZZZZ"])
    again = company_names(42, ["QZKXVA"])
    assert alone["QZKXVA"] == among["QZKXVA"] == again["QZKXVA"]
    assert isinstance(alone["QZKXVA"], str) and alone["QZKXVA"].strip()
    assert set(among) == {"AAAAAA", "QZKXVA", "ZZZZZZ"}


def test_a_name_depends_on_the_seed_and_different_symbols_get_mostly_different_names():
    syms = symbols(200)
    names = company_names(7, syms)
    assert len(set(names.values())) >= 190
    other = company_names(8, syms)
    assert sum(names[s] != other[s] for s in syms) >= 190


def test_names_are_the_same_in_a_fresh_process():
    """Derived from seed and symbol only: no state of the process (hash seed, earlier draws) counts."""
    code = "from validator.company_names import company_names; print(company_names(42, ['QZKXVA'])['QZKXVA'])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"}).stdout.strip()
    assert out == company_names(42, ["QZKXVA"])["QZKXVA"]


def test_only_a_generated_dataset_gets_names():
    assert names_seed({"generator": "pairs", "seed": 42}) == 42
    assert names_seed({"generator": "pairs", "seed": 0}) == 0
    assert names_seed({"generator": "convert", "seed": 42}) is None        # the user's real tickers
    assert names_seed({"generator": "convert"}) is None
    assert names_seed({"generator": "pairs"}) is None
    assert names_seed({"generator": "pairs", "seed": True}) is None
    assert names_seed({"generator": "pairs", "seed": "42"}) is None
    assert company_names(None, ["QZKXVA"]) == {}
    assert company_names(42, []) == {}


def test_faker_is_imported_only_when_names_are_made():
    """It takes a noticeable share of a second to import: the validator's other commands don't pay it."""
    code = ("import sys, validator.report_page, validator.pairs_run; assert 'faker' not in sys.modules; "
            "from validator.company_names import company_names; company_names(None, ['A']); "
            "assert 'faker' not in sys.modules; company_names(1, ['A']); assert 'faker' in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_two_thousand_symbols_are_named_by_one_instance():
    """A report of 12,800 strategies has about 2,000 symbols; one faker instance re-seeded names
    them all (about 0.2 s on the 2-core machine)."""
    import validator.company_names as cn
    company_names(1, ["A"])
    built = cn._faker
    names = company_names(3, symbols(2000))
    assert len(names) == 2000 and cn._faker is built
