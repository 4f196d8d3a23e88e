"""Parsing one CSV field into a typed value, per value or vectorized over a column.

Per-value parsers return the value or raise `BadValue` saying what was expected; the vectorized
ones (Arrow compute, pandas for strptime patterns) accept a strict subset of the same text and
give the same values, raising `Fallback` when unsure so the per-value parser decides. Used by
`datagen.convert_csv`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from kit.workload.aux import symbol_problem

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
INTEGER = re.compile(r"[+-]?[0-9]+")
FAST_INTEGER = "^-?[0-9]+$"          # what Arrow's string-to-int cast reads exactly like int()
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
DOLLARS = re.compile(r"\+?([0-9]*)(?:\.([0-9]*))?")
# Longer integers are refused before int(), which is quadratic in the digits and refuses more
# than 4300; every range here (int32, epoch ms, us) needs fewer.
MAX_DIGITS = 40
SHOWN_CHARS = 60


class BadValue(Exception):
    """A bad field value; the row loop adds file, line and field name."""


def shown(text: str) -> str:
    """repr of a field for a message, cut short: a garbage field can be 100 KB long."""
    return repr(text) if len(text) <= SHOWN_CHARS else repr(text[:SHOWN_CHARS]) + "..."


def printable(text: str) -> str:
    """`text` as is if printable, else with escapes: a form feed or U+2028 in a column name would
    otherwise break the one-line error in two for anything that splits lines like str.splitlines."""
    return text if text.isprintable() else repr(text)[1:-1]


def _cut(number: str) -> str:
    """A number (already matched by a regex, so printable) for a message, cut short."""
    return number if len(number) <= SHOWN_CHARS else number[:SHOWN_CHARS] + "..."


def _integer(text: str, what: str) -> int:
    """A plain decimal integer (optional sign), or BadValue naming `what` was expected."""
    t = text.strip()
    if not INTEGER.fullmatch(t):
        raise BadValue(f"expected {what}, got {shown(text)}")
    digits = len(t.lstrip("+-").lstrip("0"))
    if digits > MAX_DIGITS:
        raise BadValue(f"{_cut(t)} is out of range ({digits} digits)")
    return int(t)


def parse_int32(text: str) -> int:
    v = _integer(text, "an integer")
    if not INT32_MIN <= v <= INT32_MAX:
        raise BadValue(f"{v} does not fit a 32-bit integer")
    return v


def positive_int_parser(unit: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        v = _integer(text, f"a positive integer{unit}")
        if v < 1:
            raise BadValue(f"expected a positive integer{unit}, got {shown(text)}")
        if v > INT32_MAX:
            raise BadValue(f"{v} does not fit a 32-bit integer")
        return v
    return parse


def parse_dollars(text: str) -> int:
    """A positive price in dollars -> integer cents, from the decimal text (no float on the way:
    "0.29" is 29). Digits past the cents must be zeros: "39.8100" is 3981, "39.815" is refused."""
    t = text.strip()
    m = DOLLARS.fullmatch(t)
    if not m or not (m.group(1) or m.group(2)):
        raise BadValue(f"expected a positive price in dollars (like 39.81), got {shown(text)}")
    whole, frac = m.group(1).lstrip("0"), m.group(2) or ""
    if frac[2:].strip("0"):
        raise BadValue(f"{_cut(t)} dollars is not a whole number of cents (more than 2 decimals)")
    if len(whole) > MAX_DIGITS:
        raise BadValue(f"{_cut(t)} dollars does not fit a 32-bit integer of cents")
    cents = int(whole or "0") * 100 + int(frac[:2].ljust(2, "0"))
    if cents < 1:
        raise BadValue(f"expected a positive price in dollars (like 39.81), got {shown(text)}")
    if cents > INT32_MAX:
        raise BadValue(f"{t} dollars ({cents} cents) does not fit a 32-bit integer")
    return cents


def parse_double(text: str) -> float:
    t = text.strip()
    if not DECIMAL.fullmatch(t):
        raise BadValue(f"expected a number, got {shown(text)}")
    v = float(t)
    if not math.isfinite(v):
        raise BadValue(f"expected a finite number, got {shown(text)}")
    return v


def parse_symbol(text: str) -> str:
    """A ticker symbol by the kit's one rule (kit.workload.aux, specs/DATA.md), so that the query
    generator and the strategies reader accept every symbol a converted dataset holds."""
    t = text.strip()
    if not t:
        raise BadValue("expected a symbol, got an empty value")
    why = symbol_problem(t)
    if why is not None:
        raise BadValue(why)
    return t


def _checked_ms(ms: int) -> int:
    if not 0 <= ms <= INT64_MAX:
        raise BadValue(f"{ms} ms is outside the epoch-ms range [0, 2^63)")
    return ms


def _datetime_ms(when: dt.datetime) -> int:
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return _checked_ms((when - EPOCH) // dt.timedelta(milliseconds=1))


def timestamp_parser(unit: str) -> Callable[[str], int]:
    """Text -> integer epoch ms (finer units are floored to the millisecond)."""
    def ms(text: str) -> int:
        return _checked_ms(_integer(text, "an integer (ms)"))

    def us(text: str) -> int:
        return _checked_ms(_integer(text, "an integer (us)") // 1000)

    def s(text: str) -> int:
        t = text.strip()
        if not DECIMAL.fullmatch(t):
            raise BadValue(f"expected a number (s), got {shown(text)}")
        # Decimal keeps "1767623400.123" exact (a float would give ...122.99999); the digits are
        # shifted by hand, since Decimal arithmetic rounds to 28 digits and overflows at 1e999999.
        seconds = Decimal(t)
        sign, digits, exponent = seconds.as_tuple()
        if seconds and (sign or seconds.adjusted() > 18):     # 10^19 s is far past 2^63 ms
            raise BadValue(f"{_cut(t)} s is outside the epoch-ms range [0, 2^63)")
        shift = exponent + 3
        if shift >= 0:
            ms = int("".join(map(str, digits))) * 10**shift
        else:
            ms = int("".join(map(str, digits[:max(len(digits) + shift, 0)])) or "0")
        return _checked_ms(ms)

    def iso(text: str) -> int:
        try:
            when = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise BadValue(f"expected an ISO-8601 datetime, got {shown(text)}") from None
        return _datetime_ms(when)

    return {"ms": ms, "us": us, "s": s, "iso": iso}[unit]


def check_time_format(pattern: str) -> str | None:
    """Why `pattern` is no usable strptime pattern for a timestamp, or None if it is.

    A probe time is formatted with the pattern and parsed back; the round trip must work and keep
    the year (a pattern without one would put every row in 1900, before the epoch).
    """
    probe = dt.datetime(2001, 2, 3, 4, 5, 6, 7000, tzinfo=dt.timezone.utc)
    try:
        back = dt.datetime.strptime(probe.strftime(pattern), pattern)
    except ValueError as e:
        return str(e)
    if back.year != probe.year:
        return "it has no year (%Y or %y)"
    return None


def format_timestamp_parser(pattern: str) -> Callable[[str], int]:
    """Text in a strptime pattern -> epoch ms; UTC unless the pattern has %z (or the text an offset)."""
    def parse(text: str) -> int:
        try:
            when = dt.datetime.strptime(text.strip(), pattern)
        except ValueError:
            raise BadValue(f"expected a time like {pattern!r}, got {shown(text)}") from None
        return _datetime_ms(when)
    return parse


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


def fast_dollars(strs: pa.Array) -> pa.Array:
    # Up to 8 whole digits and 2 decimals: exact in decimal128(10, 2), and 100x that fits int64.
    if not _all(pc.match_substring_regex(strs, r"^[0-9]{1,8}(\.[0-9]{1,2})?$")):
        raise Fallback
    cents = pc.cast(pc.multiply(pc.cast(strs, pa.decimal128(10, 2)), pa.scalar(100)), pa.int64())
    return _in_range(cents, 1, INT32_MAX).cast(pa.int32())


def _fast_scaled_ms(divisor: int, factor: int) -> Callable[[pa.Array], pa.Array]:
    def parse(strs: pa.Array) -> pa.Array:
        raw = _in_range(_plain_ints(strs), 0, INT64_MAX // factor)
        return pa.array(raw.to_numpy() // divisor * factor)
    return parse


FAST_TIMESTAMP: dict[str, Callable[[pa.Array], pa.Array] | None] = {
    "ms": _fast_scaled_ms(1, 1), "us": _fast_scaled_ms(1000, 1), "s": _fast_scaled_ms(1, 1000),
    "iso": None,
}


# strptime directives the pandas path takes, as RE2 patterns no wider than Python's own (so text
# they match parses to the same instant in both, or pandas fails and the definition decides).
# The numeric ones come in two widths: 1-2 digits when non-digits delimit them, else exactly 2.
_FAST_FIELDS = {
    "Y": ("[0-9]{4}", "[0-9]{4}"),
    "m": ("(1[0-2]|0[1-9]|[1-9])", "(1[0-2]|0[1-9])"),
    "d": ("(3[01]|[12][0-9]|0[1-9]|[1-9])", "(3[01]|[12][0-9]|0[1-9])"),
    "H": ("(2[0-3]|[01][0-9]|[0-9])", "(2[0-3]|[01][0-9])"),
    "M": ("([0-5][0-9]|[0-9])", "[0-5][0-9]"),
    "S": ("([0-5][0-9]|[0-9])", "[0-5][0-9]"),
    "f": ("[0-9]{1,6}", None),
    "b": ("(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)",) * 2,
    "z": ("(Z|[+-][0-9]{2}:?[0-9]{2})",) * 2,
}
_DIGIT_FIELDS = set("YmdHMSf")


def _pattern_tokens(pattern: str) -> list[tuple[str, str]] | None:
    """[("%", directive) or ("", literal char)], or None for a stray '%' at the end."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "%":
            if i + 1 == len(pattern):
                return None
            d = pattern[i + 1]
            out.append(("", "%") if d == "%" else ("%", d))
            i += 2
        else:
            out.append(("", pattern[i]))
            i += 1
    return out


def _fast_format_regex(pattern: str) -> str | None:
    tokens = _pattern_tokens(pattern)
    if tokens is None:
        return None
    parts = []
    for k, (kind, c) in enumerate(tokens):
        if kind == "":
            # A space in the pattern matches any whitespace run in Python; here exactly one space.
            parts.append(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}")
            continue
        if c not in _FAST_FIELDS:
            return None
        digits_beside = any(0 <= j < len(tokens) and tokens[j][0] == "%" and tokens[j][1] in _DIGIT_FIELDS
                            for j in (k - 1, k + 1))
        regex = _FAST_FIELDS[c][1 if digits_beside else 0]
        if regex is None:
            return None
        parts.append(regex)
    return "^" + "".join(parts) + "$"


def fast_format_timestamp(pattern: str) -> Callable[[pa.Array], pa.Array] | None:
    """A pandas-vectorized `format_timestamp_parser(pattern)`, or None if the pattern has a
    directive the fast path does not take."""
    regex = _fast_format_regex(pattern)
    if regex is None:
        return None

    def parse(strs: pa.Array) -> pa.Array:
        import numpy as np
        import pandas as pd

        if not _all(pc.match_substring_regex(strs, regex)):
            raise Fallback
        try:
            when = pd.to_datetime(strs.to_numpy(zero_copy_only=False), format=pattern, exact=True, utc=True)
        except (ValueError, TypeError, OverflowError):    # includes OutOfBoundsDatetime
            raise Fallback from None
        if when.isna().any():     # pandas reads "nan"-like text as NaT; the definition refuses it
            raise Fallback
        ms = when.as_unit("ns").asi8 // 1_000_000        # floor, as the definition does
        if len(ms) and int(np.min(ms)) < 0:
            raise Fallback
        return pa.array(ms, pa.int64())
    return parse
