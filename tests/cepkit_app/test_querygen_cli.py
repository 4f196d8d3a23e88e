"""`cepkit querygen`: writes strategies and suites, never over an existing file, with a summary table."""

from __future__ import annotations

import dataclasses

import pytest

from datagen.pairs import make_plan, pairs_aux
from cepkit_app.cli import main
from kit.config import PairsConfig
from kit.shipped import specs_dir
from kit.workload import load_aux, read_strategies, read_suite
from kit.workload.aux import write_aux


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Let the summary table's cells fit on one line so the tests can read them."""
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def dataset(tmp_path):
    """A dataset directory holding only the auxiliary file of SF=15 (no ticks needed)."""
    d = tmp_path / "ds"
    d.mkdir()
    write_aux(d, pairs_aux(make_plan(PairsConfig(scale_factor=15, seed=9))))
    return d


def test_pairs_writes_the_strategies_and_a_summary(dataset, tmp_path, capsys):
    out = tmp_path / "strategies.xml"
    assert main(["querygen", "pairs", "--aux", str(dataset / "pairs-aux.json"), "--seed", "5", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [str(out)]
    assert "375 strategies" in captured.err and "SF 15, seed 5, 75 users, per market: 250 + 125" in captured.err
    spec = read_strategies(out, aux=load_aux(dataset))
    assert (len(spec), spec.seed, spec.scale_factor) == (375, 5, 15)


def test_default_output_is_fresh_and_seeded_by_the_dataset(dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["querygen", "pairs", "--aux", str(dataset)]
    assert main(args) == 0 and main(args) == 0
    outs = capsys.readouterr().out.splitlines()
    assert outs == ["queries/strategies-sf15-seed9.xml", "queries/strategies-sf15-seed9-2.xml"]
    assert (tmp_path / outs[0]).read_bytes() == (tmp_path / outs[1]).read_bytes()
    assert main([*args, "--set", "paths.querygen_dir=elsewhere", "--seed", "1"]) == 0
    assert capsys.readouterr().out.strip() == "elsewhere/strategies-sf15-seed1.xml"


def test_an_explicit_output_is_never_overwritten(dataset, tmp_path, capsys):
    out = tmp_path / "taken.xml"
    out.write_text("mine")
    assert main(["querygen", "pairs", "--aux", str(dataset), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"cepkit: error: {out}: file already exists; refusing to overwrite it\n"
    assert out.read_text() == "mine"
    assert main(["querygen", "micro", "--suite", "joins", "--out", str(out)]) == 2
    assert out.read_text() == "mine"


def test_micro_writes_a_suite_equal_to_the_committed_one(tmp_path, capsys):
    out = tmp_path / "f.xml"
    assert main(["querygen", "micro", "--suite", "filtering", "--quick", "--out", str(out)]) == 0
    assert out.read_bytes() == (specs_dir() / "suites" / "filtering-quick.xml").read_bytes()
    err = capsys.readouterr().err
    assert "suite filtering (quick)" in err and "4 workloads, 4 queries" in err


def test_micro_all_quick_under_the_querygen_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["querygen", "micro", "--suite", "all", "--quick"]) == 0
    outs = capsys.readouterr().out.splitlines()
    assert outs == [f"queries/{n}-quick.xml" for n in ("filtering", "count-windows", "time-windows", "joins",
                                                        "patterns", "adaptivity", "scalability", "ceiling")]
    assert read_suite(tmp_path / "queries" / "scalability-quick.xml").query_count == 2 * (1 + 4 + 16 + 64)
    assert main(["querygen", "micro", "--suite", "all", "--out", "queries"]) == 2
    assert "queries: already exists" in capsys.readouterr().err


def test_check_summarises_valid_files(capsys):
    files = [str(specs_dir() / "suites" / "patterns.xml"), str(specs_dir() / "suites" / "scalability-quick.xml")]
    assert main(["querygen", "check", *files]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == files
    assert "19 workloads, 19 queries" in captured.err
    assert "interval, cardinality, selectivity, consumption" in captured.err


def test_unknown_suite(capsys):
    assert main(["querygen", "micro", "--suite", "windows"]) == 2
    assert capsys.readouterr().err == ("cepkit: error: --suite windows: unknown suite (valid: filtering, "
                                       "count-windows, time-windows, joins, patterns, adaptivity, scalability, ceiling, all)\n")


def test_a_converted_dataset_without_seed_uses_the_config_seed(tmp_path, monkeypatch, capsys):
    # `cepkit datagen convert` writes pairs-aux.json with "seed": null (specs/datagen-micro.md)
    write_aux(tmp_path, dataclasses.replace(pairs_aux(make_plan(PairsConfig(scale_factor=2))), seed=None))
    monkeypatch.chdir(tmp_path)
    assert main(["querygen", "pairs", "--aux", "pairs-aux.json", "--set", "pairs.seed=17"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == "queries/strategies-sf2-seed17.xml"
    assert len(read_strategies(out, aux=load_aux("pairs-aux.json"))) == 50
