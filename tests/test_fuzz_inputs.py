"""Fuzzing the inputs of the whole command line with the classes of issue 27 (hypothesis; the
contract is in tests/fuzz.py):

- **non-regular and oversized files**: any document the CLI reads (a config, a spec XML, a
  dataset's manifest.json or pairs-aux.json, an output log's output-log.json) replaced by a
  directory, a FIFO with no writer, `/dev/zero` or a sparse file one byte to a few MiB past its
  kind's cap (kit/inputs.py `LIMITS`) -> exit 2, one line naming the path, nothing changed, at
  once. Directories, FIFOs and oversized files run in-process under an alarm (a FIFO that blocks
  fails the test instead of hanging it); `/dev/zero`, which a regression would read until the
  machine runs out of memory, runs in a child under the memory cap (`run_capped`);
- **hostile numbers in every JSON field that sizes work**: each numeric leaf of output-log.json
  (clocks, speed, a fault's time), manifest.json (start_epoch_ms, rows, bytes, first/last TS, the
  profile's phases, their starts, ends and rates, the config it records) and pairs-aux.json set to
  0, negative, huge, 1e300, +-2**63, inf, nan, ... -> `cepkit validate pairs|micro` ends with a
  verdict (0 or 1) or one line (2), never a traceback; every example runs in a child under the
  memory cap and a time limit, so a number that sizes an allocation or a loop fails its example
  instead of exhausting the machine (issue 27 found one that asked for 13.4 GiB);
- **UTF-8 BOMs**: a byte order mark before any CSV input (an output-log stream CSV, a ticks or
  micro CSV to convert, a correlations CSV) gives the same result as the same file without it.

Budgets: the in-process properties run at most 15 examples (2 where each example validates twice), the
child-per-example ones `CAPPED_EXAMPLES` (3); `-m slow` runs `SLOW_EXAMPLES` / `CAPPED_SLOW_EXAMPLES`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.inputs import LIMITS, MiB
from kit.shipped import specs_dir
from tests.datagen.test_fuzz_convert import CASES, mutated, mutated_pairs
from tests.fuzz import expect_user_error, fuzz_settings, run_capped, run_cli, slow_settings
from tests.helpers import SCHEMAS, fresh_dir, pairs_config, validate_pairs_argv

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

CAPPED_EXAMPLES = int(os.environ.get("CEPKIT_FUZZ_CAPPED_EXAMPLES", "3"))
CAPPED_SLOW_EXAMPLES = int(os.environ.get("CEPKIT_FUZZ_CAPPED_SLOW_EXAMPLES", "60"))
capped_settings = settings(fuzz_settings, max_examples=CAPPED_EXAMPLES)
capped_slow_settings = settings(slow_settings, max_examples=CAPPED_SLOW_EXAMPLES)
# Each example of these validates a small dataset twice in-process.
verdict_settings = settings(fuzz_settings, max_examples=min(2, fuzz_settings.max_examples))
# Cheap in-process examples, but the default budget of all fuzz tests is one minute.
quick_settings = settings(fuzz_settings, max_examples=min(15, fuzz_settings.max_examples))

W0 = 1_790_000_000_000           # the wall clock of the hand-made runs (2026)
PROMPT_S = 20                    # "at once": a refusal that takes longer is a hang
# `cepkit argv` in a child process (under tests/fuzz.py's memory cap): exit code as the CLI's.
CLI = "import sys\nfrom cepkit_app.cli import main\nsys.exit(main(sys.argv[1:]))\n"
MICRO_SPEC, MICRO_WORKLOAD = "filtering-quick", "filtering-selectivity-5pct"


@contextlib.contextmanager
def alarm(seconds: int):
    """Raise TimeoutError in this (main) thread after `seconds`: a blocking read or an endless
    loop in-process fails the example instead of hanging the test run."""
    def ring(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- the inputs: a small Pairs run and a small micro run, each with a valid output log ------------

def _parquet_log(out: Path, frames: dict[str, pd.DataFrame], sim_start: int, fmt: str = "parquet",
                 bom: bool = False) -> Path:
    out.mkdir(parents=True)
    streams = {}
    for name, df in frames.items():
        fname = f"{name}-00001.{fmt}"
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pandas(df, preserve_index=False), out / fname)
        else:
            (out / fname).write_bytes((b"\xef\xbb\xbf" if bom else b"") + df.to_csv(index=False).encode())
        streams[name] = {"files": [fname]}
    (out / "output-log.json").write_text(json.dumps({
        "kind": "cepkit.output-log", "schema_version": 1, "format": fmt, "run_start_wall_ms": W0,
        "sim_start_ms": sim_start, "speed": 1.0, "pacing": "tickts", "streams": streams}))
    return out


def _stamped(expected: dict[str, pd.DataFrame], sim_start: int, tick_col: str | None) -> dict[str, pd.DataFrame]:
    """The expected answers as an engine's log holds them: inputTS on the wall clock, arrivals after."""
    out = {}
    for name, df in expected.items():
        df = df.copy()
        df["inputTS"] = W0 + ((df[tick_col] if tick_col else df["inputTS"]) - sim_start)
        df["arrivalTS"] = df["inputTS"] + 50 + np.arange(len(df)) % 30
        out[name] = df
    return out


@pytest.fixture(scope="module")
def pairs_run(tmp_path_factory) -> dict[str, Path]:
    """A 60-second Pairs dataset, its strategies, a config, and a passing output log."""
    from datagen.pairs import generate_pairs
    from kit.workload import load_aux
    from querygen.output import write_strategies

    root = tmp_path_factory.mktemp("fuzz-inputs-pairs")
    data = root / "data"
    generate_pairs(pairs_config(file_count=2, rate={"duration_s": 60.0, "basis_rate_eps": 300.0}), data)
    strategies = root / "strategies.xml"
    write_strategies(load_aux(data), 42, strategies)
    code, out, err = run_cli(validate_pairs_argv(data, strategies, root / "expected"))
    assert code == 0, out + err
    expected = {n: pd.read_parquet(root / "expected" / "expected" / f"{n}.parquet") for n in SCHEMAS}
    assert len(expected["Indicator"]) > 0
    sim_start = json.loads((data / "manifest.json").read_text())["start_epoch_ms"]
    frames = _stamped(expected, sim_start, "inputTickTS")
    log = _parquet_log(root / "log", frames, sim_start)
    code, out, err = run_cli(validate_pairs_argv(data, strategies, root / "check") + ["--log", str(log)])
    assert code == 0, out + err
    config = root / "c.toml"
    config.write_text((specs_dir() / "configs" / "quick.toml").read_text())
    return {"data": data, "strategies": strategies, "log": log, "config": config, "root": root,
            "frames": frames, "sim_start": sim_start}


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory) -> dict[str, Path]:
    """A 2-second micro dataset for the first workload of the quick filtering suite and a passing log."""
    root = tmp_path_factory.mktemp("fuzz-inputs-micro")
    data = root / "data"
    code, out, err = run_cli(["datagen", "micro", "--seed", "7", "--streams", "1", "--attributes", "5",
                              "--max-id", "100", "--profile", "constant", "--set", "micro.rate.basis_rate_eps=200",
                              "--set", "micro.rate.duration_s=2", "--out", str(data)])
    assert code == 0, out + err
    code, out, err = run_cli(["validate", "micro", "--spec", MICRO_SPEC, "--workload", MICRO_WORKLOAD,
                              "--data", str(data), "--out", str(root / "expected")])
    assert code == 0, out + err
    expected = {p.stem: pd.read_parquet(p) for p in sorted((root / "expected" / "expected").glob("*.parquet"))}
    sim_start = json.loads((data / "manifest.json").read_text())["start_epoch_ms"]
    log = _parquet_log(root / "log", _stamped(expected, sim_start, None), sim_start)
    code, out, err = run_cli(_micro_argv(data, log, root / "check"))
    assert code == 0, out + err
    return {"data": data, "log": log, "root": root}


def _micro_argv(data: Path, log: Path, out: Path) -> list[str]:
    return ["validate", "micro", "--spec", MICRO_SPEC, "--workload", MICRO_WORKLOAD, "--data", str(data),
            "--log", str(log), "--out", str(out)]


# -- 1. non-regular and oversized files ------------------------------------------------------------

INPUTS = ("config", "spec", "strategies", "manifest", "aux", "output-log")
REPLACEMENTS = ("directory", "fifo", "oversized", "dev-zero")


def _replace(path: Path, how: str, cap: int, extra: int) -> None:
    path.unlink()
    if how == "directory":
        path.mkdir()
        (path / "inside.json").write_text("{}")
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "oversized":
        with open(path, "wb") as fh:            # sparse: costs no disk, cap + extra bytes of NULs
            fh.truncate(cap + extra)
    else:
        os.symlink("/dev/zero", path)


def _check_replaced_input(pairs_run, tmp_path, which: str, how: str, extra: int) -> None:
    root = fresh_dir(tmp_path)
    if which in ("manifest", "aux"):
        ds = root / "ds"
        shutil.copytree(pairs_run["data"], ds)
        target = ds / ("manifest.json" if which == "manifest" else "pairs-aux.json")
        argv = validate_pairs_argv(ds, pairs_run["strategies"], root / "report", "--no-verify")
        kind = which
    elif which == "output-log":
        log = root / "log"
        shutil.copytree(pairs_run["log"], log)
        target = log / "output-log.json"
        argv = validate_pairs_argv(pairs_run["data"], pairs_run["strategies"], root / "report") + ["--log", str(log)]
        kind = "output-log"
    elif which == "strategies":
        target = root / "strategies.xml"
        shutil.copy(pairs_run["strategies"], target)
        argv = validate_pairs_argv(pairs_run["data"], target, root / "report")
        kind = "spec"
    elif which == "spec":
        target = root / "spec.xml"
        shutil.copy(pairs_run["strategies"], target)
        argv = ["querygen", "check", str(target)]
        kind = "spec"
    else:
        target = root / "c.toml"
        shutil.copy(pairs_run["config"], target)
        argv = ["config", "show", "-c", str(target)]
        kind = "config"
    _replace(target, how, LIMITS[kind], extra)
    if how == "dev-zero":
        # A regression would read /dev/zero until the memory runs out: only under the cap.
        res = run_capped(CLI, *argv, timeout_s=60)
        text = res.stdout + res.stderr
        assert "Traceback" not in text and res.returncode == 2, f"exit {res.returncode} for {argv}:\n{text[-3000:]}"
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cepkit: error: ") and str(target) in lines[0], res.stderr
        assert not (root / "report").exists()
        return
    with alarm(PROMPT_S):
        line = expect_user_error(argv, watch=[root], names=[str(target)])
    if how == "oversized":
        assert "MiB" in line or "KiB" in line, f"the refusal does not name the cap: {line}"


REPLACED = st.tuples(st.sampled_from(INPUTS), st.sampled_from(REPLACEMENTS), st.sampled_from((1, 2 * MiB + 3)))


@quick_settings
@given(case=REPLACED.filter(lambda c: c[1] != "dev-zero"))
def test_a_non_regular_or_oversized_input_is_one_line(pairs_run, tmp_path, case):
    _check_replaced_input(pairs_run, tmp_path, *case)


@capped_settings
@given(which=st.sampled_from(INPUTS))
def test_dev_zero_as_any_input_is_one_line_under_the_memory_cap(pairs_run, tmp_path, which):
    _check_replaced_input(pairs_run, tmp_path, which, "dev-zero", 0)


@pytest.mark.slow
@slow_settings
@given(case=REPLACED)
def test_a_non_regular_or_oversized_input_is_one_line_slow(pairs_run, tmp_path, case):
    _check_replaced_input(pairs_run, tmp_path, *case)


# -- 2. hostile numbers in every JSON field that sizes work -----------------------------------------

HOSTILE = st.one_of(
    st.sampled_from([0, -1, 1, -(2**31), 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 2**64, 10**30, -(10**30),
                     0.0, -0.0, 0.5, 1e-300, 1e300, -1e300, 1.7976931348623157e308, math.inf, -math.inf, math.nan]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
)


def _numeric_paths(doc, prefix=()) -> list[tuple]:
    """The paths of every number (not bool) in a JSON document."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(prefix + (k,))
        else:
            out += _numeric_paths(v, prefix + (k,))
    return out


def _with_faults(log_doc: dict) -> dict:
    """The log with a fault record, so that its time (which sizes the recovery buckets) is a target too."""
    return {**log_doc, "faults": [{"fault": "kill-engine@5s", "kind": "kill-engine", "at_ms": W0 + 5000}]}


def _set(doc, path: tuple, value) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


@st.composite
def hostile_edit(draw, docs: dict[str, dict]) -> tuple[str, list[tuple[tuple, object]]]:
    """One of `docs` (name -> document) with one to three of its numbers replaced."""
    name = draw(st.sampled_from(sorted(docs)))
    paths = _numeric_paths(docs[name])
    chosen = draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3, unique=True))
    return name, [(p, draw(HOSTILE)) for p in chosen]


def _run_capped_verdict(argv: list[str], edits) -> None:
    res = run_capped(CLI, *argv, timeout_s=90)
    text = res.stdout + res.stderr
    assert "Traceback" not in text and "MemoryError" not in text, f"{edits}:\n{text[-3000:]}"
    assert res.returncode in (0, 1, 2), f"exit {res.returncode} for {edits}:\n{text[-3000:]}"
    if res.returncode == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cepkit: error: "), f"{edits}:\n{res.stderr}"


def _pairs_docs(pairs_run) -> dict[str, dict]:
    return {"output-log.json": _with_faults(json.loads((pairs_run["log"] / "output-log.json").read_text())),
            "manifest.json": json.loads((pairs_run["data"] / "manifest.json").read_text()),
            "pairs-aux.json": json.loads((pairs_run["data"] / "pairs-aux.json").read_text())}


def _check_pairs_numbers(pairs_run, tmp_path, data_) -> None:
    _check_numbers(pairs_run, _pairs_docs(pairs_run), tmp_path, data_,
                   lambda ds, log, report: validate_pairs_argv(ds, pairs_run["strategies"], report, "--no-verify")
                   + ["--log", str(log)])


def _check_micro_numbers(micro_run, tmp_path, data_) -> None:
    docs = {"output-log.json": _with_faults(json.loads((micro_run["log"] / "output-log.json").read_text())),
            "manifest.json": json.loads((micro_run["data"] / "manifest.json").read_text())}
    _check_numbers(micro_run, docs, tmp_path, data_, _micro_argv)


def _check_numbers(run, docs: dict[str, dict], tmp_path, data_, argv_of) -> None:
    """One drawn hostile edit of one of `docs` (file name -> document), written into a copy of the
    run's dataset or log, then `cepkit validate` (argv_of(dataset, log, report)) under the memory cap."""
    name, edits = data_.draw(hostile_edit(docs))
    root = fresh_dir(tmp_path)
    ds, log = root / "ds", root / "log"
    shutil.copytree(run["data"], ds)
    shutil.copytree(run["log"], log)
    doc = docs[name]
    for path, value in edits:
        _set(doc, path, value)
    (log if name == "output-log.json" else ds).joinpath(name).write_text(json.dumps(doc))
    _run_capped_verdict(argv_of(ds, log, root / "report"), (name, edits))


@capped_settings
@given(data_=st.data())
def test_hostile_numbers_in_a_pairs_run_end_in_a_verdict_or_one_line(pairs_run, tmp_path, data_):
    _check_pairs_numbers(pairs_run, tmp_path, data_)


@capped_settings
@given(data_=st.data())
def test_hostile_numbers_in_a_micro_run_end_in_a_verdict_or_one_line(micro_run, tmp_path, data_):
    _check_micro_numbers(micro_run, tmp_path, data_)


@pytest.mark.slow
@capped_slow_settings
@given(data_=st.data())
def test_hostile_numbers_in_a_pairs_run_slow(pairs_run, tmp_path, data_):
    _check_pairs_numbers(pairs_run, tmp_path, data_)


@pytest.mark.slow
@capped_slow_settings
@given(data_=st.data())
def test_hostile_numbers_in_a_micro_run_slow(micro_run, tmp_path, data_):
    _check_micro_numbers(micro_run, tmp_path, data_)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["run_start_wall_ms", "sim_start_ms", "speed"])
@pytest.mark.parametrize("value", [0, -(2**63), 2**63 - 1, 1e300])
def test_every_clock_of_the_log_at_its_extremes(pairs_run, tmp_path, key, value):
    """The clocks one by one at the values that once sized a 13.4 GiB series (not left to sampling)."""
    root = fresh_dir(tmp_path)
    log = root / "log"
    shutil.copytree(pairs_run["log"], log)
    doc = json.loads((log / "output-log.json").read_text())
    doc[key] = value
    (log / "output-log.json").write_text(json.dumps(doc))
    _run_capped_verdict(validate_pairs_argv(pairs_run["data"], pairs_run["strategies"], root / "report")
                        + ["--log", str(log)], (key, value))


# -- 3. UTF-8 BOMs on CSV inputs -------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


def _summary(out: Path) -> list:
    doc = json.loads((out / "summary.json").read_text())
    return [{k: c[k] for k in ("stream", "missing", "wrong", "undue", "duplicates")} for c in doc["streams"]]


def _check_bom_log(pairs_run, tmp_path, drop: dict[str, list[float]]) -> None:
    """A CSV log (some rows dropped, so that verdicts differ) with and without a BOM on every file."""
    root = fresh_dir(tmp_path)
    frames = {n: df.drop(index=df.index[sorted({int(w * len(df)) for w in drop[n]})]) if len(df) else df
              for n, df in pairs_run["frames"].items()}
    results = []
    for bom in (False, True):
        log = _parquet_log(root / f"log-{bom}", frames, pairs_run["sim_start"], fmt="csv", bom=bom)
        code, out, err = run_cli(validate_pairs_argv(pairs_run["data"], pairs_run["strategies"],
                                                     root / f"report-{bom}") + ["--log", str(log)])
        assert "Traceback" not in out + err
        results.append((code, _summary(root / f"report-{bom}") if code in (0, 1) else
                        err.replace(str(root / f"log-{bom}"), "LOG")))
    assert results[0] == results[1], results


DROPS = st.fixed_dictionaries({n: st.lists(st.floats(0, 1, exclude_max=True), max_size=2) for n in SCHEMAS})


@verdict_settings
@given(drop=DROPS)
def test_a_bom_on_the_log_csvs_changes_nothing(pairs_run, tmp_path, drop):
    _check_bom_log(pairs_run, tmp_path, drop)


def _convert(root: Path, argv_tail: list[str], files: dict[str, bytes]) -> tuple[int, dict]:
    """`datagen convert` in `root`; (code, {output file: content} or {"error": line with `root` masked})."""
    (root / "in").mkdir(parents=True)
    for name, raw in files.items():
        (root / "in" / name).write_bytes(raw)
    argv = ["datagen", "convert", str(root / "in" / "input.csv"),
            *[str(root / "in" / a[3:]) if a.startswith("in:") else a for a in argv_tail], "--out", str(root / "ds")]
    code, out, err = run_cli(argv)
    assert "Traceback" not in out + err
    # On success stdout/stderr hold a throughput (rows/s) that varies: the files are the result.
    produced = {"error": err.replace(str(root), "ROOT")} if code else {}
    if code == 0:
        for p in sorted((root / "ds").iterdir()):
            if p.suffix == ".parquet":
                produced[p.name] = pq.read_table(p).to_pylist()
            elif p.name == "pairs-aux.json":
                produced[p.name] = json.loads(p.read_text())
            elif p.suffix == ".csv":
                produced[p.name] = p.read_bytes()
        manifest = json.loads((root / "ds" / "manifest.json").read_text())
        produced["rows"] = [(f["path"], f["rows"]) for f in manifest["files"]]
    return code, produced


def _check_bom_convert(tmp_path, name: str, data: bytes) -> None:
    root = fresh_dir(tmp_path)
    plain = _convert(root / "plain", CASES[name][1], {"input.csv": data})
    bom = _convert(root / "bom", CASES[name][1], {"input.csv": BOM + data})
    assert plain == bom, (plain, bom)


def _check_bom_correlations(tmp_path, pairs: bytes, on_ticks: bool) -> None:
    root = fresh_dir(tmp_path)
    tail = [*CASES["monthly"][1], "--correlations", "in:pairs.csv"]
    ticks = CASES["monthly"][0].encode()
    plain = _convert(root / "plain", tail, {"input.csv": ticks, "pairs.csv": pairs})
    bom = _convert(root / "bom", tail, {"input.csv": (BOM if on_ticks else b"") + ticks, "pairs.csv": BOM + pairs})
    assert plain == bom, (plain, bom)


@quick_settings
@given(case=mutated().filter(lambda c: not c[1].startswith(BOM)))
def test_a_bom_on_a_csv_to_convert_changes_nothing(tmp_path, case):
    _check_bom_convert(tmp_path, *case)


@quick_settings
@given(pairs=mutated_pairs(), on_ticks=st.booleans())
def test_a_bom_on_a_correlations_csv_changes_nothing(tmp_path, pairs, on_ticks):
    _check_bom_correlations(tmp_path, pairs, on_ticks)


@pytest.mark.slow
@slow_settings
@given(case=mutated().filter(lambda c: not c[1].startswith(BOM)))
def test_a_bom_on_a_csv_to_convert_changes_nothing_slow(tmp_path, case):
    _check_bom_convert(tmp_path, *case)


@pytest.mark.slow
@slow_settings
@given(pairs=mutated_pairs(), on_ticks=st.booleans())
def test_a_bom_on_a_correlations_csv_changes_nothing_slow(tmp_path, pairs, on_ticks):
    _check_bom_correlations(tmp_path, pairs, on_ticks)


@pytest.mark.slow
@slow_settings
@given(drop=DROPS)
def test_a_bom_on_the_log_csvs_changes_nothing_slow(pairs_run, tmp_path, drop):
    _check_bom_log(pairs_run, tmp_path, drop)
