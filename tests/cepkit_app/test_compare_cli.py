"""`cepkit compare`: the command over fake run directories of two engines (built as in
tests/validator/test_compare_page.py: the shapes the pipelines write). No Spark, no JVM."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from cepkit_app.cli import main
from tests.validator.test_compare_page import micro_runs, pairs_inputs, pairs_runs  # noqa: F401 (fixtures)


def _cepkit(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cepkit_app.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_compare_prints_the_table_and_the_report_path(pairs_runs, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "cmp"
    assert main(["compare", str(pairs_runs["spark"]), str(pairs_runs["flink"]), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    doc = json.loads((out / "compare.json").read_text())
    lines = printed.out.splitlines()
    assert lines[0] == "Pairs" and "spark" in lines[1] and "flink" in lines[1]
    assert lines[1].index("spark") < lines[1].index("flink")
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in lines[3:]}
    (unit,) = doc["units"]
    for row in unit["rows"]:
        assert rows[row["label"]] == [c["text"] for c in row["cells"]]
    assert rows["peak RSS (MiB)"] == ["1,504 MiB", "704 MiB"]
    assert f"report: {out / 'compare.html'}" in printed.err
    html = (out / "compare.html").read_text(encoding="utf-8")
    assert html.count('<img src="data:image/png;base64,') == 1 and ">spark</th>" in html and ">flink</th>" in html


def test_micro_runs_get_a_table_per_workload(micro_runs, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "cmp"
    assert main(["compare", str(micro_runs["spark"]), str(micro_runs["flink"]), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert [line for line in printed.splitlines() if line and not line.startswith("|")] == ["filter-one",
                                                                                           "filter-two"]
    assert json.loads((out / "compare.json").read_text())["mode"] == "fixed-rate"


def test_default_out_is_a_new_directory_under_the_validator_dir(pairs_runs, tmp_path):  # noqa: F811
    runs = (pairs_runs["spark"], pairs_runs["flink"])
    first = _cepkit("compare", *runs, "--set", 'paths.validator_dir="reports"', cwd=tmp_path)
    second = _cepkit("compare", *runs, "--set", 'paths.validator_dir="reports"', cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["compare", "compare-2"]
    assert "report: reports/compare/compare.html" in first.stderr
    assert "report: reports/compare-2/compare.html" in second.stderr


def test_an_existing_out_is_refused_with_one_line(pairs_runs, tmp_path):  # noqa: F811
    (tmp_path / "cmp").mkdir()
    res = _cepkit("compare", pairs_runs["spark"], pairs_runs["flink"], "--out", tmp_path / "cmp", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"cepkit: error: {tmp_path / 'cmp'}: output directory already exists")
    assert res.stdout == "" and list((tmp_path / "cmp").iterdir()) == []


def test_a_missing_run_json_names_the_file(pairs_runs, tmp_path):  # noqa: F811
    broken = shutil.copytree(pairs_runs["flink"], tmp_path / "broken")
    (broken / "engine" / "run.json").unlink()
    res = _cepkit("compare", pairs_runs["spark"], broken, "--out", tmp_path / "cmp", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert f"{broken / 'engine' / 'run.json'}: not found" in res.stderr
    assert not (tmp_path / "cmp").exists()


def test_mixed_kinds_are_refused(pairs_runs, micro_runs, tmp_path):  # noqa: F811
    res = _cepkit("compare", micro_runs["spark"], pairs_runs["flink"], "--out", tmp_path / "cmp", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith(f"cepkit: error: {pairs_runs['flink']}: a Pairs run, but {micro_runs['spark']} is a "
                                 f"microbenchmark suite run at fixed rate; compare runs of one kind")
    assert not (tmp_path / "cmp").exists()


def test_a_directory_that_is_no_run_is_refused(pairs_runs, tmp_path):  # noqa: F811
    (tmp_path / "empty").mkdir()
    res = _cepkit("compare", pairs_runs["spark"], tmp_path / "empty", "--out", tmp_path / "cmp", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert f"{tmp_path / 'empty'}: not a cepkit run directory" in res.stderr
