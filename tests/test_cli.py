"""The cepkit command line: help without a JVM, data generation, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

from kit.cli import main


def test_help_needs_no_spark():
    code = ("import sys; from kit.cli import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'numpy', 'pyarrow')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    res = subprocess.run([sys.executable, "-m", "kit.cli", "--help"], capture_output=True, text=True)
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
    res = subprocess.run([sys.executable, "-m", "kit.cli", "datagen", "pairs", "-c", str(bad),
                          "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr == f"cepkit: error: {bad}:pairs.file_count: must be > 0, got 0\n"
    assert not (tmp_path / "x").exists()
    res = subprocess.run([sys.executable, "-m", "kit.cli", "-v", "datagen", "pairs", "-c", str(bad)],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "Traceback" in res.stderr


def test_config_show_and_keys(capsys):
    assert main(["config", "show", "--set", "pairs.scale_factor=7"]) == 0
    assert "scale_factor = 7" in capsys.readouterr().out
    assert main(["config", "keys"]) == 0
    assert "pairs.rate.profile" in capsys.readouterr().out.split()
