"""Fuzzing `cepkit validate pairs` with broken engine output logs (issue 14).

The contract (tests/fuzz.py): a bad input is one line naming the file (and the key or column), exit
code 2, no traceback, and no file that existed before is changed (nor a report left behind). Logs
whose rows are duplicated or out of order are no error: they get a verdict (exit 0 or 1) with the
repeated rows counted as undue answers marked duplicate.

- output logs: a data file truncated, a column dropped or of another type, a CSV cell replaced by
  junk, output-log.json cut short or a key broken; rows duplicated and shuffled.

Default budget: `FUZZ_EXAMPLES` (40) per property, a few for the properties that write a full
report; `-m slow` runs `SLOW_EXAMPLES` of each. Broken datasets: test_fuzz_validate_dataset.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz import expect_user_error, fuzz_settings, run_cli, slow_settings, tree_digest
from tests.helpers import JUNK, SCHEMAS, fresh_dir, validate_pairs_argv

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

W0 = 1_790_000_000_000
# Properties whose cases often pass validation write a whole report (~0.4 s each): fewer cases.
report_settings = settings(fuzz_settings, max_examples=min(8, fuzz_settings.max_examples))


# -- engine output logs ------------------------------------------------------------------------

def _engine_frames(expected: dict[str, pd.DataFrame], sim_start: int) -> dict[str, pd.DataFrame]:
    out = {}
    for name, df in expected.items():
        df = df.copy()
        df["inputTS"] = W0 + (df["inputTickTS"] - sim_start)
        df["arrivalTS"] = df["inputTS"] + 80 + np.arange(len(df)) % 40
        out[name] = df
    return out


def _write_log(directory: Path, frames: dict[str, pd.DataFrame], sim_start: int, fmt: str = "parquet") -> Path:
    out = directory / "outputs"
    out.mkdir(parents=True)
    streams = {}
    for name, df in frames.items():
        fname = f"{name}-00001.{fmt}"
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pandas(df, preserve_index=False), out / fname)
        else:
            df.to_csv(out / fname, index=False)
        streams[name] = {"files": [fname]}
    (out / "output-log.json").write_text(json.dumps({
        "kind": "cepkit.output-log", "schema_version": 1, "format": fmt, "run_start_wall_ms": W0,
        "sim_start_ms": sim_start, "speed": 1.0, "streams": streams}))
    return out


def _wrong_typed(arr_len: int, logical: str, which: int) -> pa.Array:
    """A column of a type the log's reader must refuse for `logical` (OUTPUT_LOG/VALIDATION.md)."""
    choices = {"string": [pa.array(np.arange(arr_len)), pa.array(np.full(arr_len, 1.5)), pa.array([True] * arr_len)],
               "int": [pa.array(np.full(arr_len, 7.5)), pa.array(["7"] * arr_len), pa.array([False] * arr_len)],
               "long": [pa.array(np.full(arr_len, 1e12)), pa.array(["12"] * arr_len), pa.array([True] * arr_len)],
               "double": [pa.array(["1.5"] * arr_len), pa.array([True] * arr_len)]}[logical]
    return choices[which % len(choices)]


COLUMNS = [(name, f.name, f.type) for name, s in SCHEMAS.items() for f in s.fields] + \
    [(name, "arrivalTS", "long") for name in SCHEMAS]
NUMERIC_COLUMNS = [c for c in COLUMNS if c[2] != "string"]
GARBAGE = st.text(alphabet="abcdefxyzQ_-:;!?", min_size=1, max_size=8).filter(
    lambda t: t.strip().lower().lstrip("+-") not in ("nan", "inf", "infinity"))

LOG_MUTATION = st.one_of(
    st.tuples(st.just("truncate"), st.sampled_from(list(SCHEMAS)), st.floats(0, 1, exclude_max=True)),
    st.tuples(st.just("drop"), st.sampled_from(COLUMNS)),
    st.tuples(st.just("retype"), st.sampled_from(COLUMNS), st.integers(0, 2)),
    st.tuples(st.just("csv-garbage"), st.sampled_from(NUMERIC_COLUMNS), st.floats(0, 1, exclude_max=True), GARBAGE),
    st.tuples(st.just("json-truncate"), st.floats(0, 1, exclude_max=True)),
    st.tuples(st.just("json-key"), st.sampled_from(("kind", "schema_version", "format", "run_start_wall_ms",
                                                    "sim_start_ms", "streams", "speed")), JUNK, st.booleans()),
)


def _json_key_breaks(key: str, value) -> bool:
    if key == "kind":
        return value != "cepkit.output-log"
    if key == "schema_version":
        return not (type(value) is int and value == 1)
    if key == "format":
        return value != "parquet"
    if key in ("run_start_wall_ms", "sim_start_ms"):
        return type(value) is not int
    if key == "speed":
        return not (type(value) in (int, float) and math.isfinite(value) and value > 0)
    return True


def _check_log_mutation(run, tmp_path, mutation) -> None:
    data, strategies, expected, sim_start = run
    root = fresh_dir(tmp_path)
    frames = _engine_frames(expected, sim_start)
    kind = mutation[0]
    names: list[str] = []
    fmt = "csv" if kind == "csv-garbage" else "parquet"
    if kind == "drop":
        stream, col, _ = mutation[1]
        frames[stream] = frames[stream].drop(columns=col)
        names = [f"{stream}-00001.parquet", col]
    elif kind == "retype":
        (stream, col, logical), which = mutation[1], mutation[2]
        table = pa.Table.from_pandas(frames[stream], preserve_index=False)
        table = table.set_column(table.column_names.index(col), col, _wrong_typed(len(table), logical, which))
        frames[stream] = table
        names = [f"{stream}-00001.parquet", col]
    elif kind == "csv-garbage":
        (stream, col, _), where, junk = mutation[1], mutation[2], mutation[3]
        df = frames[stream].astype({col: object})
        df.iloc[int(where * len(df)), df.columns.get_loc(col)] = junk
        frames[stream] = df
        names = [f"{stream}-00001.csv", col]
    out = root / "run" / "outputs"
    out.mkdir(parents=True)
    streams = {}
    for name, f in frames.items():
        fname = f"{name}-00001.{fmt}"
        if isinstance(f, pa.Table):
            pq.write_table(f, out / fname)
        elif fmt == "parquet":
            pq.write_table(pa.Table.from_pandas(f, preserve_index=False), out / fname)
        else:
            f.to_csv(out / fname, index=False)
        streams[name] = {"files": [fname]}
    meta = {"kind": "cepkit.output-log", "schema_version": 1, "format": fmt, "run_start_wall_ms": W0,
            "sim_start_ms": sim_start, "speed": 1.0, "streams": streams}
    text = json.dumps(meta)
    if kind == "truncate":
        fname = f"{mutation[1]}-00001.parquet"
        raw = (out / fname).read_bytes()
        (out / fname).write_bytes(raw[:int(mutation[2] * len(raw))])
        names = [fname]
    elif kind == "json-truncate":
        text = text[:int(mutation[1] * len(text))]      # json.dumps adds no newline: always cut short
        names = ["output-log.json"]
    elif kind == "json-key":
        key, value, delete = mutation[1], mutation[2], mutation[3]
        if delete and key != "speed":                   # speed defaults to 1.0 when absent
            del meta[key]
        elif not _json_key_breaks(key, value):
            return
        else:
            meta[key] = value
        text = json.dumps(meta)
        names = ["output-log.json", key]
    (out / "output-log.json").write_text(text)
    argv = validate_pairs_argv(data, strategies, root / "report") + ["--log", str(out)]
    expect_user_error(argv, watch=[root, data, strategies], names=names)


@fuzz_settings
@given(mutation=LOG_MUTATION)
def test_broken_log_is_one_line(run, tmp_path, mutation):
    _check_log_mutation(run, tmp_path, mutation)


@pytest.mark.slow
@slow_settings
@given(mutation=LOG_MUTATION)
def test_broken_log_is_one_line_slow(run, tmp_path, mutation):
    _check_log_mutation(run, tmp_path, mutation)


def _check_truncated_csv_log(run, tmp_path, stream: str, where: float) -> None:
    """A CSV cut at any byte may still parse (a shorter last value, a missing last row): any
    outcome but a crash, and one line naming the file when it is an error."""
    data, strategies, expected, sim_start = run
    root = fresh_dir(tmp_path)
    out = _write_log(root / "run", _engine_frames(expected, sim_start), sim_start, fmt="csv")
    f = out / f"{stream}-00001.csv"
    raw = f.read_bytes()
    f.write_bytes(raw[:int(where * len(raw))])
    before = tree_digest([out, data, strategies])
    code, stdout, err = run_cli(validate_pairs_argv(data, strategies, root / "report") + ["--log", str(out)])
    assert "Traceback" not in stdout + err and code in (0, 1, 2), stdout + err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and f.name in lines[0], err
        assert not (root / "report").exists()
    assert tree_digest([out, data, strategies]) == before


@report_settings
@given(stream=st.sampled_from(list(SCHEMAS)), where=st.floats(0, 1, exclude_max=True))
def test_truncated_csv_log_never_crashes(run, tmp_path, stream, where):
    _check_truncated_csv_log(run, tmp_path, stream, where)


@pytest.mark.slow
@slow_settings
@given(stream=st.sampled_from(list(SCHEMAS)), where=st.floats(0, 1, exclude_max=True))
def test_truncated_csv_log_never_crashes_slow(run, tmp_path, stream, where):
    _check_truncated_csv_log(run, tmp_path, stream, where)


REPEATS = st.fixed_dictionaries({name: st.lists(st.floats(0, 1, exclude_max=True), max_size=4) for name in SCHEMAS})


def _check_duplicated_and_shuffled(run, tmp_path, repeats: dict, seed: int, fmt: str) -> None:
    data, strategies, expected, sim_start = run
    root = fresh_dir(tmp_path)
    rng = np.random.default_rng(seed)
    frames = {}
    for name, df in expected.items():
        extra = df.iloc[[int(w * len(df)) for w in repeats[name]]]
        both = pd.concat([df, extra], ignore_index=True)
        frames[name] = both.iloc[rng.permutation(len(both))].reset_index(drop=True)
    out = _write_log(root / "run", _engine_frames(frames, sim_start), sim_start, fmt=fmt)
    before = tree_digest([out, data, strategies])
    code, stdout, err = run_cli(validate_pairs_argv(data, strategies, root / "report") + ["--log", str(out)])
    assert "Traceback" not in stdout + err
    dups = sum(len(r) for r in repeats.values())
    assert code == (1 if dups else 0), stdout + err
    summary = json.loads((root / "report" / "summary.json").read_text())
    for c in summary["streams"]:
        n = len(repeats[c["stream"]])
        assert (c["missing"], c["wrong"], c["undue"], c["duplicates"]) == (0, 0, n, n), c
    assert tree_digest([out, data, strategies]) == before


@report_settings
@given(repeats=REPEATS, seed=st.integers(0, 2**32 - 1), fmt=st.sampled_from(("parquet", "csv")))
def test_duplicated_and_shuffled_rows_get_a_verdict(run, tmp_path, repeats, seed, fmt):
    _check_duplicated_and_shuffled(run, tmp_path, repeats, seed, fmt)


@pytest.mark.slow
@slow_settings
@given(repeats=REPEATS, seed=st.integers(0, 2**32 - 1), fmt=st.sampled_from(("parquet", "csv")))
def test_duplicated_and_shuffled_rows_get_a_verdict_slow(run, tmp_path, repeats, seed, fmt):
    _check_duplicated_and_shuffled(run, tmp_path, repeats, seed, fmt)
