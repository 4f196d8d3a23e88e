"""Reading engine output logs and comparing their rows with the expected answers (B.5, B.3)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kit.errors import CepkitError
from kit.records import INDICATOR, MARKET_ORDER, RecordSchema, Field
from validator.compare import StreamComparison, Tolerance, compare_stream, default_keys
from validator.outputlog import Clocks, read_output_log, read_resources

T0 = 1_767_623_400_000   # simulated start (tickTS)
W0 = 1_790_000_000_000   # wall-clock start of the run
PAIRS = {s.name: s for s in (INDICATOR, MARKET_ORDER)}


def orders(*rows) -> pd.DataFrame:
    """MarketOrder rows (strategy, type, symbol, price, size, inputTickTS); inputTS follows the tick."""
    df = pd.DataFrame(rows, columns=["strategy", "type", "symbol", "price", "size", "inputTickTS"])
    df["price"] = df["price"].astype(np.int32)
    df["size"] = df["size"].astype(np.int32)
    df["inputTickTS"] = df["inputTickTS"].astype(np.int64)
    df["inputTS"] = W0 + (df["inputTickTS"] - T0)
    return df


def indicators(*rows) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["strategy", "ratio", "avgRatio", "upperBand", "lowerBand", "inputTickTS"])
    df["inputTickTS"] = df["inputTickTS"].astype(np.int64)
    df["inputTS"] = W0 + (df["inputTickTS"] - T0)
    return df


EXPECTED_ORDERS = orders(
    ("st_00001", "SELL", "AAAAAA", 6216, 170, T0 + 10_000),
    ("st_00001", "BUY", "BBBBBB", 3117, 340, T0 + 10_000),
    ("st_00002", "BUY", "CCCCCC", 10284, 100, T0 + 15_000),
    ("st_00002", "SELL", "DDDDDD", 8832, 110, T0 + 15_000),
    ("st_00001", "BUY", "AAAAAA", 6130, 170, T0 + 40_000),
    ("st_00001", "SELL", "BBBBBB", 3200, 340, T0 + 40_000),
)


def engine_rows(expected: pd.DataFrame) -> pd.DataFrame:
    """What a correct engine delivers: the same answers, its own stamps, a different order."""
    eng = expected.iloc[::-1].reset_index(drop=True).copy()
    eng["inputTS"] += 3           # a different wall clock: never compared
    eng["arrivalTS"] = eng["inputTS"] + 250
    eng["ingestTS"] = eng["inputTS"] + 20
    eng["strategy"] = eng["strategy"].astype("category")   # Parquet dictionary columns come back like this
    return eng


# -- comparison ------------------------------------------------------------------------------

def test_identical_answers_pass():
    r = compare_stream(EXPECTED_ORDERS, engine_rows(EXPECTED_ORDERS), MARKET_ORDER)
    assert (r.expected, r.engine, r.correct, r.missing, r.undue, r.wrong) == (6, 6, 6, 0, 0, 0)
    assert r.passed and r.verdict == "PASSED"
    assert r.keys == ("strategy", "inputTickTS", "type", "symbol")
    assert r.compared == ("price", "size")
    assert r.incorrect.empty


def test_dropped_extra_and_changed_rows():
    eng = engine_rows(EXPECTED_ORDERS)
    eng = eng[~((eng["strategy"] == "st_00002") & (eng["type"] == "SELL"))]            # dropped: 1 missing
    extra = orders(("st_00003", "BUY", "EEEEEE", 500, 10, T0 + 12_000)).assign(arrivalTS=1, ingestTS=1)
    eng = pd.concat([eng.astype({"strategy": str}), extra], ignore_index=True)        # extra: 1 undue
    eng.loc[(eng["inputTickTS"] == T0 + 10_000) & (eng["type"] == "SELL"), "price"] = 6212  # changed: 1 wrong
    r = compare_stream(EXPECTED_ORDERS, eng, MARKET_ORDER)
    assert (r.expected, r.engine, r.correct, r.missing, r.undue, r.wrong) == (6, 6, 4, 1, 1, 1)
    assert not r.passed and r.verdict == "FAILED"
    assert r.mismatches_by_field == {"price": 1}
    # Figure B.5: side by side, ordered by inputTickTS.
    got = r.incorrect[["outcome", "strategy", "inputTickTS", "type", "symbol", "differs",
                       "expected.price", "engine.price", "expected.size", "engine.size"]].values.tolist()
    assert got == [
        ["wrong", "st_00001", T0 + 10_000, "SELL", "AAAAAA", "price", 6216, 6212, 170, 170],
        ["undue", "st_00003", T0 + 12_000, "BUY", "EEEEEE", "", None, 500, None, 10],
        ["missing", "st_00002", T0 + 15_000, "SELL", "DDDDDD", "", 8832, None, 110, None],
    ]


def test_wrong_key_field_is_missing_plus_undue():
    eng = engine_rows(EXPECTED_ORDERS)
    eng.loc[eng["symbol"] == "CCCCCC", "symbol"] = "ZZZZZZ"
    r = compare_stream(EXPECTED_ORDERS, eng, MARKET_ORDER)
    assert (r.correct, r.missing, r.undue, r.wrong) == (5, 1, 1, 0)


def test_rows_sharing_a_key_pair_in_order_of_their_values():
    exp = orders(("s", "BUY", "A", 10, 1, T0), ("s", "BUY", "A", 20, 1, T0))
    eng = orders(("s", "BUY", "A", 21, 1, T0), ("s", "BUY", "A", 30, 1, T0), ("s", "BUY", "A", 10, 1, T0))
    r = compare_stream(exp, eng, MARKET_ORDER)
    # Sorted by price on each side: 10 with 10, 20 with 21 (wrong), the engine's 30 has no partner.
    assert (r.correct, r.wrong, r.missing, r.undue) == (1, 1, 0, 1)
    assert r.incorrect[["outcome", "expected.price", "engine.price"]].values.tolist() == [
        ["wrong", 20, 21], ["undue", None, 30]]
    # The engine's order of rows sharing a key does not matter (a shuffle may reorder them).
    swapped = compare_stream(exp, exp.iloc[::-1].reset_index(drop=True), MARKET_ORDER)
    assert (swapped.correct, swapped.wrong) == (2, 0)


def test_rows_sharing_a_key_sort_on_every_compared_field_then_on_position():
    # Same price, sizes differ: the second compared field orders them; NaN doubles sort last.
    exp = orders(("s", "BUY", "A", 10, 2, T0), ("s", "BUY", "A", 10, 1, T0))
    eng = orders(("s", "BUY", "A", 10, 1, T0), ("s", "BUY", "A", 10, 3, T0))
    r = compare_stream(exp, eng, MARKET_ORDER)
    assert (r.correct, r.wrong) == (1, 1)
    assert r.incorrect[["expected.size", "engine.size"]].values.tolist() == [[2, 3]]
    schema = RecordSchema("Q", (Field("ID", "int"), Field("v", "double"), Field("triggerTS", "long")))
    e = pd.DataFrame({"ID": [1, 1, 1], "v": [np.nan, 2.0, 1.0], "triggerTS": [T0] * 3})
    g = pd.DataFrame({"ID": [1, 1, 1], "v": [1.0, np.nan, 2.0 + 1e-12], "triggerTS": [T0] * 3})
    assert compare_stream(e, g, schema).passed


def test_duplicated_rows_are_undue_and_marked_duplicate():
    """Issue 14, finding 4: rows an engine sends twice are undue answers, listed as "duplicate"
    (main had no `duplicates` count and listed them as plain undue)."""
    eng = engine_rows(EXPECTED_ORDERS)
    eng = pd.concat([eng, eng.iloc[[1, 1, 4]].assign(arrivalTS=lambda d: d["arrivalTS"] + 999)], ignore_index=True)
    eng = eng.sample(frac=1.0, random_state=7).reset_index(drop=True)       # and out of order
    r = compare_stream(EXPECTED_ORDERS, eng, MARKET_ORDER)
    assert (r.correct, r.missing, r.undue, r.wrong, r.duplicates) == (6, 0, 3, 0, 3)
    assert r.incorrect["outcome"].tolist() == ["duplicate"] * 3
    assert r.to_dict()["duplicates"] == 3 and not r.passed
    # An undue row that is no copy of a matched one stays "undue"; a copy of a wrong row is a duplicate.
    eng2 = engine_rows(EXPECTED_ORDERS)
    eng2.loc[0, "price"] += 1                                               # wrong
    eng2 = pd.concat([eng2, eng2.iloc[[0]], eng2.iloc[[1]].assign(inputTickTS=T0 + 1)], ignore_index=True)
    r2 = compare_stream(EXPECTED_ORDERS, eng2, MARKET_ORDER)
    assert (r2.correct, r2.wrong, r2.undue, r2.duplicates) == (5, 1, 2, 1)
    assert sorted(r2.incorrect["outcome"]) == ["duplicate", "undue", "wrong"]


def test_only_duplicates_of_one_row_with_nothing_expected():
    eng = engine_rows(EXPECTED_ORDERS).iloc[[0, 0]]
    r = compare_stream(EXPECTED_ORDERS.iloc[:0], eng, MARKET_ORDER)
    assert (r.undue, r.duplicates) == (2, 0)      # nothing matched, so nothing is a repeat of a match
    with pytest.raises(CepkitError, match="duplicates among"):
        StreamComparison(**{**{k: getattr(r, k) for k in r.__dataclass_fields__}, "duplicates": 3})


def test_double_tolerance_edges():
    # |engine - expected| <= 1e-9 + 1e-9 * |expected|: 2e-9 at 1.0, about 1e-3 at 1e6.
    exp = indicators(("s", 1.0, 1e6, 5.0, np.nan, T0), ("s", 1.0, 1e6, np.inf, np.nan, T0 + 1),
                     ("s", 0.0, -1e6, 5.0, 2.0, T0 + 2))
    eng = indicators(("s", 1.0 + 1.5e-9, 1e6 + 5e-4, 5.0, np.nan, T0),     # all within: correct
                     ("s", 1.0 + 3e-9, 1e6 + 2e-3, np.inf, np.nan, T0 + 1),  # ratio and avgRatio out
                     ("s", 0.9e-9, -1e6 - 9e-4, 5.0, np.nan, T0 + 2))        # at 0: abs only; NaN vs 2.0
    r = compare_stream(exp, eng, INDICATOR)
    assert (r.correct, r.wrong) == (1, 2)
    assert r.mismatches_by_field == {"ratio": 1, "avgRatio": 1, "lowerBand": 1}
    assert r.incorrect["differs"].tolist() == ["ratio, avgRatio", "lowerBand"]
    # A looser tolerance accepts the second row's ratio but still not its avgRatio (off by 2e-3).
    loose = compare_stream(exp, eng, INDICATOR, tolerance=Tolerance(rel=0.0, abs=1e-3))
    assert loose.mismatches_by_field == {"avgRatio": 1, "lowerBand": 1}


def test_ints_and_strings_are_exact():
    exp = orders(("s", "BUY", "A", 1000, 100, T0))
    for change, field in (({"price": 1001}, "price"), ({"size": 99}, "size")):
        eng = exp.assign(**change)
        r = compare_stream(exp, eng, MARKET_ORDER)
        assert (r.wrong, r.mismatches_by_field) == (1, {field: 1})
    # A string compared field must match exactly (case included): key it on strategy only.
    r = compare_stream(exp, exp.assign(symbol="a"), MARKET_ORDER, keys=("strategy", "inputTickTS"))
    assert r.mismatches_by_field == {"symbol": 1}


def test_stamps_are_not_compared_and_cannot_be_keys():
    eng = EXPECTED_ORDERS.assign(inputTS=0, arrivalTS=5, batchId=7)
    assert compare_stream(EXPECTED_ORDERS, eng, MARKET_ORDER).passed
    with pytest.raises(CepkitError, match="inputTS is a wall-clock stamp"):
        compare_stream(EXPECTED_ORDERS, eng, MARKET_ORDER, keys=("strategy", "inputTS"))


def test_nulls_compare_as_values():
    exp = orders(("s", "BUY", "A", 1000, 100, T0), ("s", "SELL", "B", 7, 1, T0))
    eng = exp.copy()
    eng["price"] = pd.array([pd.NA, 7], dtype="Int32")
    r = compare_stream(exp, eng, MARKET_ORDER)
    assert (r.correct, r.wrong) == (1, 1)
    assert r.incorrect[["expected.price", "engine.price"]].values.tolist() == [[1000, None]]


def test_default_keys_for_other_streams():
    micro = RecordSchema("Q1", (Field("ID", "int"), Field("A1", "double"), Field("windowEnd", "long"),
                                Field("inputTS", "long")))
    assert default_keys(micro) == ("ID", "windowEnd")
    assert default_keys(INDICATOR) == ("strategy", "inputTickTS")


def test_comparison_errors_are_one_line():
    with pytest.raises(CepkitError, match="the engine rows have no column 'size'"):
        compare_stream(EXPECTED_ORDERS, EXPECTED_ORDERS.drop(columns="size"), MARKET_ORDER)
    with pytest.raises(CepkitError, match="key 'nope' is not a field"):
        compare_stream(EXPECTED_ORDERS, EXPECTED_ORDERS, MARKET_ORDER, keys=("nope",))
    with pytest.raises(CepkitError, match="tolerance rel"):
        Tolerance(rel=-1.0)
    with pytest.raises(CepkitError, match="do not add up"):
        StreamComparison("X", ("k",), ("v",), Tolerance(), expected=3, engine=3, correct=3, missing=1,
                         undue=0, wrong=0)


def test_listing_is_capped_but_counts_are_complete():
    exp = indicators(*[("s", float(i), 0.0, 0.0, 0.0, T0 + i) for i in range(50)])
    eng = exp.assign(ratio=exp["ratio"] + 1)
    r = compare_stream(exp, eng, INDICATOR, list_limit=7)
    assert r.wrong == 50 and len(r.incorrect) == 7
    assert r.incorrect["inputTickTS"].tolist() == [T0 + i for i in range(7)]


@pytest.mark.alone      # timed
def test_millions_of_rows_in_seconds():
    n = 1_500_000
    rng = np.random.default_rng(3)
    strategies = np.array([f"st_{i:05d}" for i in range(25)])
    exp = pd.DataFrame({"strategy": pd.Categorical(strategies[np.arange(n) % 25]),
                        "ratio": rng.random(n), "avgRatio": rng.random(n), "upperBand": rng.random(n),
                        "lowerBand": rng.random(n), "inputTickTS": T0 + (np.arange(n) // 25) * 1000,
                        "inputTS": np.zeros(n, np.int64)})
    eng = exp.iloc[rng.permutation(n)].reset_index(drop=True)
    eng["strategy"] = eng["strategy"].astype(str)
    eng.loc[17, "upperBand"] += 1e-6
    eng = eng.drop(index=99)
    start = time.perf_counter()
    r = compare_stream(exp, eng, INDICATOR)
    elapsed = time.perf_counter() - start
    assert (r.correct, r.wrong, r.missing, r.undue) == (n - 2, 1, 1, 0)
    assert elapsed < 20, f"took {elapsed:.1f} s"


# -- output logs -----------------------------------------------------------------------------

def write_log(directory: Path, streams: dict[str, list[pd.DataFrame]], fmt: str = "parquet", **meta) -> Path:
    out = directory / "outputs"
    out.mkdir(parents=True)
    entries = {}
    for name, parts in streams.items():
        files = []
        for i, df in enumerate(parts, 1):
            fname = f"{name}-{i:05d}.{fmt}"
            if fmt == "parquet":
                pq.write_table(pa.Table.from_pandas(df, preserve_index=False), out / fname)
            else:
                df.to_csv(out / fname, index=False)
            files.append(fname)
        entries[name] = {"files": files}
    doc = {"kind": "cepkit.output-log", "schema_version": 1, "format": fmt, "run_start_wall_ms": W0,
           "sim_start_ms": T0, "speed": 1.0, "streams": entries} | meta
    (out / "output-log.json").write_text(json.dumps(doc))
    return directory


def pairs_log(tmp_path: Path, fmt: str = "parquet", order_parts=None, **meta) -> Path:
    eng = engine_rows(EXPECTED_ORDERS).astype({"strategy": str})
    ind = indicators(("st_00001", 1.01, 1.0, 1.02, 0.98, T0 + 10_000)).assign(arrivalTS=W0 + 10_400)
    parts = order_parts if order_parts is not None else [eng.iloc[:4], eng.iloc[4:]]
    return write_log(tmp_path, {"Indicator": [ind], "MarketOrder": parts}, fmt, **meta)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_reads_a_good_log(tmp_path, fmt):
    log = read_output_log(pairs_log(tmp_path, fmt), PAIRS)
    assert log.clocks == Clocks(W0, T0, 1.0)
    assert log.format == fmt
    mo = log.stream("MarketOrder")
    assert list(mo.columns) == list(MARKET_ORDER.names) + ["arrivalTS", "ingestTS"]
    assert (mo["price"].dtype, mo["size"].dtype, mo["inputTickTS"].dtype, mo["arrivalTS"].dtype) == \
        (np.int32, np.int32, np.int64, np.int64)
    # Two files, in arrival order.
    assert mo["inputTickTS"].tolist() == engine_rows(EXPECTED_ORDERS)["inputTickTS"].tolist()
    assert log.stream("Indicator")["ratio"].tolist() == [1.01]
    assert "ingestTS" not in log.stream("Indicator").columns
    assert compare_stream(EXPECTED_ORDERS, mo, MARKET_ORDER).passed
    # A stream without a schema is read with its own columns; only the stamps are checked.
    other = read_output_log(tmp_path, {"MarketOrder": MARKET_ORDER}).stream("Indicator")
    assert list(other.columns) == list(INDICATOR.names) + ["arrivalTS"]
    assert other["arrivalTS"].tolist() == [W0 + 10_400]


def test_log_with_dropped_extra_and_changed_row(tmp_path):
    eng = engine_rows(EXPECTED_ORDERS).astype({"strategy": str})
    eng = eng.drop(index=0)
    eng.loc[2, "price"] += 1
    extra = orders(("st_00009", "SELL", "QQQQQQ", 1, 10, T0 + 1)).assign(arrivalTS=W0 + 2, ingestTS=W0 + 1)
    log = read_output_log(pairs_log(tmp_path, order_parts=[eng, extra]), PAIRS)
    r = compare_stream(EXPECTED_ORDERS, log.stream("MarketOrder"), MARKET_ORDER)
    assert (r.missing, r.undue, r.wrong, r.correct) == (1, 1, 1, 4)


def _one_line_error(path, match, schemas=PAIRS):
    with pytest.raises(CepkitError) as info:
        read_output_log(path, schemas)
    message = str(info.value)
    assert "\n" not in message
    assert match in message, message
    return message


def test_wrong_kind(tmp_path):
    msg = _one_line_error(pairs_log(tmp_path, kind="cepkit.datagen-manifest"),
                          "output-log.json:kind: expected 'cepkit.output-log', got 'cepkit.datagen-manifest'")
    assert msg.startswith(str(tmp_path))


def test_wrong_schema_version(tmp_path):
    _one_line_error(pairs_log(tmp_path, schema_version=2), "output-log.json:schema_version: expected 1, got 2")


def test_schema_version_true_is_not_1(tmp_path):
    """Found by the fuzzer (issue 14): JSON `true` passed for schema_version 1 on main (True == 1)."""
    _one_line_error(pairs_log(tmp_path, schema_version=True), "output-log.json:schema_version: expected 1, got True")


def test_missing_column(tmp_path):
    eng = engine_rows(EXPECTED_ORDERS).astype({"strategy": str}).drop(columns="size")
    _one_line_error(pairs_log(tmp_path, order_parts=[eng]), "MarketOrder-00001.parquet:size: missing column")


def test_wrong_type(tmp_path):
    eng = engine_rows(EXPECTED_ORDERS).astype({"strategy": str, "price": str})
    _one_line_error(pairs_log(tmp_path, order_parts=[eng]),
                    "MarketOrder-00001.parquet:price: expected an integer (int) column, got string")


def test_bad_csv_value_names_its_line(tmp_path):
    eng = engine_rows(EXPECTED_ORDERS).astype({"strategy": str, "price": object})
    eng.loc[2, "price"] = "12.5"
    _one_line_error(pairs_log(tmp_path, "csv", order_parts=[eng]),
                    "MarketOrder-00001.csv:4: column price: '12.5' is not a valid int")


def test_int_out_of_range(tmp_path):
    eng = engine_rows(EXPECTED_ORDERS).astype({"strategy": str, "size": np.int64})
    eng.loc[4, "size"] = 3_000_000_000
    _one_line_error(pairs_log(tmp_path, order_parts=[eng]),
                    "MarketOrder-00001.parquet:size: row 5: value 3000000000 does not fit in an int (32 bits)")


def test_null_arrival(tmp_path):
    eng = engine_rows(EXPECTED_ORDERS).astype({"strategy": str, "arrivalTS": "Int64"})
    eng.loc[1, "arrivalTS"] = pd.NA
    _one_line_error(pairs_log(tmp_path, order_parts=[eng]), "MarketOrder-00001.parquet:arrivalTS: row 2: is null")


def test_missing_file(tmp_path):
    run = pairs_log(tmp_path)
    (run / "outputs" / "MarketOrder-00002.parquet").unlink()
    _one_line_error(run, "MarketOrder-00002.parquet: listed in output-log.json for stream MarketOrder but missing")


def test_missing_log_and_missing_stream(tmp_path):
    _one_line_error(tmp_path, "output-log.json: not found")
    run = write_log(tmp_path / "r", {"Indicator": []})
    _one_line_error(run, "output-log.json:streams: no stream 'MarketOrder'")


def test_truncated_parquet(tmp_path):
    run = pairs_log(tmp_path)
    f = run / "outputs" / "MarketOrder-00001.parquet"
    f.write_bytes(f.read_bytes()[:200])
    _one_line_error(run, "MarketOrder-00001.parquet: cannot read as Parquet")


def test_file_outside_the_log_directory(tmp_path):
    run = pairs_log(tmp_path)
    meta = json.loads((run / "outputs" / "output-log.json").read_text())
    meta["streams"]["Indicator"]["files"] = ["../x.parquet"]
    (run / "outputs" / "output-log.json").write_text(json.dumps(meta))
    _one_line_error(run, "output-log.json:streams.Indicator.files: '../x.parquet' must be a path inside")


def test_resources(tmp_path):
    assert read_resources(tmp_path) is None
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "resources.csv").write_text("ts_ms,cpu_percent,rss_bytes\n2000,50.5,100\n1000,20,90\n")
    df = read_resources(tmp_path)
    assert df["ts_ms"].tolist() == [1000, 2000] and df["cpu_percent"].tolist() == [20.0, 50.5]
    (tmp_path / "metrics" / "resources.csv").write_text("ts_ms,cpu\n1,2\n")
    with pytest.raises(CepkitError, match=r"resources.csv:1: missing column 'cpu_percent'"):
        read_resources(tmp_path)
