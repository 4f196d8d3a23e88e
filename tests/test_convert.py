"""The CSV converter: round trips, timestamp units and strptime patterns, dollar prices, default
sizes, sorting, file splits, one-line errors with file:line (and the exact line for junk rows,
unclosed quotes, CR line ends), unreadable inputs, the correlations file, the real-looking CSV of
tests/data/real and the CLI."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import datagen.convert_csv as csv_rows
import datagen.convert_order as convert_order
import datagen.csv_values as csv_values
from datagen.convert import ConvertSpec, convert_csv
from datagen.convert_order import SplitSampler
from datagen.pairs import TICK_CSV_SCHEMA, TICK_FILE_SCHEMA
from kit.cli import main
from kit.datafiles import sha256_of
from kit.errors import CepkitError

T0 = 1_767_623_400_000  # 2026-01-05 14:30:00 UTC


def write(tmp_path: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def rows_of(directory: Path, pattern: str) -> list[dict]:
    out = []
    for f in sorted(directory.glob(pattern)):
        out.extend(pq.read_table(f).to_pylist() if f.suffix == ".parquet" else pacsv.read_csv(f).to_pylist())
    return out


# --- good input -----------------------------------------------------------------------------

MICRO_CSV = """note,TS,A3,ID,A1,A2
first,1000,3.5,7,1.25,2
 second , 1000 , 30 ,8, 10.5 ,20

third,2500,0.001,-3,1e2,2.5E-1
"""


def test_micro_round_trip(tmp_path):
    src = write(tmp_path, "events.csv", MICRO_CSV)
    ds = convert_csv(ConvertSpec(src), tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["S1-00001-of-00001.parquet", "manifest.json"]
    t = pq.read_table(tmp_path / "out" / "S1-00001-of-00001.parquet")
    assert [(f.name, str(f.type)) for f in t.schema] == [
        ("ID", "int32"), ("A1", "double"), ("A2", "double"), ("A3", "double"), ("TS", "int64")]
    assert t.to_pylist() == [
        {"ID": 7, "A1": 1.25, "A2": 2.0, "A3": 3.5, "TS": 1000},
        {"ID": 8, "A1": 10.5, "A2": 20.0, "A3": 30.0, "TS": 1000},
        {"ID": -3, "A1": 100.0, "A2": 0.25, "A3": 0.001, "TS": 2500},
    ]
    m = ds.manifest
    assert m["generator"] == "convert" and m["data_kind"] == "micro" and m["total_rows"] == 3
    assert m["source"] == {"file": "events.csv", "sha256": sha256_of(src), "bytes": src.stat().st_size, "rows": 3}
    assert (m["start_epoch_ms"], m["last_epoch_ms"]) == (1000, 2500)
    assert m["streams"][0]["files"][0]["sha256"] == sha256_of(tmp_path / "out" / "S1-00001-of-00001.parquet")


def test_attribute_columns_by_number_and_by_name(tmp_path):
    src = write(tmp_path, "e.csv", "A10,A2,ID,TS,A1,speed\n10,2,1,5,1,99\n")
    convert_csv(ConvertSpec(src), tmp_path / "auto")
    assert rows_of(tmp_path / "auto", "S1-*") == [{"ID": 1, "A1": 1.0, "A2": 2.0, "A3": 10.0, "TS": 5}]
    ds = convert_csv(ConvertSpec(src, attribute_columns=["speed", "A10"]), tmp_path / "named")
    assert rows_of(tmp_path / "named", "S1-*") == [{"ID": 1, "A1": 99.0, "A2": 10.0, "TS": 5}]
    assert ds.manifest["columns"][1:3] == [{"name": "A1", "source": "speed"}, {"name": "A2", "source": "A10"}]


TICKS_CSV = """when,sym,px,qty
2026-01-05T14:30:00Z,AAA,1000,100
2026-01-05T14:30:00.250,BBB,2050,10
2026-01-05T15:30:01+01:00,AAA,1001,300
2026-01-05 14:30:02.9999,CCC,7,1
"""


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_ticks_round_trip_with_correlations(tmp_path, fmt):
    src = write(tmp_path, "ticks.csv", TICKS_CSV)
    corr = write(tmp_path, "corr.csv", "symbol1,symbol2\nBBB,AAA\n")
    spec = ConvertSpec(src, kind="ticks", ts_column="when", ts_unit="iso", symbol_column="sym",
                       price_column="px", size_column="qty", correlations=corr, scale_factor=2, format=fmt)
    ds = convert_csv(spec, tmp_path / "out")
    suffix = "parquet" if fmt == "parquet" else "csv"
    path = tmp_path / "out" / f"ticks-00001-of-00001.{suffix}"
    if fmt == "parquet":
        assert pq.read_schema(path).remove_metadata() == TICK_FILE_SCHEMA
    else:
        schema = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=TICK_CSV_SCHEMA)).schema
        assert [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in TICK_CSV_SCHEMA]
        assert path.read_text().splitlines()[0] == '"symbol","price","size","tickTS"'
    assert rows_of(tmp_path / "out", f"ticks-*.{suffix}") == [
        {"symbol": "AAA", "price": 1000, "size": 100, "tickTS": T0},
        {"symbol": "BBB", "price": 2050, "size": 10, "tickTS": T0 + 250},
        {"symbol": "AAA", "price": 1001, "size": 300, "tickTS": T0 + 1000},
        {"symbol": "CCC", "price": 7, "size": 1, "tickTS": T0 + 2999},
    ]
    aux = json.loads((tmp_path / "out" / "pairs-aux.json").read_text())
    # 25 x SF = 50 strategies, capped at what the one pair holds (10).
    assert aux == {"kind": "cepkit.pairs-aux", "schema_version": 1, "scale_factor": 2, "markets": 1,
                   "num_symbols": 3, "num_correlations": 1, "num_strategies": 10, "max_strategies_per_pair": 10,
                   "seed": None, "correlation": None,
                   "symbols": [{"symbol": s, "market": 0} for s in ("AAA", "BBB", "CCC")],
                   "correlations": [{"symbol1": "BBB", "symbol2": "AAA", "market": 0}]}
    assert ds.manifest["aux_file"] == "pairs-aux.json"
    assert ds.manifest["correlations_source"] == {"file": "corr.csv", "sha256": sha256_of(corr)}


def test_ticks_without_correlations_have_no_aux(tmp_path):
    src = write(tmp_path, "t.csv", "symbol,price,size,tickTS\nX,1,1,5\n")
    ds = convert_csv(ConvertSpec(src, kind="ticks"), tmp_path / "out")
    assert ds.manifest["aux_file"] is None and not (tmp_path / "out" / "pairs-aux.json").exists()


@pytest.mark.parametrize("unit, values, expected_ms", [
    ("s", ["1767623400", "1767623400.0019", "1767623400.123", "1.5e9"],
     [T0, T0 + 1, T0 + 123, None]),
    ("us", ["1767623400000000", "1767623400123456", "1767623400999999"], [T0, T0 + 123, T0 + 999]),
    ("ms", ["0", "1767623400000", "9223372036854775807"], [0, T0, 2**63 - 1]),
    ("iso", ["2026-01-05T14:30:00Z", "2026-01-05T14:30:00.123456", "2026-01-05T16:30:00.5+02:00",
             "2026-01-05T09:30:01-05:00"], [T0, T0 + 123, T0 + 500, T0 + 1000]),
])
def test_timestamp_units(tmp_path, unit, values, expected_ms):
    if expected_ms[-1] is None:   # 1.5e9 s is before the others: drop it, but check it parses
        values, expected_ms = values[:-1], expected_ms[:-1]
        assert csv_values.timestamp_parser("s")("1.5e9") == 1_500_000_000_000
    text = "ID,A1,TS\n" + "".join(f"{i},1,{v}\n" for i, v in enumerate(values, 1))
    convert_csv(ConvertSpec(write(tmp_path, "e.csv", text), ts_unit=unit), tmp_path / "out")
    assert [r["TS"] for r in rows_of(tmp_path / "out", "S1-*")] == expected_ms


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


def test_many_rows_split_into_files_in_time_order(tmp_path, monkeypatch):
    # Small batches and a small sample buffer exercise batching across chunks and stride doubling.
    monkeypatch.setattr(csv_rows, "CHUNK_ROWS", 97)
    monkeypatch.setattr(convert_order, "SPLIT_SAMPLES", 64)
    rng = np.random.default_rng(4)
    n = 5000
    ts = np.sort(rng.integers(0, 2000, n)) + T0   # many ties
    ids = rng.integers(1, 100, n)
    a1 = rng.uniform(1, 100, n)
    text = "ID,A1,TS\n" + "".join(f"{i},{a!r},{t}\n" for i, a, t in zip(ids.tolist(), a1.tolist(), ts.tolist()))
    calls = []
    ds = convert_csv(ConvertSpec(write(tmp_path, "e.csv", text), file_count=4, format="csv"), tmp_path / "out",
                     progress=lambda done, total: calls.append((done, total)))
    files = ds.manifest["files"]
    assert [f["path"] for f in files] == [f"S1-{i:05d}-of-00004.csv" for i in (1, 2, 3, 4)]
    assert sum(f["rows"] for f in files) == n and all(abs(f["rows"] - n / 4) < 0.05 * n for f in files)
    for a, b in zip(files, files[1:]):
        assert a["last_TS"] < b["first_TS"]   # ties stay in one file
    back = rows_of(tmp_path / "out", "S1-*.csv")
    assert [r["TS"] for r in back] == ts.tolist()
    assert [r["ID"] for r in back] == ids.tolist()
    assert [r["A1"] for r in back] == a1.tolist()   # doubles survive CSV -> Arrow -> CSV exactly
    assert calls and calls[-1][0] == 2 * n          # two passes


def test_split_sampler_keeps_every_stride_th_row():
    s = SplitSampler(capacity=8)
    for lo in range(0, 100, 7):
        s.add(np.arange(lo, min(lo + 7, 100)))
    assert s.rows == 100 and s.stride == 8
    assert s.samples == list(range(0, 100, 8))
    assert s.bounds(4) == [24, 48, 72]


# --- dollars, formatted times, default sizes, sorting ----------------------------------------

def test_dollar_prices_become_exact_cents_on_both_paths(tmp_path, monkeypatch):
    # Every price from 0.01 to 99.99 in the forms a CSV writer produces ("0.29", "39.8", "40"):
    # chunk 1 is plain (vectorized), chunk 2 has a "+" (per-value parser); both must be exact.
    monkeypatch.setattr(csv_rows, "CHUNK_ROWS", 5000)
    cents = list(range(1, 10_000))
    texts = [f"{c // 100}.{c % 100:02d}".rstrip("0").rstrip(".") for c in cents]
    texts[5000] = "+" + texts[5000]
    text = "symbol,price,size,tickTS\n" + "".join(f"S,{t},1,{i}\n" for i, t in enumerate(texts))
    convert_csv(ConvertSpec(write(tmp_path, "t.csv", text), kind="ticks", price_unit="dollars"), tmp_path / "out")
    assert texts[28] == "0.29" and texts[3979] == "39.8" and texts[3999] == "40"
    assert [r["price"] for r in rows_of(tmp_path / "out", "ticks-*")] == cents


def test_formatted_times(tmp_path):
    text = ("symbol,price,size,date\n"
            "A,1,1,Jan 1 2000\n"
            "A,1,1,Feb 29 2000\n"
            "A,1,1, Dec 31 2000 \n")
    convert_csv(ConvertSpec(write(tmp_path, "t.csv", text), kind="ticks", ts_column="date", ts_format="%b %d %Y"),
                tmp_path / "out")
    assert [r["tickTS"] for r in rows_of(tmp_path / "out", "ticks-*")] == [946684800000, 951782400000, 978220800000]
    text = "ID,A1,when\n1,1,2026-01-05 15:30:00.123999+0100\n2,1,2026-01-05 14:30:00.5+0000\n"
    convert_csv(ConvertSpec(write(tmp_path, "e.csv", text), ts_column="when", ts_format="%Y-%m-%d %H:%M:%S.%f%z"),
                tmp_path / "micro")
    assert [r["TS"] for r in rows_of(tmp_path / "micro", "S1-*")] == [T0 + 123, T0 + 500]


def test_many_formatted_times_take_the_pandas_path_and_agree(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_rows, "CHUNK_ROWS", 300)
    days = np.arange(0, 1000)
    texts = [str(np.datetime64("2000-01-01") + int(d)) for d in days]   # 2000-01-01, ...
    texts[700] = texts[700].replace("-0", "-")                         # 2001-12-1: strptime only
    text = "ID,A1,day\n" + "".join(f"{i},1,{t}\n" for i, t in enumerate(texts))
    convert_csv(ConvertSpec(write(tmp_path, "e.csv", text), ts_column="day", ts_format="%Y-%m-%d"), tmp_path / "out")
    assert [r["TS"] for r in rows_of(tmp_path / "out", "S1-*")] == (946684800000 + days * 86_400_000).tolist()


def test_default_size_only_when_the_column_is_absent(tmp_path):
    absent = write(tmp_path, "a.csv", "symbol,price,tickTS\nA,5,1\nB,6,2\n")
    ds = convert_csv(ConvertSpec(absent, kind="ticks", default_size=100), tmp_path / "absent")
    assert [r["size"] for r in rows_of(tmp_path / "absent", "ticks-*")] == [100, 100]
    assert ds.manifest["columns"][2] == {"name": "size", "source": None, "value": 100}
    present = write(tmp_path, "p.csv", "symbol,price,size,tickTS\nA,5,7,1\nB,6,8,2\n")
    ds = convert_csv(ConvertSpec(present, kind="ticks", default_size=100), tmp_path / "present")
    assert [r["size"] for r in rows_of(tmp_path / "present", "ticks-*")] == [7, 8]
    assert ds.manifest["columns"][2] == {"name": "size", "source": "size"}


SHUFFLED_TICKS = """symbol,price,size,tickTS
B,20,1,300
A,10,1,100
B,21,2,100

A,11,3,200
C,30,4,100
A,12,5,300
"""


@pytest.mark.parametrize("fmt, files", [("parquet", 1), ("csv", 2), ("parquet", 3)])
def test_sort_is_stable_and_splits(tmp_path, fmt, files):
    src = write(tmp_path, "t.csv", SHUFFLED_TICKS)
    ds = convert_csv(ConvertSpec(src, kind="ticks", sort=True, format=fmt, file_count=files), tmp_path / "out")
    back = rows_of(tmp_path / "out", "ticks-*")
    # Ties keep file order: at 100 A, B, C as in the file; at 300 B before A.
    assert [(r["symbol"], r["price"], r["tickTS"]) for r in back] == [
        ("A", 10, 100), ("B", 21, 100), ("C", 30, 100), ("A", 11, 200), ("B", 20, 300), ("A", 12, 300)]
    assert [f["rows"] for f in ds.manifest["files"]] == {1: [6], 2: [3, 3], 3: [3, 1, 2]}[files]
    assert (ds.manifest["start_epoch_ms"], ds.manifest["last_epoch_ms"]) == (100, 300)
    assert ds.manifest["spec"]["sort"] is True


def test_sort_over_many_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_rows, "CHUNK_ROWS", 97)
    rng = np.random.default_rng(7)
    n = 3000
    ts = rng.integers(0, 500, n)
    text = "ID,A1,TS\n" + "".join(f"{i},{i / 7!r},{t}\n" for i, t in enumerate(ts.tolist()))
    ds = convert_csv(ConvertSpec(write(tmp_path, "e.csv", text), sort=True, file_count=4), tmp_path / "out")
    order = np.argsort(ts, kind="stable")
    back = rows_of(tmp_path / "out", "S1-*")
    assert [r["ID"] for r in back] == order.tolist()
    assert [r["TS"] for r in back] == ts[order].tolist()
    assert [r["A1"] for r in back] == [i / 7 for i in order.tolist()]
    files = ds.manifest["files"]
    assert sum(f["rows"] for f in files) == n and all(f["rows"] > 0.2 * n for f in files)
    for a, b in zip(files, files[1:]):
        assert a["last_TS"] < b["first_TS"]


def test_sort_of_sorted_input_changes_nothing(tmp_path):
    src = write(tmp_path, "e.csv", MICRO_CSV)
    plain = convert_csv(ConvertSpec(src, file_count=2), tmp_path / "plain")
    sorted_ = convert_csv(ConvertSpec(src, file_count=2, sort=True), tmp_path / "sorted")
    assert [f["sha256"] for f in plain.manifest["files"]] == [f["sha256"] for f in sorted_.manifest["files"]]


@pytest.mark.parametrize("sort", [False, True])
def test_files_more_than_rows_or_times_is_refused(tmp_path, sort):
    src = write(tmp_path, "e.csv", "ID,A1,TS\n1,1,5\n2,1,5\n3,1,9\n")
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, file_count=10, sort=sort), tmp_path / "out")
    assert str(err.value) == f"{src}: --files 10 but the input has 3 rows"
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, file_count=3, sort=sort), tmp_path / "out")
    assert str(err.value) == (f"{src}: --files 3 but the input's 3 rows have only 2 distinct TS values "
                              f"(rows with the same time stay in one file)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.csv"]


def test_ties_never_leave_a_file_empty(tmp_path):
    # The old split put the first bound at the first time (file 1 empty) when ties fill the front.
    src = write(tmp_path, "e.csv", "ID,A1,TS\n" + "".join(f"{i},1,{t}\n" for i, t in enumerate([1] * 6 + [2, 3])))
    ds = convert_csv(ConvertSpec(src, file_count=3), tmp_path / "out")
    assert [f["rows"] for f in ds.manifest["files"]] == [6, 1, 1]
    assert convert_order.split_bounds(np.array([1, 1, 1, 1, 1, 1, 2, 3]), 1, 8, 2) == [2]


# --- the real-looking CSV in tests/data/real ------------------------------------------------

REAL = Path(__file__).parent / "data" / "real"
REAL_ARGS = ["--kind", "ticks", "--ts-column", "date", "--price-unit", "dollars", "--ts-format", "%b %d %Y",
             "--default-size", "100", "--sort", "--correlations", str(REAL / "pairs.csv")]


def test_monthly_closes_convert_with_the_issue_options(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["datagen", "convert", str(REAL / "monthly-closes.csv"), *REAL_ARGS, "--files", "2",
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)
    source = pacsv.read_csv(REAL / "monthly-closes.csv",
                            convert_options=pacsv.ConvertOptions(column_types={"price": pa.string()})).to_pylist()
    assert len(source) == 120 and source[0] == {"symbol": "AAA", "date": "Jan 1 2000", "price": "39.81"}
    back = rows_of(out, "ticks-*.parquet")
    assert len(back) == 120
    ts = [r["tickTS"] for r in back]
    assert ts == sorted(ts) and ts[0] == 946684800000 and len(set(ts)) == 24   # 24 months
    # Ties (one row per symbol each month) keep the file's order: AAA..EEE.
    assert [r["symbol"] for r in back[:5]] == ["AAA", "BBB", "CCC", "DDD", "EEE"]
    assert all(r["size"] == 100 for r in back)
    # Cents exactly from the decimal text ("0.87" -> 87, "33.6" -> 3360, "14" -> 1400).
    cents = {(s["symbol"], s["date"]): int(Decimal(s["price"]) * 100) for s in source}
    month = {t: i for i, t in enumerate(sorted(set(ts)))}
    names = [f"{m} 1 {y}" for y in (2000, 2001) for m in "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()]
    assert {(r["symbol"], names[month[r["tickTS"]]]): r["price"] for r in back} == cents
    m = json.loads((out / "manifest.json").read_text())
    assert m["spec"] | {"correlations": None} == {
        "input": "monthly-closes.csv", "kind": "ticks", "ts_column": "date", "ts_unit": None, "ts_format": "%b %d %Y",
        "id_column": "ID", "attribute_columns": None, "symbol_column": "symbol", "price_column": "price",
        "price_unit": "dollars", "size_column": "size", "default_size": 100, "correlations": None, "scale_factor": 1,
        "format": "parquet", "file_count": 2, "sort": True}
    assert [f["rows"] for f in m["files"]] == [60, 60]
    aux = json.loads((out / "pairs-aux.json").read_text())
    assert aux["num_symbols"] == 5 and aux["correlations"] == [
        {"symbol1": "AAA", "symbol2": "BBB", "market": 0}, {"symbol1": "CCC", "symbol2": "DDD", "market": 0}]


def test_monthly_closes_without_sort_say_how_to_fix_it(tmp_path, capsys):
    args = ["datagen", "convert", str(REAL / "monthly-closes.csv"), *REAL_ARGS, "--out", str(tmp_path / "o")]
    args.remove("--sort")
    assert main(args) == 2
    # Line 26 is BBB's first row (Jan 2000), after AAA's 24 months.
    assert capsys.readouterr().err == (f"cepkit: error: {REAL / 'monthly-closes.csv'}:26: date Jan 1 2000 is earlier "
                                       f"than the previous row's Dec 1 2001 (rows must be in time order; --sort sorts "
                                       f"them)\n")
    i = args.index("--default-size")
    del args[i:i + 2]
    assert main(args) == 2
    assert capsys.readouterr().err.endswith(
        ":1: missing column 'size' (columns: symbol, date, price); give --default-size N if the file has no sizes\n")


# --- bad input: one line with file:line and field, nothing left behind ----------------------

BAD_MICRO = [
    # name, csv text, spec changes, expected message after "<file>:"
    ("bad-ts", "ID,A1,TS\n1,2,1000\n2,3,abc\n", {},
     "3: field 'TS': expected an integer (ms), got 'abc'"),
    ("out-of-order", "ID,A1,TS\n1,2,1000\n2,3,2000\n\n3,4,1000\n", {},
     "5: TS 1000 is earlier than the previous row's 2000 (rows must be in time order; --sort sorts them)"),
    ("missing-id", "a,b\n1,2\n", {}, "1: missing column 'ID' (columns: a, b)"),
    ("column-count", "ID,A1,TS\n1,2,1000\n2,3\n", {},
     "3: expected 3 fields as in the header (line 1), got 2"),
    ("empty", "", {}, "1: empty file (expected a header line with column names)"),
    ("blank-lines-only", "\n\n", {}, "1: empty file (expected a header line with column names)"),
    ("header-only", "ID,A1,TS\n", {}, "2: no data rows after the header"),
    ("non-numeric-attribute", "ID,A1,A2,TS\n1,2,3,1000\n2,x,3,1001\n", {},
     "3: field 'A1': expected a number, got 'x'"),
    ("nan-attribute", "ID,A1,TS\n1,nan,1000\n", {}, "2: field 'A1': expected a number, got 'nan'"),
    ("huge-attribute", "ID,A1,TS\n1,1e999,1000\n", {}, "2: field 'A1': expected a finite number, got '1e999'"),
    ("id-overflow", "ID,A1,TS\n3000000000,1,1000\n", {}, "2: field 'ID': 3000000000 does not fit a 32-bit integer"),
    ("id-float", "ID,A1,TS\n1.5,1,1000\n", {}, "2: field 'ID': expected an integer, got '1.5'"),
    ("negative-ts", "ID,A1,TS\n1,1,-5\n", {}, "2: field 'TS': -5 ms is outside the epoch-ms range [0, 2^63)"),
    ("no-attributes", "ID,TS\n1,1000\n", {},
     "1: no attribute columns named A<number> (columns: ID, TS); name them with --attributes"),
    ("duplicate-column", "ID,A1,A1,TS\n1,1,1,1\n", {}, "1: duplicate column 'A1' in the header"),
    ("bad-iso", "ID,A1,TS\n1,1,2026-13-01T00:00:00\n", {"ts_unit": "iso"},
     "2: field 'TS': expected an ISO-8601 datetime, got '2026-13-01T00:00:00'"),
    ("bad-seconds", "ID,A1,TS\n1,1,12h\n", {"ts_unit": "s"}, "2: field 'TS': expected a number (s), got '12h'"),
    ("bad-quote", 'ID,A1,TS\n1,1,1000\n2,"3"x,1001\n', {}, "3: malformed CSV: ',' expected after '\"'"),
    # A quoted field spanning two lines: the next record starts on line 4.
    ("multiline-record", 'ID,A1,note,TS\n1,1,"two\nlines",1000\n2,1,x,999\n', {},
     "4: TS 999 is earlier than the previous row's 1000 (rows must be in time order; --sort sorts them)"),
    # A bad record spanning lines 3-4 is reported at the line it starts on.
    ("multiline-bad-record", 'ID,A1,note,TS\n1,1,x,1000\n2,zz,"two\nlines",1001\n', {},
     "3: field 'A1': expected a number, got 'zz'"),
    # Row 3 is bad in TS, row 2 in A1: the earlier row is reported whatever the column.
    ("first-bad-row-wins", "ID,A1,TS\n1,1,1000\n1,y,1001\n1,1,zz\n", {},
     "3: field 'A1': expected a number, got 'y'"),
    # NaN and infinities are never a null or a float in an integer column, nor a double attribute.
    ("nan-id", "ID,A1,TS\n1,1,1000\nnan,1,1001\n", {}, "3: field 'ID': expected an integer, got 'nan'"),
    ("NaN-id", "ID,A1,TS\nNaN,1,1000\n", {}, "2: field 'ID': expected an integer, got 'NaN'"),
    ("inf-id", "ID,A1,TS\n1,1,1000\n-inf,1,1001\n", {}, "3: field 'ID': expected an integer, got '-inf'"),
    ("NaN-attribute", "ID,A1,A2,TS\n1,1,1,1000\n2,1,NaN,1001\n", {},
     "3: field 'A2': expected a number, got 'NaN'"),
    ("inf-attribute", "ID,A1,TS\n1,inf,1000\n", {}, "2: field 'A1': expected a number, got 'inf'"),
    ("minus-inf-attribute", "ID,A1,TS\n1,-inf,1000\n", {}, "2: field 'A1': expected a number, got '-inf'"),
    ("Infinity-attribute", "ID,A1,TS\n1,Infinity,1000\n", {}, "2: field 'A1': expected a number, got 'Infinity'"),
    ("nan-ts", "ID,A1,TS\n1,1,nan\n", {}, "2: field 'TS': expected an integer (ms), got 'nan'"),
    ("empty-id", "ID,A1,TS\n1,1,1000\n,1,1001\n", {}, "3: field 'ID': expected an integer, got ''"),
    # Found by the fuzzer: a form feed in a column name split the "one line" for str.splitlines.
    ("control-char-in-header", "I\x0cD,A1,TS\n1,1,1\n", {}, "1: missing column 'ID' (columns: I\\x0cD, A1, TS)"),
    ("line-separator-in-time", "ID,A1,T\u2028S\n1,1,5\n1,1,4\n", {"ts_column": "T\u2028S"},
     "3: T\\u2028S 4 is earlier than the previous row's 5 (rows must be in time order; --sort sorts them)"),
    ("huge-id", "ID,A1,TS\n" + "9" * 100 + ",1,1000\n", {},
     "2: field 'ID': " + "9" * 60 + "... is out of range (100 digits)"),
    ("huge-seconds", "ID,A1,TS\n1,1,1e999999999\n", {"ts_unit": "s"},
     "2: field 'TS': 1e999999999 s is outside the epoch-ms range [0, 2^63)"),
    # Garbage rows: wrong field count, binary junk (NUL and control bytes are valid UTF-8).
    ("junk-row", "ID,A1,TS\n1,1,1000\n\x00\x01\x02\x7f\n2,1,1001\n", {},
     "3: expected 3 fields as in the header (line 1), got 1"),
    ("junk-field", "ID,A1,TS\n1,1,1000\n2,\x00\x1b[0m,1001\n", {},
     "3: field 'A1': expected a number, got '\\x00\\x1b[0m'"),
    ("too-many-fields", "ID,A1,TS\n1,1,1000\n2,1,1001,4\n", {},
     "3: expected 3 fields as in the header (line 1), got 4"),
    ("header-after-blank-lines", "\n\nID,A1,TS\n1,1,1000\n2,1\n", {},
     "5: expected 3 fields as in the header (line 3), got 2"),
    # A lone CR ends a line, as for the csv module: the bad row is on line 3.
    ("cr-line-ends", "ID,A1,TS\r1,1,1000\r2,x,1001\r", {}, "3: field 'A1': expected a number, got 'x'"),
    ("crlf-line-ends", "ID,A1,TS\r\n1,1,1000\r\n2,x,1001\r\n", {}, "3: field 'A1': expected a number, got 'x'"),
    # An unclosed quote is reported on the line its field starts on, not at the end of the file.
    ("unclosed-quote-at-end", 'ID,A1,TS\n1,1,1000\n2,"3,1001\n4,5,1002\n6,7,1003\n', {},
     "3: malformed CSV: unclosed quote (the quoted field that starts on this line runs to the end of the file)"),
    ("unclosed-quote-after-multiline-field", 'ID,A1,note,TS\n1,1,"a\nb",1000\n2,1,"c""\nd,1001\n\n', {},
     "4: malformed CSV: unclosed quote (the quoted field that starts on this line runs to the end of the file)"),
    ("unclosed-quote-last-line", 'ID,A1,TS\n1,1,1000\n2,1,"1001', {},
     "3: malformed CSV: unclosed quote (the quoted field that starts on this line runs to the end of the file)"),
    ("unclosed-quote-in-later-field", 'ID,A1,note,TS\n1,1,"ok",1000\n2,1,x,"1001\n\n\n', {},
     "3: malformed CSV: unclosed quote (the quoted field that starts on this line runs to the end of the file)"),
]


@pytest.mark.parametrize("name, text, changes, message", BAD_MICRO, ids=[b[0] for b in BAD_MICRO])
def test_bad_micro_csv(tmp_path, name, text, changes, message):
    src = write(tmp_path, "events.csv", text)
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, **changes), tmp_path / "out")
    assert str(err.value) == f"{src}:{message}"
    assert len(str(err.value).splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.csv"]


DOLLARS = {"price_unit": "dollars"}
BAD_TICKS = [
    ("negative-price", "symbol,price,size,tickTS\nA,100,10,1\nB,-5,10,2\n", {},
     "3: field 'price': expected a positive integer (cents), got '-5'"),
    ("decimal-price", "symbol,price,size,tickTS\nA,12.5,10,1\n", {},
     "2: field 'price': expected a positive integer (cents), got '12.5'"),
    ("zero-size", "symbol,price,size,tickTS\nA,1,0,1\n", {}, "2: field 'size': expected a positive integer, got '0'"),
    ("empty-symbol", "symbol,price,size,tickTS\n ,1,1,1\n", {},
     "2: field 'symbol': expected a symbol, got an empty value"),
    ("missing-tickTS", "symbol,price,size,TS\nA,1,1,1\n", {},
     "1: missing column 'tickTS' (columns: symbol, price, size, TS)"),
    ("missing-size", "symbol,price,tickTS\nA,1,1\n", {},
     "1: missing column 'size' (columns: symbol, price, tickTS); give --default-size N if the file has no sizes"),
    ("out-of-order", "symbol,price,size,tickTS\nA,1,1,5\nB,1,1,7\n\nA,2,1,6\n", {},
     "5: tickTS 6 is earlier than the previous row's 7 (rows must be in time order; --sort sorts them)"),
    ("nan-price", "symbol,price,size,tickTS\nA,nan,1,1\n", {},
     "2: field 'price': expected a positive integer (cents), got 'nan'"),
    ("NaN-size", "symbol,price,size,tickTS\nA,1,1,1\nA,1,NaN,2\n", {},
     "3: field 'size': expected a positive integer, got 'NaN'"),
    ("inf-size", "symbol,price,size,tickTS\nA,1,inf,1\n", {}, "2: field 'size': expected a positive integer, got 'inf'"),
    ("inf-dollars", "symbol,price,size,tickTS\nA,1.5,1,1\nA,inf,1,2\n", DOLLARS,
     "3: field 'price': expected a positive price in dollars (like 39.81), got 'inf'"),
    ("nan-dollars", "symbol,price,size,tickTS\nA,NaN,1,1\n", DOLLARS,
     "2: field 'price': expected a positive price in dollars (like 39.81), got 'NaN'"),
    ("sub-cent-dollars", "symbol,price,size,tickTS\nA,39.81,1,1\nA,39.815,1,2\n", DOLLARS,
     "3: field 'price': 39.815 dollars is not a whole number of cents (more than 2 decimals)"),
    ("zero-dollars", "symbol,price,size,tickTS\nA,0.00,1,1\n", DOLLARS,
     "2: field 'price': expected a positive price in dollars (like 39.81), got '0.00'"),
    ("bad-formatted-time", "symbol,price,size,date\nA,1,1,Jan 1 2000\nA,1,1,Jam 2 2000\n",
     {"ts_column": "date", "ts_format": "%b %d %Y"},
     "3: field 'date': expected a time like '%b %d %Y', got 'Jam 2 2000'"),
    ("formatted-time-before-1970", "symbol,price,size,date\nA,1,1,Dec 31 1969\n",
     {"ts_column": "date", "ts_format": "%b %d %Y"},
     "2: field 'date': -86400000 ms is outside the epoch-ms range [0, 2^63)"),
    ("formatted-time-nan", "symbol,price,size,date\nA,1,1,nan\n", {"ts_column": "date", "ts_format": "%b %d %Y"},
     "2: field 'date': expected a time like '%b %d %Y', got 'nan'"),
    ("default-size-but-bad-price", "symbol,price,tickTS\nA,1,1\nA,x,2\n", {"default_size": 5},
     "3: field 'price': expected a positive integer (cents), got 'x'"),
]


@pytest.mark.parametrize("name, text, changes, message", BAD_TICKS, ids=[b[0] for b in BAD_TICKS])
def test_bad_ticks_csv(tmp_path, name, text, changes, message):
    src = write(tmp_path, "ticks.csv", text)
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, kind="ticks", **changes), tmp_path / "out")
    assert str(err.value) == f"{src}:{message}"
    assert not (tmp_path / "out").exists()


def test_error_in_a_later_batch_names_the_right_line(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_rows, "CHUNK_ROWS", 10)
    lines = ["ID,A1,TS"] + [f"{i},1,{i}" for i in range(1, 40)]
    lines[33] = "33,1,oops"       # physical line 34
    src = write(tmp_path, "e.csv", "\n".join(lines) + "\n")
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, file_count=2), tmp_path / "out")
    assert str(err.value) == f"{src}:34: field 'TS': expected an integer (ms), got 'oops'"
    # Time order is checked across batch boundaries too (line 21 starts the third batch).
    lines[33] = "33,1,33"
    lines[20] = "20,1,5"
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(CepkitError, match=r":21: TS 5 is earlier than the previous row's 19 "):
        convert_csv(ConvertSpec(src), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_not_utf8_names_the_line(tmp_path):
    src = tmp_path / "e.csv"
    src.write_bytes(b"ID,A1,TS\n1,1,1\n2,\xff,2\n")
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src), tmp_path / "out")
    assert str(err.value) == f"{src}:3: not UTF-8 text"


@pytest.mark.parametrize("corr_text, message", [
    ("symbol1,symbol2\nAAA,BBB\nCCC,ZZZ\n", "3: symbol 'ZZZ' does not occur in {src}"),
    ("first,second\nAAA,BBB\n", "1: missing column 'symbol1' (columns: first, second)"),
    ("symbol1,symbol2\nAAA,BBB\nBBB,CCC\n",
     "3: symbol 'BBB' is already paired on line 2 (a symbol is in at most one pair)"),
    ("symbol1,symbol2\nAAA,AAA\n", "2: symbol 'AAA' cannot be paired with itself"),
    ("symbol1,symbol2\n", "2: no pairs after the header"),
])
def test_bad_correlations(tmp_path, corr_text, message):
    src = write(tmp_path, "ticks.csv", "symbol,price,size,tickTS\nAAA,1,1,1\nBBB,1,1,2\nCCC,1,1,3\n")
    corr = write(tmp_path, "corr.csv", corr_text)
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, kind="ticks", correlations=corr), tmp_path / "out")
    assert str(err.value) == f"{corr}:" + message.format(src=src)
    assert not (tmp_path / "out").exists()


def test_unclosed_quote_that_hits_the_field_size_limit(tmp_path):
    # A quote left open in a big file makes the reader fail at the field-size limit, far below.
    src = write(tmp_path, "e.csv", 'ID,A1,TS\n1,1,1000\n2,"1,1001\n' + "".join(f"{i},1,{i}\n" for i in range(3, 200)))
    limit = csv.field_size_limit(500)
    try:
        with pytest.raises(CepkitError) as err:
            convert_csv(ConvertSpec(src), tmp_path / "out")
    finally:
        csv.field_size_limit(limit)
    assert str(err.value) == (f"{src}:3: malformed CSV: unclosed quote (the quoted field that starts on this "
                              f"line runs to the field-size limit (500 characters))")


def test_undecodable_line_counts_lone_cr_as_a_line_end(tmp_path):
    src = tmp_path / "e.csv"
    src.write_bytes(b"ID,A1,TS\r1,1,1\r2,1,2\n3,\xc3\x28,3\n")
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src), tmp_path / "out")
    assert str(err.value) == f"{src}:4: not UTF-8 text"


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.csv", "input file not found"),
    (lambda d: (d / "adir").mkdir() or d / "adir", "input file is a directory, not a CSV file"),
    (lambda d: (d / "afile").write_text("x") and d / "afile" / "e.csv", "input file not found"),
])
def test_unreadable_input_is_one_line(tmp_path, make, message):
    # Tests run as root, so "permission denied" is simulated by paths no one can read as a file.
    path = make(tmp_path)
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(path), tmp_path / "out")
    assert str(err.value) == f"{path}: {message}"
    assert not (tmp_path / "out").exists()


def test_unreadable_correlations_is_one_line(tmp_path):
    src = write(tmp_path, "t.csv", "symbol,price,size,tickTS\nA,1,1,1\n")
    (tmp_path / "corr").mkdir()
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, kind="ticks", correlations=tmp_path / "corr"), tmp_path / "out")
    assert str(err.value) == f"{tmp_path / 'corr'}: correlations file is a directory, not a CSV file"


@pytest.mark.parametrize("changes, message", [
    ({"kind": "logs"}, "convert: kind must be one of micro, ticks, got 'logs'"),
    ({"ts_unit": "s", "ts_format": "%Y"},
     "convert: --ts-unit and --ts-format cannot be combined (a time in a --ts-format pattern has no unit)"),
    ({"ts_unit": "ms", "ts_format": "%Y"},
     "convert: --ts-unit and --ts-format cannot be combined (a time in a --ts-format pattern has no unit)"),
    ({"ts_format": "%H:%M"}, "convert: --ts-format '%H:%M' is not a usable strptime pattern: it has no year (%Y or %y)"),
    ({"ts_format": "%Y %q"},
     "convert: --ts-format '%Y %q' is not a usable strptime pattern: 'q' is a bad directive in format '%Y %q'"),
    ({"kind": "ticks", "price_unit": "euros"}, "convert: price unit must be one of cents, dollars, got 'euros'"),
    ({"price_unit": "dollars"}, "convert: --price-unit only goes with --kind ticks"),
    ({"default_size": 100}, "convert: --default-size only goes with --kind ticks"),
    ({"kind": "ticks", "default_size": 0}, "convert: default size must be a positive 32-bit integer, got 0"),
    ({"kind": "ticks", "default_size": 2**31}, "convert: default size must be a positive 32-bit integer, got 2147483648"),
    ({"sort": "yes"}, "convert: sort must be true or false, got 'yes'"),
    ({"ts_unit": "ns"}, "convert: ts unit must be one of ms, s, us, iso, got 'ns'"),
    ({"file_count": 0}, "convert: file count must be a positive integer, got 0"),
    ({"correlations": "c.csv"}, "convert: a correlations file only goes with --kind ticks"),
    ({"id_column": "TS"}, "convert: column 'TS' is used for two fields"),
    ({"attribute_columns": []}, "convert: attribute columns must not be an empty list"),
])
def test_spec_checks_itself(changes, message):
    with pytest.raises(CepkitError) as err:
        ConvertSpec("x.csv", **changes)
    assert str(err.value) == message


def test_refuses_existing_output(tmp_path):
    src = write(tmp_path, "e.csv", "ID,A1,TS\n1,1,1\n")
    (tmp_path / "out").mkdir()
    with pytest.raises(CepkitError, match="already exists"):
        convert_csv(ConvertSpec(src), tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


# --- CLI --------------------------------------------------------------------------------------

def test_cli_convert(tmp_path, capsys):
    src = write(tmp_path, "events.csv", MICRO_CSV)
    out = tmp_path / "ds"
    assert main(["datagen", "convert", str(src), "--kind", "micro", "--ts-column", "TS", "--ts-unit", "ms",
                 "--files", "2", "--format", "csv", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)
    assert [r["ID"] for r in rows_of(out, "S1-*.csv")] == [7, 8, -3]
    assert json.loads((out / "manifest.json").read_text())["spec"]["file_count"] == 2


def test_cli_convert_ticks_default_output_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = write(tmp_path, "my ticks.csv", TICKS_CSV)
    corr = write(tmp_path, "corr.csv", "symbol1,symbol2\nAAA,CCC\n")
    args = ["datagen", "convert", str(src), "--kind", "ticks", "--ts-column", "when", "--ts-unit", "iso",
            "--symbol-column", "sym", "--price-column", "px", "--size-column", "qty", "--correlations", str(corr)]
    assert main(args) == 0
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert out == "data/convert-ticks-my ticks"
    assert json.loads((tmp_path / out / "pairs-aux.json").read_text())["num_correlations"] == 1


def test_cli_convert_bad_csv_one_line(tmp_path, capsys):
    src = write(tmp_path, "events.csv", "ID,A1,TS\n1,2,1000\n2,3,abc\n")
    assert main(["datagen", "convert", str(src), "--kind", "micro", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"cepkit: error: {src}:3: field 'TS': expected an integer (ms), got 'abc'\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("extra, message", [
    (["--ts-unit", "s", "--ts-format", "%Y"],
     "convert: --ts-unit and --ts-format cannot be combined (a time in a --ts-format pattern has no unit)"),
    (["--default-size", "-3", "--kind", "ticks"], "convert: default size must be a positive 32-bit integer, got -3"),
])
def test_cli_option_errors_are_one_line(tmp_path, capsys, extra, message):
    src = write(tmp_path, "events.csv", MICRO_CSV)
    argv = ["datagen", "convert", str(src), "--kind", "micro", *extra, "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"cepkit: error: {message}\n"


@pytest.mark.parametrize("name", ["a-directory", "under-a-file"])
def test_cli_unreadable_input_is_one_line(tmp_path, capsys, name):
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "plain").write_text("ID,A1,TS\n1,1,1\n")
    path = {"a-directory": tmp_path / "a-directory", "under-a-file": tmp_path / "plain" / "e.csv"}[name]
    assert main(["datagen", "convert", str(path), "--kind", "micro", "--out", str(tmp_path / "out")]) == 2
    message = "input file is a directory, not a CSV file" if name == "a-directory" else "input file not found"
    assert capsys.readouterr().err == f"cepkit: error: {path}: {message}\n"
    assert not (tmp_path / "out").exists()
