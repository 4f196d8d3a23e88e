"""An engine cepkit cannot run, validated from the output log it wrote itself.

examples/external_engine/filter_engine.py plays someone else's engine: it answers the first
workload of the quick filtering suite (Q1, `ID le 5`) from the dataset's files, or pulled from the
harness's driver over TCP, and writes an output log as specs/OUTPUT_LOG.md ("Writing an output log
from your own engine") says. These tests follow its README: `cepkit datagen micro` with the
README's options, the program as a subprocess of this interpreter, `cepkit validate micro`; then
the log is spoiled to show that a wrong answer fails (exit 1) and a malformed log is a bad input
(exit 2, one line naming the file). No Spark, no JVM: the three engine runs play the 5-second
dataset in parallel, about ten seconds in all.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kit.config import load_config, with_settings
from kit.manifest import load_manifest
from kit.shipped import suite_path
from kit.workload import read_suite
from tests.fuzz import expect_user_error, run_cli
from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "external_engine"
PROGRAM = EXAMPLE / "filter_engine.py"
SPEC, WORKLOAD = "filtering-quick", "filtering-selectivity-5pct"
# The README's commands, as argument lists.
DATAGEN = ["datagen", "micro", "--seed", "7", "--streams", "1", "--attributes", "5", "--max-id", "100",
           "--profile", "constant", "--set", "micro.rate.basis_rate_eps=1000", "--set", "micro.rate.duration_s=5"]
QUERY = ["--query-id", "q1", "--select", "ID,A1,A2,A3,A4,A5", "--where", "ID le 5"]
RUNS = ("files-parquet", "files-csv", "feed")


def validate(data: Path, log: Path, out: Path, *more: str) -> list[str]:
    return ["validate", "micro", "--spec", SPEC, "--workload", WORKLOAD, "--data", str(data), "--log", str(log),
            "--out", str(out), *more]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The README's dataset and the example engine's output logs: from the files (Parquet; CSV in
    files of 100 rows) and from the harness's driver. The runs are paced by the dataset's times,
    so they run side by side."""
    root = tmp_path_factory.mktemp("external")
    code, out, err = run_cli([*DATAGEN, "--out", str(root / "data")])
    assert code == 0, err
    data = root / "data"
    engine = [sys.executable, str(PROGRAM)]
    procs, driver = {}, None
    try:
        procs["files-parquet"] = subprocess.Popen([*engine, "--data", str(data), "--out", str(root / "files-parquet"),
                                                   *QUERY], cwd=root, stdout=subprocess.PIPE,
                                                  stderr=subprocess.PIPE, text=True)
        procs["files-csv"] = subprocess.Popen([*engine, "--data", str(data), "--out", str(root / "files-csv"),
                                               "--format", "csv", "--rows-per-file", "100", "--batch-ms", "20",
                                               *QUERY], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True)
        # The driver waits for the engine's `begin` (--hold) and exits once everything was pulled.
        # Both have the secret in their environment: the engine presents it first (specs/DRIVER.md).
        env = {**os.environ, "CEPKIT_SECRET": "the-example-runs-secret"}
        driver = subprocess.Popen([sys.executable, "-m", "harness.driver", "--dataset", str(data), "--hold",
                                   "--exit-when-drained", "--align-ms", "1000", "--lead-ms", "300"],
                                  cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        ready = json.loads(driver.stdout.readline())
        assert ready["event"] == "ready", ready
        procs["feed"] = subprocess.Popen([*engine, "--feed", f"127.0.0.1:{ready['port']}", "--out",
                                          str(root / "feed"), *QUERY], cwd=root, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, env=env)
        for name, p in procs.items():
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, f"{name}: {err}"
            assert out.strip() == str(root / name)
        out, err = driver.communicate(timeout=30)
        assert driver.returncode == 0, err
        stats = json.loads(out.splitlines()[-1])["stats"]
        assert stats["pulled"] == ready["total_events"] and stats["refused_connections"] == 0
    finally:
        for p in (*procs.values(), driver):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    return {"root": root, "data": data, **{name: root / name for name in RUNS}}


def test_the_example_imports_nothing_of_cepkit():
    """It must stand for an engine that knows cepkit only from its written specs."""
    tree = ast.parse(PROGRAM.read_text(), filename=str(PROGRAM))
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} \
        | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    tops = {m.split(".")[0] for m in modules}
    assert tops - sys.stdlib_module_names <= {"pandas", "pyarrow"}, tops
    # Not a package: nothing collects, installs or imports it as one (setup.cfg lists the packages).
    assert not (EXAMPLE / "__init__.py").exists() and not (EXAMPLE.parent / "__init__.py").exists()


def test_the_readme_commands_give_the_workloads_dataset(runs, tmp_path):
    """`cepkit datagen micro` with the README's options writes the very files `cepkit micro`
    generates for the workload (its Dataset and Load in the config)."""
    from datagen.micro import generate_micro

    workload = read_suite(suite_path("filtering", quick=True)).workload(WORKLOAD)
    generate_micro(with_settings(load_config(), workload.micro_settings()).micro, tmp_path / "ours")
    def digest(directory: Path) -> list[tuple[str, str]]:
        return [(f.name, f.sha256) for f in load_manifest(directory).data_files()]

    assert digest(runs["data"]) == digest(tmp_path / "ours")
    readme = " ".join((EXAMPLE / "README.md").read_text().replace("\\\n", " ").split())
    assert " ".join(["cepkit", *DATAGEN]) in readme and " ".join(QUERY[:-1]) in readme


@pytest.mark.parametrize("run", RUNS)
def test_the_engines_log_passes(runs, tmp_path, run):
    code, out, err = run_cli(validate(runs["data"], runs[run], tmp_path / "v"))
    assert code == 0, out + err
    assert "verdict: PASSED" in err
    report = json.loads((tmp_path / "v" / "validation.json").read_text())
    (q1,) = report["queries"]
    assert report["verdict"] == "PASSED" and q1["correct"] == q1["expected"] > 100
    # Honest stamps: no row arrived before its event was due, none later than a few batches.
    assert report["latency"]["negatives"] == 0 and report["latency"]["max_ms"] < 2000
    assert (tmp_path / "v" / "report.txt").read_text().startswith("Validation result: PASSED")
    log = json.loads((runs[run] / "output-log.json").read_text())
    if run == "files-csv":
        assert log["format"] == "csv" and len(log["streams"]["q1"]["files"]) > 1


def test_a_dropped_row_fails(runs, tmp_path):
    log = tmp_path / "log"
    shutil.copytree(runs["files-parquet"], log)
    part = log / "q1-00001.parquet"
    table = pq.read_table(part)
    pq.write_table(pa.concat_tables([table.slice(0, 10), table.slice(11)]), part)
    code, out, err = run_cli(validate(runs["data"], log, tmp_path / "v"))
    assert code == 1, out + err
    assert "verdict: FAILED" in err
    (q1,) = json.loads((tmp_path / "v" / "validation.json").read_text())["queries"]
    assert (q1["missing"], q1["undue"], q1["wrong"]) == (1, 0, 0)


def test_a_changed_value_fails(runs, tmp_path):
    log = tmp_path / "log"
    shutil.copytree(runs["files-csv"], log)
    part = log / "q1-00002.csv"
    df = pd.read_csv(part)
    df.loc[3, "A2"] += 0.5
    df.to_csv(part, index=False)
    code, out, err = run_cli(validate(runs["data"], log, tmp_path / "v"))
    assert code == 1, out + err
    (q1,) = json.loads((tmp_path / "v" / "validation.json").read_text())["queries"]
    assert (q1["missing"], q1["undue"], q1["wrong"]) == (0, 0, 1)
    assert q1["mismatches_by_field"] == {"A2": 1}


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_missing_column_is_a_bad_input(runs, tmp_path, fmt):
    log = tmp_path / "log"
    shutil.copytree(runs["files-parquet" if fmt == "parquet" else "files-csv"], log)
    part = log / f"q1-00001.{fmt}"
    if fmt == "parquet":
        pq.write_table(pq.read_table(part).drop_columns(["A3"]), part)
    else:
        pd.read_csv(part).drop(columns=["A3"]).to_csv(part, index=False)
    line = expect_user_error(validate(runs["data"], log, tmp_path / "v"), watch=[tmp_path, runs["data"]],
                             names=[str(part), "A3"])
    assert "missing column" in line
    assert not (tmp_path / "v").exists()


def test_clocks_that_do_not_fit_the_dataset_are_a_bad_input(runs, tmp_path):
    log = tmp_path / "log"
    shutil.copytree(runs["files-parquet"], log)
    meta = json.loads((log / "output-log.json").read_text())
    (log / "output-log.json").write_text(json.dumps({**meta, "sim_start_ms": meta["sim_start_ms"] + 1}))
    expect_user_error(validate(runs["data"], log, tmp_path / "v"), watch=[tmp_path],
                      names=[f"{log / 'output-log.json'}:sim_start_ms", str(runs["data"] / "manifest.json")])
    (log / "output-log.json").write_text(json.dumps({**meta, "speed": 2.0}))
    line = expect_user_error(validate(runs["data"], log, tmp_path / "v"), watch=[tmp_path], names=[str(log)])
    assert "speed 2" in line
    (log / "output-log.json").unlink()
    expect_user_error(validate(runs["data"], log, tmp_path / "v"), watch=[tmp_path],
                      names=[str(log / "output-log.json")])


def test_which_workload(runs, tmp_path):
    """A suite of several workloads needs --workload; an unknown one is named."""
    argv = validate(runs["data"], runs["files-parquet"], tmp_path / "v")
    i = argv.index("--workload")
    line = expect_user_error(argv[:i] + argv[i + 2:], watch=[tmp_path], names=[str(suite_path("filtering", True))])
    assert WORKLOAD in line
    argv[i + 1] = "no-such-workload"
    expect_user_error(argv, watch=[tmp_path], names=["no-such-workload"])


def test_without_a_log_the_expected_answers(runs, tmp_path):
    code, out, err = run_cli(["validate", "micro", "--spec", SPEC, "--workload", WORKLOAD,
                              "--data", str(runs["data"]), "--out", str(tmp_path / "v")])
    assert code == 0, err
    expected = pd.read_parquet(tmp_path / "v" / "expected" / "q1.parquet")
    engine = pd.read_parquet(runs["files-parquet"] / "q1-00001.parquet")
    assert len(expected) == len(engine) and list(expected.columns) == ["ID", "A1", "A2", "A3", "A4", "A5", "inputTS"]
    assert json.loads((tmp_path / "v" / "validation.json").read_text())["verdict"] == "NOT VALIDATED"


def test_another_workload_fails_the_log(runs, tmp_path):
    """The 50 % workload has the same Dataset and Load (no note) but other answers."""
    code, out, err = run_cli(["validate", "micro", "--spec", SPEC, "--workload", "filtering-selectivity-50pct",
                              "--data", str(runs["data"]), "--log", str(runs["files-parquet"]),
                              "--out", str(tmp_path / "v")])
    assert code == 1 and "note:" not in err


def test_a_dataset_unlike_the_workload_is_noted(tmp_path):
    """Validation holds for the dataset given; a note says it is not the workload's load point.
    Without --out the report goes to a new directory under paths.validator_dir."""
    assert run_cli([*DATAGEN[:-1], "micro.rate.duration_s=1", "--out", str(tmp_path / "data")])[0] == 0
    reports = tmp_path / "reports"
    code, out, err = run_cli(["validate", "micro", "--spec", SPEC, "--workload", WORKLOAD, "--data",
                              str(tmp_path / "data"), "--set", f"paths.validator_dir={json.dumps(str(reports))}"])
    assert code == 0, err
    assert f"note: {tmp_path / 'data' / 'manifest.json'}: config micro.rate.duration_s = 1.0, but workload " \
           f"{WORKLOAD} has 5.0" in err
    (report,) = reports.iterdir()
    assert json.loads((report / "validation.json").read_text())["notes"]


def test_a_dataset_without_the_workloads_attributes_is_a_bad_input(tmp_path):
    """Fewer attributes than the workload reads: one line naming the manifest's key, nothing written."""
    data = tmp_path / "data"
    assert run_cli([*[a if a != "5" else "2" for a in DATAGEN], "--out", str(data)])[0] == 0
    line = expect_user_error(["validate", "micro", "--spec", SPEC, "--workload", WORKLOAD, "--data", str(data),
                              "--out", str(tmp_path / "v")], watch=[tmp_path], names=[str(data / "manifest.json")])
    assert "config.attributes: 2, but workload filtering-selectivity-5pct reads 5" in line
