"""Helpers shared by tests: building Pairs configs, reading generated ticks back, hand-made micro
datasets for the driver tests, and the inputs of the `validate pairs` fuzz tests."""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import psutil
import pyarrow.parquet as pq
from hypothesis import strategies as st

import pytest

from kit.config import PairsConfig
from kit.engines import ENGINES
from kit.records import INDICATOR, MARKET_ORDER

# Runs start soon (lead_ms) and need no minute alignment unless a test is about alignment.
FAST = dict(lead_ms=50, align_ms=1)

# The Pairs output streams and their records, as `validate pairs` checks them.
SCHEMAS = {"Indicator": INDICATOR, "MarketOrder": MARKET_ORDER}
# Any JSON value: what the fuzz tests put where a manifest or output-log.json expects a key's value.
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**64), st.floats(), st.text(max_size=12),
                 st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))

# The repository's root (tests read the written specs and the packages' sources there).
REPO = Path(__file__).resolve().parent.parent
# tests/: its data/ (inputs of the tests) and spark_programs/ (hand-written engine programs).
TESTS_DIR = REPO / "tests"
# The tests' short Pairs run: quick SF=1 replayed at 4x real time (~30 s of load).
SHORT_PAIRS = TESTS_DIR / "data" / "configs" / "short-pairs.toml"


# The engine whose runs the default test run may start (the smoke runs); every other engine's marker is
# run on request (tests/conftest.py ON_REQUEST).
DEFAULT_RUN_ENGINE = "spark"


def engine_params(*names: str, default_run: str | None = "e2e") -> list:
    """One pytest param per engine of the registry (or of `names`), marked with the engine's own
    marker (`spark`, `flink`: pyproject.toml), so `-m flink` selects a Flink run of any test. The
    default engine's run also carries `default_run`: `e2e` (on request: `-m e2e`), `smoke` (the few
    runs of the default test run), or None for a test already on request by another marker (slow)."""
    def marks(name):
        extra = [getattr(pytest.mark, default_run)] if name == DEFAULT_RUN_ENGINE and default_run else []
        return [getattr(pytest.mark, name), *extra]
    return [pytest.param(name, id=name, marks=marks(name)) for name in (names or sorted(ENGINES))]


def with_class_archive(builder):
    """A SparkSession builder that maps the JVM class archive scripts/setup.sh builds
    (harness/jvm_archive.py), as the harness's engine runs do: a test's own session starts faster."""
    from harness.jvm_archive import driver_java_options

    for key, value in driver_java_options(())[0]:
        builder = builder.config(key, value)
    return builder


def program_literals(path: Path) -> dict:
    """The top-level `NAME = literal` assignments of a generated program, read without importing
    it (a program imports its engine, which may live in another environment: Flink's)."""
    import ast

    out = {}
    for node in ast.parse(Path(path).read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def read_ticks(directory: Path) -> dict[str, np.ndarray]:
    """All ticks of a dataset in file order, as numpy columns (symbol as str)."""
    files = sorted(Path(directory).glob("ticks-*.parquet"))
    tables = [pq.read_table(f) for f in files]
    out = {}
    for col in ("price", "size", "tickTS"):
        out[col] = np.concatenate([t.column(col).to_numpy() for t in tables])
    out["symbol"] = np.concatenate([np.asarray(t.column("symbol").cast("string").to_numpy(zero_copy_only=False))
                                    for t in tables])
    return out


def pairs_config(**changes) -> PairsConfig:
    rate = changes.pop("rate", {})
    prices = changes.pop("prices", {})
    base = PairsConfig()
    return dataclasses.replace(base, rate=dataclasses.replace(base.rate, **rate),
                               prices=dataclasses.replace(base.prices, **prices), **changes)


def write_micro(directory: Path, streams: dict[str, list[int]], fmt: str = "parquet",
                start_epoch_ms: int = 1_000_000) -> Path:
    """A hand-made micro dataset in the documented layout: stream -> list of TS (ID = row number)."""
    directory.mkdir(parents=True)
    entries = []
    for name, ts in streams.items():
        table = pa.table({"ID": pa.array(range(1, len(ts) + 1), pa.int32()),
                          "A1": pa.array([float(i) for i in range(len(ts))], pa.float64()),
                          "TS": pa.array(ts, pa.int64())})
        path = f"{name}-00001-of-00001.{fmt}"
        if fmt == "parquet":
            pq.write_table(table, directory / path)
        else:
            pacsv.write_csv(table, directory / path)
        entries.append({"name": name, "columns": ["ID", "A1", "TS"], "rows": len(ts),
                        "files": [{"path": path, "rows": len(ts)}]})
    manifest = {"kind": "cepkit.datagen-manifest", "schema_version": 1, "generator": "test", "format": fmt,
                "start_epoch_ms": start_epoch_ms, "streams": entries,
                "files": [{"stream": e["name"], **f} for e in entries for f in e["files"]]}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


def fresh_dir(tmp_path: Path) -> Path:
    """A new directory under tmp_path: every hypothesis example of a test shares its tmp_path."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def validate_pairs_argv(data: Path, strategies: Path, out: Path, *extra: str) -> list[str]:
    """The arguments of `cepkit validate pairs` for a dataset, its strategies and a report directory."""
    return ["validate", "pairs", "--data", str(data), "--strategies", str(strategies), "--out", str(out), *extra]


# A run's secret is random (specs/DRIVER.md, "Who may connect"); a `cepkit` started with `secret`
# fixes it (harness.engine_run.new_secret), so that a test can look for it in what the run wrote.
_FIXED_SECRET = ("import sys, harness.engine_run as run; run.new_secret = lambda: {!r}; "
                 "from cepkit_app.cli import main; sys.exit(main(sys.argv[1:]))")


def program_event(stdout: str, event: str) -> dict:
    """The one `event` line an engine program printed (its stdout: JSON objects, one a line), as a
    by-hand launch's script leaves it (the harness did not read that program's output)."""
    (found,) = [e for e in map(json.loads, (ln for ln in stdout.splitlines() if ln.startswith("{")))
                if e.get("event") == event]
    return found


def cepkit_command(secret: str | None = None) -> list[str]:
    """`python -m cepkit_app.cli`, with every engine run's secret fixed to `secret` if given."""
    return [sys.executable, *(["-c", _FIXED_SECRET.format(secret)] if secret else ["-m", "cepkit_app.cli"])]


def check_secret_kept(engine_dir: Path, secret: str, *more: Path) -> None:
    """After a harness-launched engine run (`engine_dir`, its run directory): the run's secret is
    in no file under `more` (the pipeline's run directory: run.json, output-log.json, the logs, the
    by-hand script, the checkpoint; an engine's own logs), the by-hand script reads it from the
    environment instead, no connection was refused and no secret file is left."""
    run = json.loads((engine_dir / "run.json").read_text())
    assert run["refused_connections"] == {"feed": 0, "sink": 0}
    assert not (engine_dir / "secret").exists()
    (script,) = engine_dir.glob("*.sh")
    assert "CEPKIT_SECRET" in script.read_text()
    files = [p for d in more for p in d.rglob("*") if p.is_file()]
    assert len(files) > 20
    for path in files:
        assert secret.encode() not in path.read_bytes(), path


def started(run_dir: Path, times: int = 1, timeout_s: float = 300) -> None:
    """Until the engine program of the harness run `run_dir` has said `started` `times` times (its
    stdout events, engine/logs: one per attempt)."""
    events = run_dir / "engine" / "logs" / "engine.stdout.jsonl"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if events.is_file() and events.read_text().count('"event": "started"') >= times:
            return
        time.sleep(0.5)
    raise AssertionError(f"the engine program did not start {times} time(s) in {timeout_s:.0f} s")


def java_below(pid: int) -> psutil.Process:
    """The one JVM among `pid`'s descendants (the engine's: Spark's driver, PyFlink's gateway)."""
    jvms = [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "java"]
    assert len(jvms) == 1, [" ".join(p.cmdline())[:120] for p in jvms]
    return jvms[0]
