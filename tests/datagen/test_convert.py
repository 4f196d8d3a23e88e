"""The CSV converter on good input: round trips, timestamp units, file splits, dollar prices,
strptime patterns, default sizes, sorting, and the CLI. Bad input is tests/datagen/test_convert_errors.py,
the value parsers tests/datagen/test_convert_parsers.py, the real-looking CSV tests/datagen/test_convert_real_csv.py."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import datagen.convert_csv as csv_rows
import datagen.convert_order as convert_order
import datagen.csv_values as csv_values
from datagen.convert import ConvertSpec, convert_csv
from datagen.convert_order import SplitSampler
from datagen.pairs import TICK_CSV_SCHEMA, TICK_FILE_SCHEMA
from cepkit_app.cli import main
from kit.datafiles import sha256_of
from kit.errors import CepkitError
from tests.datagen.convert_helpers import T0, rows_of, write


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


# --- file splits ----------------------------------------------------------------------------

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
