"""The CSV converter: round trips, timestamp units, file splits, one-line errors with file:line,
the correlations file and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import datagen.convert as convert
import datagen.csv_values as csv_values
from datagen.convert import ConvertSpec, SplitSampler, convert_csv
from datagen.output import sha256_of
from datagen.pairs import TICK_CSV_SCHEMA, TICK_FILE_SCHEMA
from kit.cli import main
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
    assert aux == {"kind": "cepkit.pairs-aux", "schema_version": 1, "scale_factor": 2, "markets": 1,
                   "num_symbols": 3, "num_correlations": 1, "num_strategies": 50, "max_strategies_per_pair": 10,
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
    ("fast_int32", "parse_int32", ["1", "-3", "2147483647", "2147483648", "-2147483649", "0x10", "+5", " 5"]),
    ("fast_double", "parse_double", ["1", "-2.5", "1e3", ".5", "5.", "nan", "inf", "1e999", "0x1p3", "1_0"]),
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


def test_many_rows_split_into_files_in_time_order(tmp_path, monkeypatch):
    # Small batches and a small sample buffer exercise batching across chunks and stride doubling.
    monkeypatch.setattr(convert, "CHUNK_ROWS", 97)
    monkeypatch.setattr(convert, "SPLIT_SAMPLES", 64)
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


# --- bad input: one line with file:line and field, nothing left behind ----------------------

BAD_MICRO = [
    # name, csv text, spec changes, expected message after "<file>:"
    ("bad-ts", "ID,A1,TS\n1,2,1000\n2,3,abc\n", {},
     "3: field 'TS': expected an integer (ms), got 'abc'"),
    ("out-of-order", "ID,A1,TS\n1,2,1000\n2,3,2000\n\n3,4,1000\n", {},
     "5: TS 1000 is earlier than the previous row's 2000 (rows must be in time order)"),
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
     "4: TS 999 is earlier than the previous row's 1000 (rows must be in time order)"),
    # A bad record spanning lines 3-4 is reported at the line it starts on.
    ("multiline-bad-record", 'ID,A1,note,TS\n1,1,x,1000\n2,zz,"two\nlines",1001\n', {},
     "3: field 'A1': expected a number, got 'zz'"),
    # Row 3 is bad in TS, row 2 in A1: the earlier row is reported whatever the column.
    ("first-bad-row-wins", "ID,A1,TS\n1,1,1000\n1,y,1001\n1,1,zz\n", {},
     "3: field 'A1': expected a number, got 'y'"),
]


@pytest.mark.parametrize("name, text, changes, message", BAD_MICRO, ids=[b[0] for b in BAD_MICRO])
def test_bad_micro_csv(tmp_path, name, text, changes, message):
    src = write(tmp_path, "events.csv", text)
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, **changes), tmp_path / "out")
    assert str(err.value) == f"{src}:{message}"
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.csv"]


BAD_TICKS = [
    ("negative-price", "symbol,price,size,tickTS\nA,100,10,1\nB,-5,10,2\n",
     "3: field 'price': expected a positive integer (cents), got '-5'"),
    ("decimal-price", "symbol,price,size,tickTS\nA,12.5,10,1\n",
     "2: field 'price': expected a positive integer (cents), got '12.5'"),
    ("zero-size", "symbol,price,size,tickTS\nA,1,0,1\n", "2: field 'size': expected a positive integer, got '0'"),
    ("empty-symbol", "symbol,price,size,tickTS\n ,1,1,1\n", "2: field 'symbol': expected a symbol, got an empty value"),
    ("missing-tickTS", "symbol,price,size,TS\nA,1,1,1\n",
     "1: missing column 'tickTS' (columns: symbol, price, size, TS)"),
]


@pytest.mark.parametrize("name, text, message", BAD_TICKS, ids=[b[0] for b in BAD_TICKS])
def test_bad_ticks_csv(tmp_path, name, text, message):
    src = write(tmp_path, "ticks.csv", text)
    with pytest.raises(CepkitError) as err:
        convert_csv(ConvertSpec(src, kind="ticks"), tmp_path / "out")
    assert str(err.value) == f"{src}:{message}"
    assert not (tmp_path / "out").exists()


def test_error_in_a_later_batch_names_the_right_line(tmp_path, monkeypatch):
    monkeypatch.setattr(convert, "CHUNK_ROWS", 10)
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


@pytest.mark.parametrize("changes, message", [
    ({"kind": "logs"}, "convert: kind must be one of micro, ticks, got 'logs'"),
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
