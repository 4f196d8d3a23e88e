"""End to end: a real engine program (tests/spark_programs/echo_program.py) on real Spark, fed by a
real driver process, writing through the real sink; run by harness.engine_run.run_engine.

Each run starts a Spark session (25-30 s to a warm, waiting query on a 2-core machine), so the file
has few runs: one complete run checked in detail (strangers knocking at its feed and sink
meanwhile), one stopped as unsustainable (q^b), one whose feed dies, one whose output breaks the
declared schema and must fail loudly, and one launched by hand from its script.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pytest

from datagen.pairs import generate_pairs
from harness.config import DriverConfig
from harness.engine_run import EngineRunSpec, RunSnapshot, run_engine
from harness.jvm_archive import archive_path
from harness.local_fs import jar_path as local_fs_jar_path
from kit.errors import CepkitError
from kit.wire.protocol import recv_frame, send_frame
from tests.helpers import TESTS_DIR, pairs_config, read_ticks
from validator.outputlog import read_output_log, read_resources

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

ECHO = TESTS_DIR / "spark_programs" / "echo_program.py"
RATE_EPS = 5000.0


@pytest.fixture(scope="module")
def ticks(tmp_path_factory) -> Path:
    """~15k ticks (3 s of simulated time at 5000 ticks/s)."""
    out = tmp_path_factory.mktemp("engine") / "ticks"
    generate_pairs(pairs_config(rate={"profile": "constant", "duration_s": 3.0}), out)
    return out


def spec(ticks: Path, run_dir: Path, rate_eps: float = RATE_EPS, **changes) -> EngineRunSpec:
    driver = DriverConfig(ticks, pacing="rate", rate_eps=rate_eps, lead_ms=200, align_ms=1)
    return EngineRunSpec(program=ECHO, run_dir=run_dir, driver=driver, master="local[2]", **changes)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class TreeWatcher:
    """on_progress callback: remembers every process of the engine program's tree."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.pids: set[int] = set()
        self.snapshots: list[RunSnapshot] = []

    def __call__(self, snap: RunSnapshot) -> None:
        self.snapshots.append(snap)
        started = [json.loads(ln) for ln in (self.run_dir / "logs" / "engine.stdout.jsonl").read_text().splitlines()]
        pid = next(m["pid"] for m in started if m["event"] == "started")
        try:
            root = psutil.Process(pid)
            self.pids |= {pid} | {p.pid for p in root.children(recursive=True)}
        except psutil.NoSuchProcess:
            pass


def _knock(host_port: str, first: dict | None) -> dict:
    """A raw connection without the run's secret: its first frame (or a hang-up), and the answer."""
    host, port = host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=15) as s:
        if first is not None:
            send_frame(s, first)
        else:
            s.shutdown(socket.SHUT_WR)      # a peer that says nothing and hangs up
        frame = recv_frame(s)
        return frame[0] if frame else {}


def test_echo_run_delivers_every_event_once_with_consistent_stamps_and_refuses_strangers(ticks, tmp_path,
                                                                                         monkeypatch):
    """Every event once, with its stamps, Spark's and the program's breakdown of each batch, and the
    run's records. Meanwhile raw connections without the run's secret, to the feed and the sink,
    are refused (counted in run.json, one line each in logs/harness.log) and change nothing. The
    secret (fixed here, so that it can be looked for) is in no file of the run directory, the
    program's command line or the by-hand script. (One engine run for both: CI's e2e stage.)"""
    secret = "cafe" * 8
    monkeypatch.setattr("harness.engine_run.new_secret", lambda: secret)
    run_dir = tmp_path / "run"
    watcher = TreeWatcher(run_dir)
    refusals: list[dict] = []
    cmdlines: list[str] = []

    def on_progress(snap: RunSnapshot) -> None:
        watcher(snap)
        if refusals or snap.released == 0:
            return
        command = json.loads((run_dir / "logs" / "command.json").read_text())
        feed, sink = command[command.index("--driver") + 1], command[command.index("--sink") + 1]
        refusals.append(_knock(feed, {"op": "read", "start": 0, "end": 100}))
        refusals.append(_knock(feed, {"op": "auth", "secret": "guess"}))
        refusals.append(_knock(sink, {"op": "stats"}))
        refusals.append(_knock(sink, None))
        for proc in psutil.process_iter(["cmdline"]):
            cmdlines.append(" ".join(proc.info["cmdline"] or []))

    result = run_engine(spec(ticks, run_dir, output_schemas={"Echo": pa.schema(
        [("symbol", pa.string()), ("price", pa.int32()), ("tickTS", pa.int64()), ("inputTS", pa.int64())])}),
        on_progress=on_progress)
    assert result.status == "completed", result.message
    want = read_ticks(ticks)
    n = len(want["price"])
    assert result.events_total == result.events_released == result.events_pulled == n
    assert result.outputs == {"Echo": n}
    assert result.output_log == run_dir / "outputs" / "output-log.json"
    assert result.peak_rss_bytes > 100 * 2**20 and result.mean_cpu_percent > 0
    assert 0 <= result.latency_p50_ms <= result.latency_p99_ms

    log = read_output_log(run_dir)
    echo = log.stream("Echo").sort_values("offset", kind="stable", ignore_index=True)
    # Every input event exactly once, with its own fields.
    assert echo["offset"].tolist() == list(range(n))
    assert np.array_equal(echo["price"].to_numpy(), want["price"])
    assert np.array_equal(echo["tickTS"].to_numpy(), want["tickTS"])
    assert np.array_equal(echo["symbol"].astype(str).to_numpy(), want["symbol"])
    # Rate pacing with scheduled stamps: TS = run start + floor(i * 1000 / rate).
    run_start = log.clocks.run_start_wall_ms
    expected_ts = run_start + (np.arange(n) * 1000) // int(RATE_EPS)
    assert np.array_equal(echo["inputTS"].to_numpy(), expected_ts)
    # Pulled after it was due, delivered after it was pulled.
    assert (echo["ingestTS"] >= echo["inputTS"]).all()
    assert (echo["arrivalTS"] >= echo["ingestTS"]).all()
    # The answers left from the executors through the JVM writer (specs/ENGINE_RUN.md, "Connectors"),
    # whose emits carry each task's epoch and number their batch ids from 0 within it.
    run_record = json.loads((run_dir / "run.json").read_text())
    assert run_record["plan"]["connectors"]["sink"] == "jvm", run_record["plan"]
    assert echo["batchId"].min() >= 0

    backlog = (run_dir / "metrics" / "backlog.csv").read_text().splitlines()
    assert backlog[0] == "ts_ms,released,pulled,backlog" and len(backlog) >= 3
    resources = read_resources(run_dir)
    assert len(resources) >= 5 and resources["jvm_rss_bytes"].max() > 100 * 2**20
    assert (resources["rss_bytes"] >= resources["jvm_rss_bytes"] + resources["python_rss_bytes"]).all()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "completed" and run["events"]["pulled"] == n
    assert run["spec"]["driver"]["hold"] is True
    assert run["spec"]["driver"]["keep_unread_events"] == 2 * (run["spec"]["backlog_limit_events"] or 0)
    assert run["engine"]["finished"]["end_offset"] == n
    # The JVM maps the class archive when scripts/setup.sh built one, and the run says so.
    archive = archive_path(sys.executable)
    assert run["jvm_class_archive"] == (str(archive) if archive and archive.is_file() else None)
    if run["jvm_class_archive"]:
        command = json.loads((run_dir / "logs" / "command.json").read_text())
        assert f"spark.driver.extraJavaOptions=-XX:SharedArchiveFile={archive}" in " ".join(command)
    # ... and the quiet local file system when scripts/setup.sh compiled it.
    jar = local_fs_jar_path(sys.executable)
    assert run["local_fs_jar"] == (str(jar) if jar and jar.is_file() else None)
    if run["local_fs_jar"]:
        command = json.loads((run_dir / "logs" / "command.json").read_text())
        assert "spark.hadoop.fs.file.impl=cepkit.spark.QuietLocalFileSystem" in command
    # Every batch is recorded once, with Spark's breakdown of its time, and they cover every event.
    stdout = [json.loads(line) for line in (run_dir / "logs" / "engine.stdout.jsonl").read_text().splitlines()]
    batches = [e for e in stdout if e["event"] == "batch"]
    assert [b["batch_id"] for b in batches] == list(range(len(batches)))
    assert sum(b["input_rows"] for b in batches) == n
    assert all(b["durations_ms"]["triggerExecution"] >= b["durations_ms"].get("addBatch", 0) for b in batches)
    # ... and no foreachBatch halves: the executors' JVM writer sent the answers, nothing was
    # collected to the driver (tests/spark_runtime and the driver-collect plans time those).
    assert not [b for b in batches if b["foreach_batch"]]
    versions = json.loads((run_dir / "versions.json").read_text())
    assert versions["pyspark"] == "4.3.0" and versions["java"]
    assert json.loads((run_dir / "machine.json").read_text())["cpu_count"] >= 1
    assert json.loads((run_dir / "logs" / "driver.json").read_text())["pulled"] == n
    assert watcher.snapshots and watcher.snapshots[-1].total_events == n
    assert watcher.pids and all(gone(p) for p in watcher.pids)

    # The strangers: refused, counted, logged, and nothing they did changed the answers above.
    assert len(refusals) == 4 and all(r.get("error") == "unauthorized" for r in refusals[:3]), refusals
    assert result.refused_connections == {"feed": 2, "sink": 2}
    assert run["refused_connections"] == {"feed": 2, "sink": 2}
    lines = (run_dir / "logs" / "harness.log").read_text().splitlines()
    assert len(lines) == 4
    assert sum(" feed refused a connection from 127.0.0.1:" in ln for ln in lines) == 2
    assert sum(" sink refused a connection from 127.0.0.1:" in ln for ln in lines) == 2
    assert "guess" not in (run_dir / "logs" / "harness.log").read_text()
    # The secret is nowhere the run wrote, in no process's command line, and the file an external
    # launch would use was never written.
    assert cmdlines and not any(secret in c for c in cmdlines)
    assert "CEPKIT_SECRET" in (run_dir / "spark-submit.sh").read_text()
    assert not (run_dir / "secret").exists()
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path

    # A run directory is never reused, and the refusal leaves it untouched.
    before = sorted((p.relative_to(run_dir), p.stat().st_mtime_ns) for p in run_dir.rglob("*"))
    with pytest.raises(CepkitError, match="already exists"):
        run_engine(spec(ticks, run_dir))
    assert sorted((p.relative_to(run_dir), p.stat().st_mtime_ns) for p in run_dir.rglob("*")) == before


def test_a_backlog_over_q_b_ends_the_run_as_unsustainable_without_orphans(ticks, tmp_path):
    run_dir = tmp_path / "run"
    watcher = TreeWatcher(run_dir)
    result = run_engine(spec(ticks, run_dir, rate_eps=20_000.0, backlog_limit_events=1, backlog_grace_s=0.0),
                        on_progress=watcher)
    assert result.status == "unsustainable", result.message
    assert "q^b = 1" in result.message
    assert watcher.pids and all(gone(p) for p in watcher.pids)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "unsustainable"
    # The program stopped between batches on SIGTERM and said so; its log is still readable.
    assert "stopped" in run["engine"]
    read_output_log(run_dir)


def test_a_dead_feed_ends_the_run_at_once_with_its_outputs_kept(ticks, tmp_path):
    """The driver's process killed mid-run: the run fails at the next tick, saying so, instead of
    waiting for a program that will never get another event; what was delivered is kept."""
    run_dir = tmp_path / "run"
    watcher = TreeWatcher(run_dir)

    def kill_the_feed(snap: RunSnapshot) -> None:
        watcher(snap)
        if snap.released > 2000:
            for proc in psutil.process_iter(["cmdline"]):
                if "harness.driver" in " ".join(proc.info["cmdline"] or []) and str(ticks) in " ".join(
                        proc.info["cmdline"]):
                    proc.kill()

    t0 = time.monotonic()
    result = run_engine(spec(ticks, run_dir, rate_eps=1000.0), on_progress=kill_the_feed)
    returned_ms = time.time() * 1000
    assert result.status == "failed" and "the feed (driver process) died" in result.message, result.message
    assert time.monotonic() - t0 < 120
    # Stopped without a graceful stop's wait (no batch can end without its feed): the program's
    # tree is gone within seconds of the run's end (it took ~22 s of waiting before).
    assert returned_ms - json.loads((run_dir / "run.json").read_text())["timings"]["ended_ms"] < 15_000
    assert watcher.pids and all(gone(p) for p in watcher.pids)
    assert (run_dir / "outputs" / "output-log.json").is_file()


def test_an_output_that_breaks_the_declared_schema_fails_the_run_loudly(ticks, tmp_path):
    run_dir = tmp_path / "run"
    schemas = {"Echo": pa.schema([("symbol", pa.string()), ("missingColumn", pa.int64())])}
    t0 = time.monotonic()
    result = run_engine(spec(ticks, run_dir, output_schemas=schemas))
    assert result.status == "failed"
    assert result.message.startswith("the engine program's output was refused by the sink: emit Echo: ")
    assert "missing column(s) missingColumn" in result.message
    assert "\n" not in result.message
    run = json.loads((run_dir / "run.json").read_text())
    assert run["reason"] == result.message
    # Not restarted: the same program would send the same rows again (it used to start 4 times).
    assert run["engine_attempts"] == 1, run["restarts"]
    (death,) = run["restarts"]
    assert death["outcome"] == "not restarted: the sink refused its output"
    assert time.monotonic() - t0 < 60


def test_an_external_launch_hands_the_script_the_secret_in_a_private_file_removed_at_the_end(ticks, tmp_path):
    """`launch = "external"`: the harness writes engine/secret (0600) while it waits; the by-hand
    script, run in a bare environment (no CEPKIT_SECRET), reads it and its engine is served; the
    file is gone once the run is over."""
    import os
    import stat
    import subprocess
    import threading

    run_dir = tmp_path / "run"
    results = []
    harness = threading.Thread(target=lambda: results.append(run_engine(spec(ticks, run_dir, launch="external"))))
    harness.start()
    try:
        secret = run_dir / "secret"
        deadline = time.monotonic() + 60
        while not secret.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        script = (run_dir / "spark-submit.sh").read_text()
        assert secret.read_text().strip() not in script
        env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
        by_hand = subprocess.run(["sh", str(run_dir / "spark-submit.sh")], cwd="/", env=env, capture_output=True,
                                 text=True, timeout=600)
        assert by_hand.returncode == 0, by_hand.stderr[-3000:]
        assert '"event": "finished"' in by_hand.stdout
    finally:
        harness.join(timeout=300)
    (result,) = results
    assert result.status == "completed", result.message
    assert result.outputs == {"Echo": result.events_total} and result.refused_connections == {"feed": 0, "sink": 0}
    assert not (run_dir / "secret").exists()
