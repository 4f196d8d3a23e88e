"""The CSV converter on the real-looking CSV of tests/data/real (monthly closes: dates as text,
prices in dollars, no sizes, grouped by symbol) through the CLI."""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.csv as pacsv

from cepkit_app.cli import main
from tests.datagen.convert_helpers import rows_of
from tests.helpers import TESTS_DIR


# --- the real-looking CSV in tests/data/real ------------------------------------------------

REAL = TESTS_DIR / "data" / "real"
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
