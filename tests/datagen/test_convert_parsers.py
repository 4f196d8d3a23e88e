"""The CSV converter's value parsers: each fast (vectorized) parser agrees with its definition,
dollars become exact cents, and huge numbers are refused quickly."""

from __future__ import annotations

import pyarrow as pa
import pytest

import datagen.csv_values as csv_values
from tests.datagen.convert_helpers import T0


@pytest.mark.parametrize("unit, texts", [
    ("ms", ["0", "17", "1767623400123", "9223372036854775807", "-1", "007", "99999999999999999999"]),
    ("us", ["0", "999", "1000", "1767623400123999", "-1", "-1000", "9223372036854775807"]),
    ("s", ["0", "1767623400", "9223372036854775", "9223372036854776", "-1"]),
])
def test_fast_timestamp_parsers_agree_with_the_definition(unit, texts):
    # The vectorized path must give the per-value parser's values, or decline.
    slow = csv_values.timestamp_parser(unit)
    for text in texts:
        try:
            want = slow(text)
        except csv_values.BadValue:
            want = None
        try:
            got = csv_values.FAST_TIMESTAMP[unit](pa.array([text])).to_pylist()[0]
        except csv_values.Fallback:
            got = None
        assert got == want, (unit, text)
    assert csv_values.timestamp_parser("us")("1767623400123999") == T0 + 123
    assert csv_values.timestamp_parser("us")(" 1767623400123999 ") == T0 + 123


@pytest.mark.parametrize("fast, slow, texts", [
    ("fast_int32", "parse_int32", ["1", "-3", "2147483647", "2147483648", "-2147483649", "0x10", "+5", " 5",
                                   "nan", "NaN", "inf", "-inf", ""]),
    ("fast_double", "parse_double", ["1", "-2.5", "1e3", ".5", "5.", "nan", "inf", "1e999", "0x1p3", "1_0",
                                     "NaN", "-inf", "Infinity", ""]),
    ("fast_dollars", "parse_dollars", ["39.81", "39.8", "40", "0.29", "0.01", "0.00", "0", "00.10", "5.",
                                       ".5", "39.815", "39.810", "-1", "+1", "1e2", "nan", "inf",
                                       "21474836.47", "21474836.48", "99999999.99", "123456789"]),
])
def test_fast_field_parsers_agree_with_the_definition(fast, slow, texts):
    for text in texts:
        try:
            want = getattr(csv_values, slow)(text)
        except csv_values.BadValue:
            want = None
        try:
            got = getattr(csv_values, fast)(pa.array([text])).to_pylist()[0]
        except csv_values.Fallback:
            continue   # declining is always allowed
        assert got == want, text


@pytest.mark.parametrize("pattern, texts", [
    ("%b %d %Y", ["Jan 1 2000", "jan 01 2000", "DEC 31 1999", "Feb 29 2000", "Feb 29 2001", "Feb 30 2000",
                  "Jam 1 2000", "Jan 1 1969", "Jan  1 2000", "Jan 1 2000 ", "nan", "NaT", "", "Jan 1 1500",
                  "Jan 1 9999"]),
    ("%Y-%m-%d", ["2000-01-01", "2000-1-1", "2000-13-01", "2000-00-10", "20000101", "2000-01-01 00:00", "nan"]),
    ("%Y%m%d", ["20000101", "2000111", "20001301", "200011011"]),
    ("%Y-%m-%d %H:%M:%S.%f", ["2026-01-05 14:30:00.123456", "2026-01-05 14:30:00.1", "2026-01-05 24:00:00.0",
                              "2026-01-05 14:30:60.0", "2026-01-05 14:30:00.123456789"]),
    ("%Y-%m-%dT%H:%M:%S%z", ["2026-01-05T14:30:00+0100", "2026-01-05T14:30:00Z", "2026-01-05T14:30:00+01:00",
                             "2026-01-05T14:30:00", "2026-01-05T14:30:00+1"]),
])
def test_fast_format_timestamp_agrees_with_the_definition(pattern, texts):
    # The pandas path must give strptime's values, or decline (it reads "nan" as NaT, 9-digit %f...).
    slow = csv_values.format_timestamp_parser(pattern)
    fast = csv_values.fast_format_timestamp(pattern)
    assert fast is not None
    for text in texts:
        try:
            want = slow(text)
        except csv_values.BadValue:
            want = None
        try:
            got = fast(pa.array([text])).to_pylist()[0]
        except csv_values.Fallback:
            continue
        assert got == want, (pattern, text)
    good = [t for t in texts if _parses(slow, t)]
    assert fast(pa.array(good[:1])).to_pylist() == [slow(good[0])]   # the fast path does take plain text


def _parses(parse, text) -> bool:
    try:
        parse(text)
        return True
    except csv_values.BadValue:
        return False


def test_fast_format_timestamp_declines_unknown_directives():
    assert csv_values.fast_format_timestamp("%j %Y") is None        # day of year: strptime only
    assert csv_values.format_timestamp_parser("%j %Y")("032 2000") == 949363200000   # 2000-02-01


@pytest.mark.parametrize("text, cents", [
    ("39.81", 3981), ("39.8", 3980), ("40", 4000), ("0.29", 29), ("0.01", 1), (".5", 50), ("5.", 500),
    ("39.8100", 3981), ("+1.00", 100), (" 12.34 ", 1234), ("21474836.47", 2**31 - 1), ("007.10", 710),
])
def test_dollars_become_exact_cents(text, cents):
    assert csv_values.parse_dollars(text) == cents


@pytest.mark.parametrize("text, message", [
    ("39.815", "39.815 dollars is not a whole number of cents (more than 2 decimals)"),
    ("39.8101", "39.8101 dollars is not a whole number of cents (more than 2 decimals)"),
    ("0", "expected a positive price in dollars (like 39.81), got '0'"),
    ("0.00", "expected a positive price in dollars (like 39.81), got '0.00'"),
    ("-1.50", "expected a positive price in dollars (like 39.81), got '-1.50'"),
    ("1e2", "expected a positive price in dollars (like 39.81), got '1e2'"),
    ("$5", "expected a positive price in dollars (like 39.81), got '$5'"),
    (".", "expected a positive price in dollars (like 39.81), got '.'"),
    ("", "expected a positive price in dollars (like 39.81), got ''"),
    ("nan", "expected a positive price in dollars (like 39.81), got 'nan'"),
    ("21474836.48", "21474836.48 dollars (2147483648 cents) does not fit a 32-bit integer"),
    ("9" * 50, "9" * 50 + " dollars does not fit a 32-bit integer of cents"),
])
def test_bad_dollars(text, message):
    with pytest.raises(csv_values.BadValue) as err:
        csv_values.parse_dollars(text)
    assert str(err.value) == message


def test_huge_numbers_are_refused_quickly():
    # int() of 5000 digits raises ValueError (not BadValue) and "1e999999999" s would build a
    # billion-digit integer: both must be plain bad values.
    with pytest.raises(csv_values.BadValue, match=r"^9{60}\.\.\. is out of range \(5000 digits\)$"):
        csv_values.parse_int32("9" * 5000)
    with pytest.raises(csv_values.BadValue, match="outside the epoch-ms range"):
        csv_values.timestamp_parser("s")("1e999999999")
    with pytest.raises(csv_values.BadValue, match=r"got '(x{60})'\.\.\.$"):
        csv_values.parse_double("x" * 1000)
