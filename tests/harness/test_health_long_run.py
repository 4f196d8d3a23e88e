"""A long run in events, short in wall time: the real harness (run_engine: driver process, sink,
monitor, resource and health samplers) replays 4 million events as fast as a light engine program
pulls them (tests/harness/pull_echo_program.py: no JVM; it echoes every event to the sink in ~20,000
batches of 200 rows and keeps a Spark-like checkpoint), under the tests' memory cap. Then
metrics/health.csv must have rows throughout the run, the harness process (which hosts the sink)
must not grow with the outputs it received, nor the driver with the events it served, and the
validator's growth table must read the file.

About 5-25 s on the 2-core machine (the replay goes as fast as the machine), so it runs alone
(`alone`: it measures memory and a busy neighbour would slow its replay), in CI's e2e stage: the
default run, which holds every other test back while an `alone` test runs, had come within 6 s
of its 10 minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from datagen.micro import generate_micro
from harness import health
from harness.config import DriverConfig
from harness.engine_run import EngineRunSpec, run_engine
from kit.config import MicroConfig, RateConfig
from tests.helpers import REPO
from validator.health import BY_DESIGN, HEALTH_COLUMNS, OK, health_growth, read_health, table_rows

pytestmark = [pytest.mark.alone, pytest.mark.e2e, pytest.mark.usefixtures("memory_cap")]

PROGRAM = Path(__file__).parent / "pull_echo_program.py"
EVENTS = 4_000_000
# Samples every 0.1 s: the replay's length is the machine's (pull pacing), 4.5 s on a fast day (CI
# saw it), ~25 s on a slow one, and the fit needs its samples either way.
INTERVAL_S = 0.1
MIB = 2**20
# The sink receives ~3 million rows after the warm-up: 52 bytes each as Arrow (ID, A1, inputTS,
# offset, ingestTS and the stamps arrivalTS, batchId), ~150 MiB. A sink that kept what it wrote, or
# anything of 11 bytes or more per output row, would pass this bound; the run's own figure is a few
# MiB either way (allocator pools, the Parquet writer's buffers, at most 65,536 buffered rows).
HARNESS_GROWTH_BOUND = 32 * MIB
# The driver retains at most `retain_bytes` (32 MiB here) of served events past the program's
# commits; one that kept every event would grow by ~130 MiB (44 bytes an event held) after the warm-up.
DRIVER_GROWTH_BOUND = 32 * MIB


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("long") / "events"
    generate_micro(MicroConfig(streams=1, attributes=1, file_count=4,
                               rate=RateConfig(profile="constant", basis_rate_eps=EVENTS / 40.0, duration_s=40.0)), out)
    return out


def fitted_growth(report, column: str) -> float:
    """The growth over the fitted window (bytes): the least-squares slope times the window."""
    g = next(g for g in report.series if g.series.column == column)
    return g.growth_per_h * report.fit_span_s / 3600.0


def test_a_long_replay_keeps_the_harness_and_the_driver_flat(events, tmp_path, monkeypatch):
    monkeypatch.setattr(health, "HEALTH_INTERVAL_S", INTERVAL_S)
    run = tmp_path / "run"
    driver = DriverConfig(events, pacing="pull", stamp="send", lead_ms=50, align_ms=1, retain_bytes=32 * MIB)
    result = run_engine(EngineRunSpec(program=PROGRAM, run_dir=run, driver=driver, master="local[1]",
                                      jvm_class_archive=False, quiet_local_fs=False,
                                      env=(("PYTHONPATH", str(REPO)),)))
    assert result.status == "completed", result.message
    record = json.loads((run / "run.json").read_text())
    finished = record["engine"]["finished"]
    total = record["events"]["total"]
    assert total > 3_900_000 and finished["output_rows"] == total == result.outputs["Echo"]
    assert finished["emits"] > 19_000                          # a long run's worth of sink batches

    df = read_health(run / "metrics" / "health.csv")
    assert list(df.columns) == list(HEALTH_COLUMNS) and record["health"]["rows"] == len(df)
    # Rows throughout: from the run's begin to its end, none missing for long.
    ts = df["ts_ms"].to_numpy()
    begin, ended = record["clocks"]["run_start_wall_ms"], record["timings"]["ended_ms"]
    assert abs(ts[0] - begin) < 1000 and 0 <= ended - ts[-1] < 1000
    assert len(df) >= 0.8 * (ended - begin) / 1000 / INTERVAL_S and np.diff(ts).max() < 1000
    assert df[["harness_rss_bytes", "driver_rss_bytes"]].notna().all().all()
    # The engine's figures come from the resource sampler, whose first reading is a second after
    # the program started: this program starts in a moment, so the first rows may lack them.
    engine = df[df["ts_ms"] >= ts[0] + 1500]
    assert (engine["jvm_rss_bytes"] == 0).all() and (engine["python_rss_bytes"] > 0).all()
    assert df["sample_ms"].max() < 200

    report = health_growth(df)
    after = df[df["ts_ms"] >= report.fit_from_ms]
    # Enough samples for the fit to mean something, however fast the machine replayed (the growth
    # bounds below are bytes over the whole replay, which every output and event passes through).
    assert len(after) >= 25, len(after)
    harness_rss = after["harness_rss_bytes"]
    assert fitted_growth(report, "harness_rss_bytes") < HARNESS_GROWTH_BOUND, fitted_growth(report, "harness_rss_bytes")
    assert harness_rss.max() - harness_rss.iloc[0] < HARNESS_GROWTH_BOUND, (harness_rss.iloc[0], harness_rss.max())
    assert fitted_growth(report, "driver_rss_bytes") < DRIVER_GROWTH_BOUND, fitted_growth(report, "driver_rss_bytes")
    # The program's checkpoint keeps its last 5 offset files and one state file: flat, flagged so.
    # A walk that passes while a batch writes sees one more of each (the new offset file before the
    # oldest is deleted, the state's temporary file before it replaces the state).
    flags = {g.series.column: g.flag for g in report.series}
    assert flags["checkpoint_files"] == OK and flags["state_bytes"] == OK and flags["output_bytes"] == BY_DESIGN
    # 6 files at rest (5 offsets, the state); a sample walking the directory while a batch writes
    # one offset file and deletes another can count one less or one more (CI saw a 5 once).
    assert after["checkpoint_files"].between(5, 8).all() and (after["checkpoint_files"] == 6).mean() > 0.5
    assert after["state_bytes"].between(64 * 1024, 128 * 1024).all()
    # The output log grew throughout; its last figure is the files the sink had written by then.
    assert df["output_bytes"].is_monotonic_increasing and after["output_bytes"].iloc[-1] > 50 * MIB
    rows = table_rows(report)
    assert [r["column"] for r in rows] == list(HEALTH_COLUMNS[1:-1]) and all(r["weak"] for r in rows)
