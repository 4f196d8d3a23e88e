"""Ordinary OS conditions are one line naming the file, exit code 2, nothing left behind.

A config path that is a directory, a dangling symlink, under a regular file, not UTF-8 or not a
config at all; `--out` under a regular file or in a place nobody may write (/proc/self) for every
command that writes; `-v` keeps the exit code; the CLI's last line of defence for an OSError;
SIGTERM and SIGINT of a running generation (exit 143 / 130, no staging directory left); a failed
validation leaves no half-written report. (Tests run as root, so permissions stop nothing: the
conditions are built from directories, links, regular files and /proc.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cepkit_app.cli import main, signal_name
from kit.atomic import TERMINATION_SIGNALS
from kit.shipped import specs_dir
from tests.fuzz import expect_user_error, run_cli

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

SUITE = specs_dir() / "suites" / "filtering-quick.xml"
WORKLOAD = "filtering-selectivity-5pct"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A tiny dataset, its strategies and a CSV to convert: the inputs of every writing command."""
    from datagen.pairs import generate_pairs
    from kit.workload import load_aux
    from querygen.output import write_strategies
    from tests.helpers import pairs_config

    root = tmp_path_factory.mktemp("inputs")
    data = root / "data"
    generate_pairs(pairs_config(rate={"duration_s": 30.0}), data)
    strategies = root / "strategies.xml"
    write_strategies(load_aux(data), 42, strategies)
    csv = root / "events.csv"
    csv.write_text("ID,A1,TS\n1,2.5,1000\n2,3.5,2000\n")
    from datagen.micro import generate_micro
    from kit.config import MicroConfig, RateConfig

    micro = generate_micro(MicroConfig(attributes=5, rate=RateConfig(profile="constant", basis_rate_eps=100.0,
                                                                      duration_s=1.0)), root / "micro").directory
    return {"root": root, "data": data, "strategies": strategies, "csv": csv, "micro": micro}


def writing_commands(i: dict[str, Path]) -> dict[str, list[str]]:
    """Every command that writes, without its --out."""
    return {
        "datagen pairs": ["datagen", "pairs", "--set", "pairs.rate.duration_s=1"],
        "datagen micro": ["datagen", "micro", "--set", "micro.rate.duration_s=1"],
        "datagen convert": ["datagen", "convert", str(i["csv"]), "--kind", "micro"],
        "querygen pairs": ["querygen", "pairs", "--aux", str(i["data"])],
        "querygen micro": ["querygen", "micro", "--suite", "filtering", "--quick"],
        "querygen micro all": ["querygen", "micro", "--suite", "all", "--quick"],
        "translate pairs": ["translate", "pairs", "--strategies", str(i["strategies"])],
        "translate micro": ["translate", "micro", "--spec", str(SUITE), "--workload", WORKLOAD],
        "validate pairs": ["validate", "pairs", "--data", str(i["data"]), "--strategies", str(i["strategies"])],
        "validate micro": ["validate", "micro", "--spec", str(SUITE), "--workload", WORKLOAD, "--data", str(i["micro"])],
        "pairs": ["pairs", "--data", str(i["data"]), "--strategies", str(i["strategies"])],
        "micro": ["micro", "--suite", "filtering", "--quick", "--workload", WORKLOAD],
    }


COMMANDS = ["datagen pairs", "datagen micro", "datagen convert", "querygen pairs", "querygen micro",
            "querygen micro all", "translate pairs", "translate micro", "validate pairs", "validate micro", "pairs", "micro"]


@pytest.mark.parametrize("command", COMMANDS)
def test_out_under_a_regular_file(inputs, tmp_path, command):
    (tmp_path / "file").write_text("not a directory")
    out = tmp_path / "file" / "out"
    line = expect_user_error([*writing_commands(inputs)[command], "--out", str(out)],
                             watch=[tmp_path, inputs["root"]], names=[str(out)])
    assert "is not a directory" in line


@pytest.mark.parametrize("command", COMMANDS)
def test_out_where_nobody_may_write(inputs, tmp_path, command):
    out = "/proc/self/cepkit-out"
    line = expect_user_error([*writing_commands(inputs)[command], "--out", out],
                             watch=[tmp_path, inputs["root"]], names=[out])
    assert "not writable" in line


# --- config files -----------------------------------------------------------------------------

def _config_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    (tmp_path / "adir").mkdir()
    (tmp_path / "dangling.toml").symlink_to(tmp_path / "gone.toml")
    (tmp_path / "regular").write_text("x")
    (tmp_path / "binary.toml").write_bytes(b"[pairs]\nseed = 1\n\xff\xfe\x00garbage")
    (tmp_path / "huge.toml").write_bytes(b"# " + b"x" * (2 << 20) + b"\n")
    return {
        "directory": (tmp_path / "adir", "is a directory, not a config file"),
        "dangling symlink": (tmp_path / "dangling.toml", "dangling symbolic link"),
        "under a regular file": (tmp_path / "regular" / "c.toml", "config file not found"),
        "not UTF-8": (tmp_path / "binary.toml", "not UTF-8 text"),
        "not a config": (tmp_path / "huge.toml", "larger than 1024 KiB"),
    }


@pytest.mark.parametrize("case", ["directory", "dangling symlink", "under a regular file", "not UTF-8",
                                  "not a config"])
@pytest.mark.parametrize("command", [["config", "show"], ["datagen", "pairs"], ["querygen", "micro", "--suite",
                                                                                "filtering"]])
def test_unreadable_config_names_the_file(tmp_path, case, command):
    path, reason = _config_cases(tmp_path)[case]
    out = tmp_path / "out"
    line = expect_user_error([*command, "-c", str(path), "--out", str(out)] if command[0] != "config"
                             else [*command, "-c", str(path)], watch=[tmp_path], names=[str(path)])
    assert reason in line
    if case == "not UTF-8":
        assert line.startswith(f"cepkit: error: {path}:3: ")


def test_unreadable_config_in_the_library(tmp_path):
    from kit.config import load_config
    from kit.errors import CepkitError
    for path, reason in _config_cases(tmp_path).values():
        with pytest.raises(CepkitError, match=reason):
            load_config(path)


# --- the CLI's last lines of defence ----------------------------------------------------------

def test_verbose_keeps_exit_code_2_and_shows_the_traceback():
    code, out, err = run_cli(["-v", "config", "show", "--set", "pairs.scale_factor=0"])
    assert code == 2
    assert "Traceback" in err
    assert err.strip().splitlines()[-1] == "cepkit: error: --set pairs.scale_factor: must be > 0, got 0"
    res = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "-v", "config", "show", "--set", "pairs.seed=-1"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" in res.stderr


@pytest.mark.parametrize("exc, line", [
    (PermissionError(13, "Permission denied", "/some/file"), "cepkit: error: /some/file: Permission denied"),
    (IsADirectoryError(21, "Is a directory", "/a/dir"), "cepkit: error: /a/dir: Is a directory"),
    (OSError(28, "No space left on device"), "cepkit: error: No space left on device"),
    (OSError(18, "Invalid cross-device link", "/a", None, "/b"), "cepkit: error: /a -> /b: Invalid cross-device link"),
])
def test_an_escaped_oserror_is_one_line(monkeypatch, exc, line):
    import kit.config

    def boom(*a, **k):
        raise exc
    monkeypatch.setattr(kit.config, "load_config", boom)
    assert run_cli(["config", "show"])[0::2] == (2, line + "\n")
    code, _, err = run_cli(["-v", "config", "show"])
    assert code == 2 and "Traceback" in err and err.strip().splitlines()[-1] == line


def test_main_restores_the_sigterm_handler():
    before = signal.getsignal(signal.SIGTERM)
    assert main(["config", "keys"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


# --- signals during a generation --------------------------------------------------------------

def _start_long_generation(out: Path, sig: int = signal.SIGINT) -> subprocess.Popen:
    # SF 11 (10,000 ticks/s) for 10 simulated hours: a minute of work, so the signal lands mid-way.
    # `sig` back to its default in the child: a shell that starts the tests in the background
    # leaves SIGINT ignored (nohup: SIGHUP), Python then keeps it ignored, and the generation would
    # run to its end.
    return subprocess.Popen([sys.executable, "-m", "cepkit_app.cli", "datagen", "pairs", "--sf", "11",
                             "--set", "pairs.rate.duration_s=36000", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))


def _wait_for_staging(parent: Path, proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        names = [n for n in os.listdir(parent) if ".partial-" in n]
        if names:
            return names[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("no staging directory appeared")


def _signal_case(sig: int):
    name = signal_name(sig)
    line = "cepkit: interrupted" if sig == signal.SIGINT else f"cepkit: terminated by {name}"
    return pytest.param(sig, 128 + sig, line, id=name)


@pytest.mark.parametrize("sig, code, line", [_signal_case(s) for s in TERMINATION_SIGNALS
                                             if s in signal.Signals.__members__.values()
                                             or s in (signal.SIGRTMIN, signal.SIGRTMAX)])
def test_signal_mid_generation_leaves_nothing(tmp_path, sig, code, line):
    """Every catchable termination signal (specs/EXIT_CODES.md; of the real-time ones the first and
    the last) cleans up like SIGTERM: exit 128+N, one line, no staging directory left."""
    out = tmp_path / "ds"
    proc = _start_long_generation(out, sig)
    try:
        staging = _wait_for_staging(tmp_path, proc)
        assert staging.startswith(f".ds.partial-{proc.pid}-")
        time.sleep(0.3)                         # well inside the writing loop
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code
    assert err == line + "\n"
    assert os.listdir(tmp_path) == []           # no staging dir, no final dir


def test_a_killed_generation_is_cleaned_by_the_next_one(tmp_path):
    proc = _start_long_generation(tmp_path / "ds")
    try:
        staging = _wait_for_staging(tmp_path, proc)
    finally:
        proc.kill()
        proc.communicate()
    assert os.listdir(tmp_path) == [staging]
    assert main(["datagen", "pairs", "--set", "pairs.rate.duration_s=1", "--out", str(tmp_path / "ds")]) == 0
    assert os.listdir(tmp_path) == ["ds"]


# --- a failed validation leaves no report -----------------------------------------------------

def test_failed_validation_leaves_no_partial_report(inputs, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    (log / "output-log.json").write_text('{"kind": "cepkit.output-log", "schema_version": 1, "streams": 3}')
    out = tmp_path / "report"
    expect_user_error(["validate", "pairs", "--data", str(inputs["data"]), "--strategies", str(inputs["strategies"]),
                       "--log", str(log), "--out", str(out)], watch=[tmp_path, inputs["root"]],
                      names=["output-log.json"])
    assert not out.exists()
    # The retry is not blocked by anything the failure left.
    assert main(["validate", "pairs", "--data", str(inputs["data"]), "--strategies", str(inputs["strategies"]),
                 "--out", str(out)]) == 0
    assert (out / "report.html").is_file() and (out / "expected" / "MarketOrder.parquet").is_file()
    assert sorted(os.listdir(tmp_path)) == ["log", "report"]


# --- exit codes, whatever happens to stdout and stderr ----------------------------------------

def _write_log(directory: Path, expected: Path, sim_start_ms: int, drop_one: bool) -> Path:
    """An engine's output log holding the expected answers (or all but one Indicator)."""
    import json

    import pandas as pd

    directory.mkdir()
    streams = {}
    for name in ("Indicator", "MarketOrder"):
        df = pd.read_parquet(expected / "expected" / f"{name}.parquet")
        if drop_one and name == "Indicator":
            df = df.iloc[1:]
        df["inputTS"] = 1_790_000_000_000 + (df["inputTickTS"] - sim_start_ms)
        df["arrivalTS"] = df["inputTS"] + 100
        df.to_parquet(directory / f"{name}-00001.parquet", index=False)
        streams[name] = {"files": [f"{name}-00001.parquet"]}
    (directory / "output-log.json").write_text(json.dumps({
        "kind": "cepkit.output-log", "schema_version": 1, "format": "parquet", "run_start_wall_ms": 1_790_000_000_000,
        "sim_start_ms": sim_start_ms, "speed": 1.0, "streams": streams}))
    return directory


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, Path]:
    """A one-minute dataset (Indicators to validate), its strategies, and engine logs whose validation
    exits 0 (PASSED), 1 (FAILED: an Indicator missing) and 2 (bad input)."""
    import json

    from datagen.pairs import generate_pairs
    from kit.workload import load_aux
    from querygen.output import write_strategies
    from tests.helpers import pairs_config

    root = tmp_path_factory.mktemp("run")
    generate_pairs(pairs_config(rate={"duration_s": 60.0}), root / "data")
    write_strategies(load_aux(root / "data"), 42, root / "strategies.xml")
    expected = root / "expected"
    assert main(["validate", "pairs", "--data", str(root / "data"), "--strategies", str(root / "strategies.xml"),
                 "--out", str(expected)]) == 0
    sim_start = json.loads((root / "data" / "manifest.json").read_text())["start_epoch_ms"]
    bad = root / "bad"
    bad.mkdir()
    (bad / "output-log.json").write_text('{"kind": "cepkit.output-log", "schema_version": 1')
    return {"data": root / "data", "strategies": root / "strategies.xml",
            0: _write_log(root / "passed", expected, sim_start, False),
            1: _write_log(root / "failed", expected, sim_start, True), 2: bad}


def _closed_pipe() -> int:
    """The writing end of a pipe nobody reads any more (`cepkit ... | head -1` once head is gone)."""
    r, w = os.pipe()
    os.close(r)
    return w


def _run_with_streams(argv: list[str], streams: str) -> tuple[int, str]:
    """(exit code, stderr if it could be read) of `cepkit argv` with stdout/stderr as `streams` says."""
    full = open("/dev/full", "w")
    pipe_out, pipe_err = _closed_pipe(), _closed_pipe()
    try:
        where = {"stdout full": (full, subprocess.PIPE), "stderr full": (subprocess.PIPE, full),
                 "both full": (full, full), "closed pipes": (pipe_out, pipe_err)}[streams]
        res = subprocess.run([sys.executable, "-m", "cepkit_app.cli", *argv], stdout=where[0], stderr=where[1],
                             stdin=subprocess.DEVNULL, timeout=120)
    finally:
        full.close()
        os.close(pipe_out)
        os.close(pipe_err)
    return res.returncode, (res.stderr or b"").decode()


STREAMS = ["stdout full", "stderr full", "closed pipes"]


@pytest.mark.parametrize("streams", STREAMS)
@pytest.mark.parametrize("code", [0, 1, 2], ids=["passed", "failed", "bad input"])
def test_exit_code_of_a_validation_whatever_the_streams(run, tmp_path, code, streams):
    """0 PASSED, 1 FAILED, 2 bad input, with stdout or stderr on a full device or a closed pipe:
    a failed write changes neither the code nor what is written (today: 1 with stderr full, 2 or
    120 with stdout full)."""
    out = tmp_path / "report"
    got, err = _run_with_streams(["validate", "pairs", "--data", str(run["data"]), "--strategies",
                                  str(run["strategies"]), "--log", str(run[code]), "--out", str(out)], streams)
    assert got == code, err
    assert "Traceback" not in err and "Exception ignored" not in err
    if streams == "stdout full":        # stderr was readable: it says the same as the code
        lines = err.strip().splitlines()
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith("cepkit: error: ") and "output-log.json" in lines[0]
        else:
            assert f"verdict: {'PASSED' if code == 0 else 'FAILED'}" in lines
    assert (out / "summary.json").is_file() == (code != 2)
    assert os.listdir(tmp_path) == ([] if code == 2 else ["report"])


@pytest.mark.parametrize("streams, code", [("stdout full", 2), ("stderr full", 0), ("closed pipes", 0)])
def test_a_command_whose_product_is_stdout(streams, code):
    """`config show` prints the resolved config: a stdout that cannot take it is a job not done (2),
    a reader that went away took what it wanted (0); stderr does not matter."""
    got, err = _run_with_streams(["config", "show"], streams)
    assert got == code, err
    if streams == "stdout full":
        assert err == "cepkit: error: standard output: cannot write the config text: No space left on device\n"


def test_an_internal_error_exits_2_not_1(monkeypatch):
    """A bug's traceback is shown, and its exit code is 2: Python's 1 would read as a FAILED verdict."""
    import kit.config

    def boom(*a, **k):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(kit.config, "load_config", boom)
    code, _, err = run_cli(["config", "show"])
    assert code == 2 and "Traceback" in err
    assert err.strip().splitlines()[-1] == ("cepkit: error: internal error, a bug in cepkit (the traceback above "
                                            "says where): ZeroDivisionError: division by zero")
