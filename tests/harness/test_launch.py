"""How the harness starts a program and the spark-submit line it writes (harness/launch.py)."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from harness.config import DriverConfig
from harness.launch import (checkpoint_location, engine_conf, program_args, runtime_zip, secret_file, secret_lines,
                            spark_submit_command, submit_script, write_secret_file)
from harness.run_spec import EngineRunSpec
from kit.errors import CepkitError
from kit.faults import parse_faults


def _spec(tmp_path: Path, **changes) -> EngineRunSpec:
    program = tmp_path / "program.py"
    program.write_text("")
    changes.setdefault("driver", DriverConfig(tmp_path))
    return EngineRunSpec(program=program, run_dir=tmp_path / "run" / "engine", **changes)


def test_checkpoint_in_the_run_or_under_a_url(tmp_path):
    spec = _spec(tmp_path)
    assert checkpoint_location(spec, spec.run_dir) == str(spec.run_dir / "checkpoint")
    shared = _spec(tmp_path, checkpoint_url="file:///shared/ckpt/")
    first, second = (checkpoint_location(shared, shared.run_dir) for _ in range(2))
    assert first.startswith("file:///shared/ckpt/run-engine-") and first != second     # one per run


def test_paths_handed_to_the_program_are_absolute(tmp_path, monkeypatch):
    """The program runs in its run directory: a relative run directory (the default runs/...) must
    not become a path under itself."""
    monkeypatch.chdir(tmp_path)
    Path("p").mkdir()
    Path("p/program.py").write_text("")
    spec = EngineRunSpec(program=Path("p/program.py"), run_dir=Path("p/engine"), driver=DriverConfig(tmp_path),
                         runtime_packages=("kit",))
    checkpoint, zip_path = checkpoint_location(spec, spec.run_dir), runtime_zip(spec)
    assert checkpoint == str(tmp_path / "p" / "engine" / "checkpoint")
    assert zip_path == tmp_path / "p" / "runtime.zip" and zip_path.is_file()


def test_a_cluster_run_tells_the_driver_where_to_listen_unless_the_user_did(tmp_path):
    local = _spec(tmp_path, spark_conf=(("spark.driver.memory", "4g"),))
    assert engine_conf(local) == (("spark.driver.memory", "4g"),)
    cluster = _spec(tmp_path, master="spark://10.0.0.5:7077", driver=DriverConfig(tmp_path, host="0.0.0.0"),
                    advertised_host="bench-host", spark_conf=(("spark.driver.bindAddress", "10.0.0.9"),))
    assert dict(engine_conf(cluster)) == {"spark.driver.host": "bench-host", "spark.driver.bindAddress": "10.0.0.9"}
    assert _spec(tmp_path, driver=DriverConfig(tmp_path, host="0.0.0.0")).advertised not in ("0.0.0.0", "")


def test_the_submit_line_holds_the_programs_arguments_and_ships_the_runtime(tmp_path):
    spec = _spec(tmp_path, master="spark://127.0.0.1:7077", faults=parse_faults(["kill-executor@5s"]))
    args = program_args(spec, 4001, 4002, "/ck", tmp_path / "runtime.zip")
    cmd = spark_submit_command(spec, args, engine_conf(spec))
    assert cmd[1:3] == ["--master", "spark://127.0.0.1:7077"]
    assert cmd[cmd.index("--py-files") + 1] == str(tmp_path / "runtime.zip")
    tail = cmd[cmd.index(str(spec.program.resolve())) + 1:]
    assert tail == args and "127.0.0.1:4001" in tail and "127.0.0.1:4002" in tail
    script = submit_script(cmd, {"PYSPARK_PYTHON": "/venv/python", "PYTHONPATH": "/a/checkout"}, secret_file(spec))
    assert script.startswith("#!/bin/sh") and "export PYSPARK_PYTHON=/venv/python" in script
    assert "PYTHONPATH" not in script and "  --master spark://127.0.0.1:7077 \\\n" in script


def _secret_seen(lines: list[str], env: dict[str, str]) -> str:
    """What a by-hand script's secret lines hand on as CEPKIT_SECRET, run by /bin/sh."""
    script = "\n".join(["set -e", *lines, 'printf "%s" "${CEPKIT_SECRET:-<none>}"'])
    proc = subprocess.run(["/bin/sh", "-c", script], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                          text=True, check=True)
    return proc.stdout


def test_a_by_hand_script_takes_the_secret_from_the_environment_or_the_external_launchs_file(tmp_path):
    """The script never holds the secret: it keeps CEPKIT_SECRET when the caller has it, else reads
    the 0600 file an external launch writes, else runs without one (a feed started without a
    secret)."""
    spec = _spec(tmp_path)
    spec.run_dir.mkdir(parents=True)
    path = secret_file(spec)
    assert path == spec.run_dir.absolute() / "secret"
    lines = secret_lines(path)
    assert _secret_seen(lines, {}) == "<none>"
    write_secret_file(path, "s3cr3t-of-the-run")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _secret_seen(lines, {}) == "s3cr3t-of-the-run"
    assert _secret_seen(lines, {"CEPKIT_SECRET": "from-the-caller"}) == "from-the-caller"
    with pytest.raises(FileExistsError):        # never over an existing file
        write_secret_file(path, "another")
    script = submit_script(["spark-submit", "program.py"], {"CEPKIT_SECRET": "leaked?"}, path)
    assert "s3cr3t-of-the-run" not in script and "leaked?" not in script and "\n".join(lines) in script


def test_the_batch_cap_reaches_a_micro_batch_program_from_the_config(tmp_path):
    """run.max_rows_per_batch (default 2 M) becomes the program's --max-rows-per-batch; 0 is no cap,
    and a real-time run (no micro-batches) gets none; a negative cap is one line naming the key."""
    from cepkit_app.pipelines.engine import engine_run_spec
    from kit.config import load_config

    def args(**changes):
        return program_args(_spec(tmp_path, **changes), 1, 2, "ck", None)

    cfg = load_config(None)
    assert cfg.run.max_rows_per_batch == 2_000_000
    spec = engine_run_spec(cfg, tmp_path / "program.py", tmp_path / "run", DriverConfig(tmp_path), None, None)
    assert spec.max_rows_per_batch == 2_000_000 and spec.to_dict()["max_rows_per_batch"] == 2_000_000
    got = args(max_rows_per_batch=2_000_000)
    assert got[got.index("--max-rows-per-batch") + 1] == "2000000"
    assert "--max-rows-per-batch" not in args(max_rows_per_batch=0)
    assert "--max-rows-per-batch" not in args(max_rows_per_batch=5, trigger="realtime")
    with pytest.raises(CepkitError, match="max_rows_per_batch"):
        _spec(tmp_path, max_rows_per_batch=-1)
    with pytest.raises(CepkitError, match=r"run\.max_rows_per_batch"):
        load_config(None, ["run.max_rows_per_batch=-5"])
