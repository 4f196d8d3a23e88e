"""Parsing one CSV field into a typed value, per value or vectorized over a column.

Per-value parsers return the value or raise `BadValue` saying what was expected; the vectorized
ones (Arrow compute) accept a strict subset of the same text and give the same values, raising
`Fallback` when unsure so the per-value parser decides. Used by `datagen.convert`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
INTEGER = re.compile(r"[+-]?[0-9]+")
FAST_INTEGER = "^-?[0-9]+$"          # what Arrow's string-to-int cast reads exactly like int()
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class BadValue(Exception):
    """A bad field value; the row loop adds file, line and field name."""


def parse_int32(text: str) -> int:
    t = text.strip()
    if not INTEGER.fullmatch(t):
        raise BadValue(f"expected an integer, got {text!r}")
    v = int(t)
    if not INT32_MIN <= v <= INT32_MAX:
        raise BadValue(f"{v} does not fit a 32-bit integer")
    return v


def positive_int_parser(unit: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        t = text.strip()
        if not INTEGER.fullmatch(t) or int(t) < 1:
            raise BadValue(f"expected a positive integer{unit}, got {text!r}")
        v = int(t)
        if v > INT32_MAX:
            raise BadValue(f"{v} does not fit a 32-bit integer")
        return v
    return parse


def parse_double(text: str) -> float:
    t = text.strip()
    if not DECIMAL.fullmatch(t):
        raise BadValue(f"expected a number, got {text!r}")
    v = float(t)
    if not math.isfinite(v):
        raise BadValue(f"expected a finite number, got {text!r}")
    return v


def parse_symbol(text: str) -> str:
    t = text.strip()
    if not t:
        raise BadValue("expected a symbol, got an empty value")
    return t


def timestamp_parser(unit: str) -> Callable[[str], int]:
    """Text -> integer epoch ms (finer units are floored to the millisecond)."""
    def checked(ms: int) -> int:
        if not 0 <= ms <= INT64_MAX:
            raise BadValue(f"{ms} ms is outside the epoch-ms range [0, 2^63)")
        return ms

    def ms(text: str) -> int:
        t = text.strip()
        if not INTEGER.fullmatch(t):
            raise BadValue(f"expected an integer (ms), got {text!r}")
        return checked(int(t))

    def us(text: str) -> int:
        t = text.strip()
        if not INTEGER.fullmatch(t):
            raise BadValue(f"expected an integer (us), got {text!r}")
        return checked(int(t) // 1000)

    def s(text: str) -> int:
        t = text.strip()
        if not DECIMAL.fullmatch(t):
            raise BadValue(f"expected a number (s), got {text!r}")
        # Decimal keeps "1767623400.123" exact; a float would give ...122.99999.
        return checked(math.floor(Decimal(t) * 1000))

    def iso(text: str) -> int:
        t = text.strip()
        try:
            when = dt.datetime.fromisoformat(t)
        except ValueError:
            raise BadValue(f"expected an ISO-8601 datetime, got {text!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        return checked((when - EPOCH) // dt.timedelta(milliseconds=1))

    return {"ms": ms, "us": us, "s": s, "iso": iso}[unit]


# --- vectorized equivalents for the common case ---------------------------------------------
# Each accepts a strict subset of what its per-value parser accepts (no spaces, no "+", plain
# decimal digits) and gives the same values; anything else falls back to the per-value parser.

class Fallback(Exception):
    """The vectorized parse is not sure; the per-value parser decides."""


def _all(mask: pa.Array) -> bool:
    return bool(pc.all(mask).as_py())


def _plain_ints(strs: pa.Array) -> pa.Array:
    if not _all(pc.match_substring_regex(strs, FAST_INTEGER)):
        raise Fallback
    try:
        return pc.cast(strs, pa.int64())
    except pa.ArrowInvalid:       # beyond int64
        raise Fallback from None


def _in_range(values: pa.Array, lo: int, hi: int) -> pa.Array:
    if not (_all(pc.greater_equal(values, lo)) and _all(pc.less_equal(values, hi))):
        raise Fallback
    return values


def fast_int32(strs: pa.Array) -> pa.Array:
    return _in_range(_plain_ints(strs), INT32_MIN, INT32_MAX).cast(pa.int32())


def fast_positive_int32(strs: pa.Array) -> pa.Array:
    return _in_range(_plain_ints(strs), 1, INT32_MAX).cast(pa.int32())


def fast_double(strs: pa.Array) -> pa.Array:
    if not _all(pc.match_substring_regex(strs, "^" + DECIMAL.pattern + "$")):
        raise Fallback
    try:
        values = pc.cast(strs, pa.float64())   # correctly rounded, like float()
    except pa.ArrowInvalid:
        raise Fallback from None
    if not _all(pc.is_finite(values)):
        raise Fallback
    return values


def _fast_scaled_ms(divisor: int, factor: int) -> Callable[[pa.Array], pa.Array]:
    def parse(strs: pa.Array) -> pa.Array:
        raw = _in_range(_plain_ints(strs), 0, INT64_MAX // factor)
        return pa.array(raw.to_numpy() // divisor * factor)
    return parse


FAST_TIMESTAMP: dict[str, Callable[[pa.Array], pa.Array] | None] = {
    "ms": _fast_scaled_ms(1, 1), "us": _fast_scaled_ms(1000, 1), "s": _fast_scaled_ms(1, 1000),
    "iso": None,
}
