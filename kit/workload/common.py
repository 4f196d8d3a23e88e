"""Pieces shared by every workload spec: the model's error type, checks, names and comparisons.

Model classes raise `SpecError` from `__post_init__`. Its message names the offending XML
attribute (the spec language's name, e.g. `numPeriods`, `rangeMs`), so the same words serve a
programmer building specs in Python and a user editing XML; the XML reader adds the file and
line. `ref` optionally names the query, workload or strategy an error is about, so that checks
made by a container (a workload checking its queries against its dataset) can still be reported
at the line of the element concerned.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kit.config.limits import INT32_MAX, INT64_MAX
from kit.errors import CepkitError

SCHEMA_VERSION = 1
STRATEGIES_KIND = "cepkit.strategies"
WORKLOAD_KIND = "cepkit.workload"
SUITE_KIND = "cepkit.suite"

# Query ids become output stream names and column prefixes, so they must be plain identifiers.
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
# Workload and suite names become file names.
SLUG_RE = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")

# Comparison operators, spelled so that they need no escaping in XML.
OPS: dict[str, str] = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "=", "ne": "<>"}


class SpecError(CepkitError):
    """A model check failed; `ref` names the query/workload/strategy it concerns, if not the element itself."""

    def __init__(self, message: str, ref: str | None = None):
        super().__init__(message)
        self.message = str(message)
        self.ref = ref


def need(cond: bool, message: str, ref: str | None = None) -> None:
    if not cond:
        raise SpecError(message, ref)


def one_of(name: str, value: Any, choices, ref: str | None = None) -> None:
    need(value in choices, f"{name} must be one of {','.join(_show(c) for c in choices)}, got {_show(value)}", ref)


def integer(name: str, value: Any, minimum: int | None = None, ref: str | None = None, *,
            maximum: int = INT64_MAX) -> None:
    """An int in [minimum, maximum]; the maximum is the XML type's (xs:long by default, INT32_MAX
    for an xs:int), so that every value the model takes is one its file can hold."""
    need(isinstance(value, int) and not isinstance(value, bool), f"{name} must be an integer, got {value!r}", ref)
    if minimum is not None:
        need(value >= minimum, f"{name} must be >= {minimum}, got {value}", ref)
    need(value <= maximum, f"{name} must be <= {maximum}, got {value}", ref)


def number(name: str, value: Any, ref: str | None = None) -> None:
    """A finite float, or an int within 64 bits (a larger one is not a number the engines'
    programs or the XML's xs:double hold exactly: write it with an exponent, e.g. 1e20)."""
    need(isinstance(value, (int, float)) and not isinstance(value, bool), f"{name} must be a finite number, got {value!r}",
         ref)
    if isinstance(value, int):
        need(-INT64_MAX - 1 <= value <= INT64_MAX,
             f"{name} must be a finite number; an integer without exponent must lie within 64 bits "
             f"(write a larger one as e.g. 1e20), got {value}", ref)
    else:
        need(math.isfinite(value), f"{name} must be a finite number, got {value!r}", ref)


# The characters XML 1.0 can hold (section 2.2): a text of the model with another could not be written.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(name: str, value: Any, ref: str | None = None) -> None:
    """Free text (a description, a parameter's value): a string XML can hold."""
    need(isinstance(value, str), f"{name} must be text, got {value!r}", ref)
    bad = _NOT_XML.search(value)
    if bad is not None:
        raise SpecError(f"{name} holds the character {bad.group()!r}, which an XML file cannot hold", ref)


def identifier(name: str, value: Any, ref: str | None = None) -> None:
    need(isinstance(value, str) and bool(NAME_RE.match(value)),
         f"{name} must be an identifier (a letter, then letters, digits or _), got {value!r}", ref)


def slug(name: str, value: Any, ref: str | None = None) -> None:
    need(isinstance(value, str) and bool(SLUG_RE.match(value)),
         f"{name} must be lower-case letters, digits, '.', '_' or '-', got {value!r}", ref)


def as_tuple(obj: Any, *names: str) -> None:
    """Let callers pass lists for tuple fields of a frozen dataclass (stored as tuples, so hashable)."""
    for n in names:
        v = getattr(obj, n)
        if not isinstance(v, tuple):
            object.__setattr__(obj, n, tuple(v))


def format_number(value: int | float) -> str:
    """How numbers are written to XML: ints plainly, floats as the shortest repr that reads back equal."""
    return str(value) if isinstance(value, int) else repr(float(value))


def parse_number(text: str) -> int | float:
    """Inverse of `format_number`: an integer literal within 64 bits stays an int, anything else
    (an integer literal beyond, however long) is a float, as the XML's xs:double reads it."""
    text = text.strip()
    m = re.fullmatch(r"([+-]?)0*([0-9]+)", text)
    if m and len(m[2]) <= 19:       # Python converts at most sys.get_int_max_str_digits() digits
        value = int(m[1] + m[2])
        if -INT64_MAX - 1 <= value <= INT64_MAX:
            return value
    return float(text)


def _show(v: Any) -> str:
    return format_number(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


@dataclass(frozen=True)
class Comparison:
    """`field op value`, e.g. `ID <= 10`; in joins the field is qualified (`S1.A1`)."""

    field: str
    op: str
    value: int | float

    def __post_init__(self) -> None:
        need(isinstance(self.field, str) and bool(self.field), "field must not be empty")
        one_of("op", self.op, tuple(OPS))
        number("value", self.value)

    def __str__(self) -> str:
        return f"{self.field} {OPS[self.op]} {format_number(self.value)}"
