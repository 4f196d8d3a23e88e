"""Fuzzing `cepkit datagen convert` (both kinds, and the options of a monthly-closes CSV) with
mutated small CSVs.

Every case either converts, and then the dataset holds every record of the input, in time order,
or it fails by the contract of tests/fuzz.py: exit 2, one line naming the input file, no
traceback, nothing changed in the input's directory or the output's parent. Where the mutation
is one bad field or one bad row, the line must name that row's physical line (header = 1).
"""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import expect_user_error, fuzz_settings, run_cli, slow_settings, tree_digest

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

# name -> (valid CSV, options, columns with the kind of value each holds)
CASES = {
    "micro": ("ID,A1,A2,TS\n1,1.5,2,1000\n2,-2.5,3e2,1001\n3,0.25,4,1001\n4,1,.5,1005\n",
              ["--kind", "micro"], ["int", "double", "double", "ms"]),
    "ticks": ("symbol,price,size,tickTS\nAAA,100,10,1000\nBBB,2050,20,1001\nAAA,101,30,1001\nCCC,7,1,1005\n",
              ["--kind", "ticks", "--files", "2", "--format", "csv"], ["symbol", "positive", "positive", "ms"]),
    "monthly": ("symbol,date,price\nAAA,Jan 1 2000,39.81\nAAA,Feb 1 2000,40\nBBB,Jan 1 2000,0.29\n"
                "BBB,Feb 1 2000,12.5\n",
                ["--kind", "ticks", "--ts-column", "date", "--ts-format", "%b %d %Y", "--price-unit", "dollars",
                 "--default-size", "100", "--sort"], ["symbol", "date", "dollars"]),
}

# Values that are wrong for a kind of column wherever they stand (none holds a comma, quote or
# line end, so the row keeps its shape).
BAD = {
    "int": ["nan", "NaN", "inf", "-inf", "", "abc", "1.5", "1e3", "99999999999", "9" * 50, "0x10", "1_000"],
    "positive": ["nan", "NaN", "inf", "-inf", "", "0", "-5", "1.5", "99999999999", "9" * 5000, "\x00"],
    "double": ["nan", "NaN", "inf", "-inf", "Infinity", "", "abc", "1e999", "0x1p3", "1_0", "\x1b[0m"],
    "ms": ["nan", "", "-5", "abc", "1.5", "99999999999999999999", "1e3"],
    "symbol": ["", "   "],
    "dollars": ["39.815", "0", "0.00", "-1", "nan", "inf", "1e2", "$5", "", "21474836.48"],
    "date": ["Jam 1 2000", "nan", "NaT", "Dec 31 1969", "", "2000-01-01", "Feb 30 2000"],
}
# Text that ends up in a value: numbers at the edges, specials, junk.
NOISE = ["nan", "NaN", "inf", "-inf", "", " ", "0", "-1", "1e999", "9" * 30, "+5", "007", ".5", "abc",
         '"', '""', '"a,b"', "\x00", "\x7f", "é", "Jan 1 2000", "39.815", "\ufeff"]
LINE_END = re.compile(r"\r\n|\r|\n")


def physical_lines(data: bytes) -> int:
    text = data.decode("utf-8", errors="replace")
    ends = len(LINE_END.findall(text))
    return ends + (1 if text and not LINE_END.search(text[-1]) else 0)


def records(data: bytes) -> int | None:
    """Data records of a CSV as the csv module reads it (empty lines skipped), or None if unreadable."""
    try:
        rows = [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""), strict=True) if r]
    except (UnicodeDecodeError, csv.Error):
        return None
    return len(rows) - 1


@st.composite
def mutated(draw) -> tuple[str, bytes]:
    """A case and its CSV after a few row/field edits and byte edits."""
    name = draw(st.sampled_from(sorted(CASES)))
    rows = [line.split(",") for line in CASES[name][0].splitlines()]
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["drop-row", "dup-row", "swap-rows", "drop-field", "dup-field", "swap-fields",
                                   "set-field", "rename-column", "blank-line"]))
        i = draw(st.integers(0, len(rows) - 1)) if rows else 0
        if not rows:
            break
        row = rows[i]
        j = draw(st.integers(0, max(len(row) - 1, 0)))
        if op == "drop-row":
            del rows[i]
        elif op == "dup-row":
            rows.insert(i, list(row))
        elif op == "swap-rows":
            k = draw(st.integers(0, len(rows) - 1))
            rows[i], rows[k] = rows[k], rows[i]
        elif op == "drop-field" and row:
            del row[j]
        elif op == "dup-field" and row:
            row.insert(j, row[j])
        elif op == "swap-fields" and row:
            k = draw(st.integers(0, len(row) - 1))
            row[j], row[k] = row[k], row[j]
        elif op in ("set-field", "rename-column"):
            target = rows[0] if op == "rename-column" else row
            if target:
                target[min(j, len(target) - 1)] = draw(st.sampled_from(NOISE) | st.text(max_size=6))
        elif op == "blank-line":
            rows.insert(i, [])
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    data = end.join(",".join(r) for r in rows).encode("utf-8", errors="surrogatepass")
    if draw(st.booleans()):
        data += end.encode()
    if draw(st.integers(0, 5)) == 0:
        data = "\ufeff".encode() + data
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["truncate", "insert", "quote"]))
        k = draw(st.integers(0, len(data)))
        if op == "truncate":
            data = data[:k]
        elif op == "insert":
            data = data[:k] + draw(st.binary(min_size=1, max_size=4)) + data[k:]
        else:
            data = data[:k] + b'"' + data[k:]
    return name, data


def run_case(tmp_path: Path, name: str, data: bytes) -> tuple[Path, Path, list[str], tuple[int, str, str]]:
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    (case / "in").mkdir()
    (case / "out").mkdir()
    src = case / "in" / "input.csv"
    src.write_bytes(data)
    (case / "in" / "other.txt").write_text("an earlier file that must survive\n")
    out = case / "out" / "ds"
    argv = ["datagen", "convert", str(src), *CASES[name][1], "--out", str(out)]
    before = tree_digest([case / "in", case / "out"])
    result = run_cli(argv)
    if result[0] == 0:
        assert tree_digest([case / "in"]) == {p: h for p, h in before.items() if p.startswith(str(case / "in"))}
    return src, out, argv, result


def check_converted(name: str, data: bytes, out: Path, stderr: str) -> None:
    assert "Traceback" not in stderr
    manifest = json.loads((out / "manifest.json").read_text())
    expected = records(data)
    assert expected is not None, "converted a file the csv module cannot read"
    assert manifest["total_rows"] == expected == sum(f["rows"] for f in manifest["files"])
    ts_name = "TS" if name == "micro" else "tickTS"
    times = []
    for f in manifest["files"]:
        path = out / f["path"]
        table = pq.read_table(path) if path.suffix == ".parquet" else pacsv.read_csv(path)
        assert table.num_rows == f["rows"] > 0
        times.extend(table.column(ts_name).to_pylist())
    assert times == sorted(times)


def check_failed(src: Path, argv: list[str], data: bytes, line: int | None = None, field: str | None = None) -> str:
    """The contract of tests/fuzz.py; the line number, if any, within the file (or one past it)."""
    names = [str(src)] + ([f":{line}: "] if line is not None else []) + ([f"field {field!r}"] if field else [])
    message = expect_user_error(argv, watch=[src.parent, src.parent.parent / "out"], names=names)
    m = re.match(rf"cepkit: error: {re.escape(str(src))}(?::(\d+))?: ", message)
    assert m, f"the error does not start with the input file: {message}"
    if m.group(1) is not None:
        assert 1 <= int(m.group(1)) <= physical_lines(data) + 1, message
    return message


def chaos(tmp_path: Path, case: tuple[str, bytes]) -> None:
    name, data = case
    src, out, argv, (code, _, err) = run_case(tmp_path, name, data)
    if code == 0:
        check_converted(name, data, out, err)
    else:
        check_failed(src, argv, data)


@st.composite
def one_bad_field(draw) -> tuple[str, int, int, str]:
    name = draw(st.sampled_from(sorted(CASES)))
    text, _, kinds = CASES[name]
    row = draw(st.integers(1, len(text.splitlines()) - 1))
    col = draw(st.integers(0, len(kinds) - 1))
    return name, row, col, draw(st.sampled_from(BAD[kinds[col]]))


def bad_field(tmp_path: Path, case: tuple[str, int, int, str]) -> None:
    name, row, col, value = case
    rows = [line.split(",") for line in CASES[name][0].splitlines()]
    field = rows[0][col]
    rows[row][col] = value
    data = "\n".join(",".join(r) for r in rows).encode() + b"\n"
    src, _, argv, (code, _, _) = run_case(tmp_path, name, data)
    assert code == 2, f"{value!r} in {field!r} was accepted"
    check_failed(src, argv, data, line=row + 1, field=field)


@st.composite
def one_bad_row(draw) -> tuple[str, int, bytes]:
    name = draw(st.sampled_from(sorted(CASES)))
    at = draw(st.integers(1, len(CASES[name][0].splitlines())))
    # Junk without separators, quotes or line ends: one field, so never the header's width.
    junk = draw(st.binary(min_size=1, max_size=8).filter(lambda b: not set(b) & set(b',"\r\n')))
    return name, at, junk


def bad_row(tmp_path: Path, case: tuple[str, int, bytes]) -> None:
    name, at, junk = case
    lines = CASES[name][0].encode().splitlines()
    lines.insert(at, junk)
    data = b"\n".join(lines) + b"\n"
    src, _, argv, (code, _, _) = run_case(tmp_path, name, data)
    assert code == 2
    message = check_failed(src, argv, data, line=at + 1)
    assert message.endswith(("not UTF-8 text", "got 1")), message


@st.composite
def unclosed_quote(draw) -> tuple[str, int, int]:
    name = draw(st.sampled_from(sorted(CASES)))
    lines = CASES[name][0].splitlines()
    row = draw(st.integers(1, len(lines) - 1))
    return name, row, draw(st.integers(0, lines[row].count(",")))


def open_quote(tmp_path: Path, case: tuple[str, int, int]) -> None:
    name, row, field = case
    rows = [line.split(",") for line in CASES[name][0].splitlines()]
    rows[row][field] = '"' + rows[row][field]
    data = "\n".join(",".join(r) for r in rows).encode() + b"\n"
    src, _, argv, (code, _, _) = run_case(tmp_path, name, data)
    assert code == 2
    message = check_failed(src, argv, data, line=row + 1)
    assert "unclosed quote" in message


PAIRS = "symbol1,symbol2\nAAA,BBB\n"


@st.composite
def mutated_pairs(draw) -> bytes:
    """The monthly case's correlations file after a few edits."""
    lines = PAIRS.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["dup", "swap", "noise", "add-pair", "truncate", "quote", "drop"]))
        i = draw(st.integers(0, len(lines) - 1)) if lines else 0
        if not lines:
            break
        if op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            lines[i] = ",".join(reversed(lines[i].split(",")))
        elif op == "noise":
            fields = lines[i].split(",")
            fields[draw(st.integers(0, len(fields) - 1))] = draw(st.sampled_from(NOISE + ["AAA", "ZZZ"]))
            lines[i] = ",".join(fields)
        elif op == "add-pair":
            lines.append(draw(st.sampled_from(["AAA,BBB", "BBB,AAA", "AAA,AAA", "AAA,ZZZ", "AAA", "AAA,BBB,CCC"])))
        elif op == "truncate":
            lines[i] = lines[i][:draw(st.integers(0, len(lines[i])))]
        elif op == "quote":
            k = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:k] + '"' + lines[i][k:]
        else:
            del lines[i]
    return ("\n".join(lines) + "\n").encode()


def pairs_chaos(tmp_path: Path, pairs: bytes) -> None:
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    (case / "in").mkdir()
    (case / "out").mkdir()
    src = case / "in" / "input.csv"
    src.write_text(CASES["monthly"][0])
    corr = case / "in" / "pairs.csv"
    corr.write_bytes(pairs)
    out = case / "out" / "ds"
    argv = ["datagen", "convert", str(src), *CASES["monthly"][1], "--correlations", str(corr), "--out", str(out)]
    code, _, err = run_cli(argv)
    if code == 0:
        aux = json.loads((out / "pairs-aux.json").read_text())
        assert aux["num_correlations"] == records(pairs) == len(aux["correlations"])
        return
    message = expect_user_error(argv, watch=[case / "in", case / "out"], names=[str(corr)])
    m = re.match(rf"cepkit: error: {re.escape(str(corr))}(?::(\d+))?: ", message)
    assert m and (m.group(1) is None or 1 <= int(m.group(1)) <= physical_lines(pairs) + 1), message


@fuzz_settings
@given(pairs=mutated_pairs())
def test_fuzz_mutated_correlations(tmp_path, pairs):
    pairs_chaos(tmp_path, pairs)


@fuzz_settings
@given(case=mutated())
def test_fuzz_mutated_csv(tmp_path, case):
    chaos(tmp_path, case)


@fuzz_settings
@given(case=one_bad_field())
def test_fuzz_one_bad_field_names_its_line_and_field(tmp_path, case):
    bad_field(tmp_path, case)


@fuzz_settings
@given(case=one_bad_row())
def test_fuzz_one_junk_row_names_its_line(tmp_path, case):
    bad_row(tmp_path, case)


@fuzz_settings
@given(case=unclosed_quote())
def test_fuzz_unclosed_quote_names_the_line_it_opens_on(tmp_path, case):
    open_quote(tmp_path, case)


@pytest.mark.slow
@slow_settings
@given(case=mutated())
def test_fuzz_mutated_csv_slow(tmp_path, case):
    chaos(tmp_path, case)


@pytest.mark.slow
@slow_settings
@given(case=one_bad_field())
def test_fuzz_one_bad_field_slow(tmp_path, case):
    bad_field(tmp_path, case)


@pytest.mark.slow
@slow_settings
@given(case=one_bad_row())
def test_fuzz_one_junk_row_slow(tmp_path, case):
    bad_row(tmp_path, case)


@pytest.mark.slow
@slow_settings
@given(pairs=mutated_pairs())
def test_fuzz_mutated_correlations_slow(tmp_path, pairs):
    pairs_chaos(tmp_path, pairs)
