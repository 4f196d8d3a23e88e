"""The CSV converter on bad input: one line with file:line (the exact line for junk rows, unclosed
quotes, CR line ends) and field, nothing left behind; unreadable inputs, the correlations file,
the spec's own checks and an existing output directory."""

from __future__ import annotations

import csv

import pytest

import datagen.convert_csv as csv_rows
from datagen.convert import ConvertSpec, convert_csv
from kit.errors import CepkitError
from tests.datagen.convert_helpers import write

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)


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
    # Symbols by the one rule the query generator and the strategies reader apply (issue 27).
    ("symbol-with-space", "symbol,price,size,tickTS\nBRK.B,1,1,1\nBRK B,1,1,2\n", {},
     "3: field 'symbol': 'BRK B' is not a ticker symbol (1 to 32 characters, each a letter A-Z or a-z, a digit, '.', '_' or '-')"),
    ("symbol-with-slash", "symbol,price,size,tickTS\nBF/B,1,1,1\n", {},
     "2: field 'symbol': 'BF/B' is not a ticker symbol (1 to 32 characters, each a letter A-Z or a-z, a digit, '.', '_' or '-')"),
    ("symbol-accented", "symbol,price,size,tickTS\nNESTLÉ,1,1,1\n", {},
     "2: field 'symbol': 'NESTLÉ' is not a ticker symbol (1 to 32 characters, each a letter A-Z or a-z, a digit, '.', '_' or '-')"),
    ("symbol-too-long", "symbol,price,size,tickTS\n" + "A" * 33 + ",1,1,1\n", {},
     "2: field 'symbol': '" + "A" * 33 + "' is not a ticker symbol (1 to 32 characters, each a letter A-Z or a-z, a digit, '.', '_' or '-')"),
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
    ("symbol1,symbol2\nAAA,BBB\nCCC,DD D\n",
     "3: field 'symbol2': 'DD D' is not a ticker symbol (1 to 32 characters, each a letter A-Z or a-z, a digit, '.', '_' or '-')"),
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
    # The strategies file of the dataset records the scale factor; the config's range (issue 27).
    ({"scale_factor": 10_001}, "convert: scale factor must be <= 10000, got 10001"),
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
