"""The cepkit command line: help without a JVM, data generation, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cepkit_app.cli import main

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)


def test_help_needs_no_spark():
    code = ("import sys; from cepkit_app.cli import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'numpy', 'pyarrow')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    res = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "datagen" in res.stdout


def test_datagen_pairs_quick(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["datagen", "pairs", "--seed", "5", "--set", "pairs.rate.duration_s=10",
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 5 and manifest["total_rows"] > 40_000
    assert (out / "config.toml").read_text().startswith('kind = "cepkit.config"')


def test_default_output_never_reuses_a_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["datagen", "pairs", "--set", "pairs.rate.profile=constant", "--set", "pairs.rate.duration_s=1"]
    assert main(args) == 0 and main(args) == 0
    outs = [line for line in capsys.readouterr().out.splitlines() if line.startswith("data")]
    assert outs == ["data/pairs-sf1-constant-seed42", "data/pairs-sf1-constant-seed42-2"]


def test_errors_are_one_line_without_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[pairs]\nfile_count = 0\n")
    res = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "datagen", "pairs", "-c", str(bad),
                          "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr == f"cepkit: error: {bad}:pairs.file_count: must be > 0, got 0\n"
    assert not (tmp_path / "x").exists()
    res = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "-v", "datagen", "pairs", "-c", str(bad)],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" in res.stderr      # -v shows the traceback, keeps the code
    assert res.stderr.strip().splitlines()[-1] == f"cepkit: error: {bad}:pairs.file_count: must be > 0, got 0"


def test_config_show_and_keys(capsys):
    assert main(["config", "show", "--set", "pairs.scale_factor=7"]) == 0
    assert "scale_factor = 7" in capsys.readouterr().out
    assert main(["config", "keys"]) == 0
    out = capsys.readouterr().out
    assert "pairs.rate.profile" in out.split()
    assert any(line.split() == ["pairs.rate.peak_factor", "number,", ">=", "1", "and", "<=", "100"]
               for line in out.splitlines())


def _cepkit(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """`cepkit args` in a subprocess that cannot run away (killed at `timeout`, which fails the test)."""
    proc = subprocess.Popen([sys.executable, "-m", "cepkit_app.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"cepkit {' '.join(args)} was still running after {timeout} s")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.parametrize("setting, message", [
    ("pairs.rate.basis_rate_eps=inf", "--set pairs.rate.basis_rate_eps: must be a finite number, got inf"),
    ("pairs.rate.peak_factor=inf", "--set pairs.rate.peak_factor: must be a finite number, got inf"),
    ("pairs.rate.duration_s=nan", "--set pairs.rate.duration_s: must be a finite number, got nan"),
    ("pairs.scale_factor=1e9", "--set pairs.scale_factor: must be <= 10000, got 1000000000"),
    ("pairs.start_epoch_ms=9223372036854000000", "--set pairs.start_epoch_ms: must be <= 7258118400000, "
                                                 "got 9223372036854000000"),
])
def test_unbounded_or_wrapping_numbers_never_start_a_generation(tmp_path, setting, message):
    res = _cepkit(["datagen", "pairs", "--set", setting, "--out", str(tmp_path / "ds")], timeout=30)
    assert (res.returncode, res.stderr) == (2, f"cepkit: error: {message}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("gen, settings", [
    ("pairs", ["pairs.rate.duration_s=2592000", "pairs.rate.basis_rate_eps=1e8"]),
    ("micro", ["micro.rate.duration_s=2592000", "micro.rate.basis_rate_eps=1e8", "micro.streams=26"]),
])
def test_a_dataset_larger_than_the_disk_is_refused_up_front(tmp_path, gen, settings):
    out = tmp_path / "sub" / "ds"
    res = _cepkit(["datagen", gen, *[a for s in settings for a in ("--set", s)], "--out", str(out)], timeout=30)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith(f"cepkit: error: {out}: the dataset needs about ")
    assert " PB (" in res.stderr and "is free on its filesystem" in res.stderr
    assert list(tmp_path.iterdir()) == []


# --- an empty path option is an error, never the default (issue 27) ---------------------------

EMPTY_PATH_CASES = [
    # (argv with {d} for the inputs' directory, the option named)
    (["datagen", "pairs", "--set", "pairs.rate.profile=constant", "--set", "pairs.rate.duration_s=0.05",
      "--out", ""], "--out"),
    (["datagen", "micro", "--set", "micro.rate.duration_s=0.05", "--out", ""], "--out"),
    (["datagen", "convert", "{d}/ticks.csv", "--kind", "ticks", "--correlations", "{d}/pairs.csv", "--out", ""],
     "--out"),
    (["querygen", "pairs", "--aux", "{d}/ds", "--out", ""], "--out"),
    (["querygen", "micro", "--suite", "filtering", "--out", ""], "--out"),
    (["querygen", "micro", "--suite", "all", "--out", ""], "--out"),
    (["querygen", "check", "{d}/st.xml", "--aux", ""], "--aux"),
    (["translate", "pairs", "--strategies", "{d}/st.xml", "--out", ""], "--out"),
    (["translate", "micro", "--spec", "filtering", "--out", ""], "--out"),
    (["translate", "micro", "--spec", "filtering", "--data", ""], "--data"),
    (["validate", "pairs", "--data", "{d}/ds", "--strategies", "{d}/st.xml", "--out", ""], "--out"),
    (["validate", "pairs", "--data", "{d}/ds", "--strategies", "{d}/st.xml", "--log", ""], "--log"),
    (["validate", "micro", "--spec", "filtering", "--data", "{d}/ds", "--out", ""], "--out"),
    # The engine commands, with a bad config that stops them before any work on any code.
    (["pairs", "--set", "pairs.file_count=0", "--out", ""], "--out"),
    (["pairs", "--set", "pairs.file_count=0", "--data", "", "--strategies", "{d}/st.xml"], "--data"),
    (["pairs", "--set", "pairs.file_count=0", "--data", "{d}/ds", "--strategies", ""], "--strategies"),
    (["pairs", "--set", "pairs.file_count=0", "--engine", "spark,flink", "--out", ""], "--out"),
    (["micro", "--set", "micro.file_count=0", "--suite", "filtering", "--out", ""], "--out"),
    (["compare", "{d}/ds", "{d}/ds", "--out", ""], "--out"),
    (["config", "show", "-c", ""], "--config"),
    (["datagen", "pairs", "--config", ""], "--config"),
    (["cluster", "status", "--dir", ""], "--dir"),
    (["cluster", "stop", "--dir", ""], "--dir"),
    (["cluster", "start", "--dir", ""], "--dir"),
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A small converted Pairs dataset and its strategies file."""
    from tests.fuzz import run_cli

    d = tmp_path_factory.mktemp("inputs")
    (d / "ticks.csv").write_text("symbol,price,size,tickTS\nAAA,100,1,0\nBBB,200,1,1\n")
    (d / "pairs.csv").write_text("symbol1,symbol2\nAAA,BBB\n")
    assert run_cli(["datagen", "convert", str(d / "ticks.csv"), "--kind", "ticks", "--correlations",
                    str(d / "pairs.csv"), "--out", str(d / "ds")])[0] == 0
    assert run_cli(["querygen", "pairs", "--aux", str(d / "ds"), "--out", str(d / "st.xml")])[0] == 0
    return d


@pytest.mark.parametrize("argv, option", EMPTY_PATH_CASES, ids=[" ".join(a[:2]) + " " + o for a, o in EMPTY_PATH_CASES])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_path_option_is_one_line_not_the_default(tmp_path, monkeypatch, converted, argv, option, value):
    # Before issue 27 an empty --out wrote into the default folders (data/, queries/, ...) and an
    # empty --aux, --data or --log was read as "not given".
    from tests.fuzz import expect_user_error

    monkeypatch.chdir(tmp_path)
    argv = [a.format(d=converted) if a else value for a in argv]
    line = expect_user_error(argv, watch=[tmp_path, converted], names=[option])
    assert line == f"cepkit: error: {option}: must name a file or directory, got an empty value " \
                   f"(leave {option} out for its default)"
    assert list(tmp_path.iterdir()) == []
