"""The health sampler (harness/health.py) on real processes and directories, no engine: its walk
of directories that an engine empties under it, its rows, its state figures per engine, and that
neither it nor the sink's duplicate check keeps more memory the longer a run goes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

import harness.sink
from harness import health
from harness.health import HealthSampler, dir_usage, local_checkpoint
from harness.runners import runner

spark_state = runner("spark").state_gauge
flink_state = runner("flink").state_gauge
from harness.resources import ResourceSampler
from harness.sink import RECENT_BATCHES, SinkServer
from kit.wire.sink_client import SinkClient
from validator.health import HEALTH_COLUMNS, read_health


def tree(root, files: dict[str, int]) -> None:
    for name, size in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


# -- the walk ------------------------------------------------------------------------------------

def test_dir_usage_counts_regular_files_under_a_directory(tmp_path):
    tree(tmp_path / "ck", {"offsets/0": 10, "offsets/.0.crc": 3, "state/0/1/2.changelog": 1000, "metadata": 7})
    (tmp_path / "ck" / "state" / "empty").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "ck" / "link")          # not followed, not counted
    tree(tmp_path, {"elsewhere/big": 10**6})
    assert dir_usage(tmp_path / "ck") == (1020, 4)
    assert dir_usage(tmp_path / "ck" / "state") == (1000, 1)
    assert dir_usage(tmp_path / "nothing") is None
    assert dir_usage(tmp_path / "ck" / "metadata") is None               # a file is not a directory


def test_dir_usage_tolerates_files_and_directories_vanishing_mid_walk(tmp_path):
    """As an engine's maintenance deletes old checkpoint files: a thread keeps creating and deleting
    files and whole directories while the walk runs; no walk fails, each figure lies within what
    the directory ever held."""
    root = tmp_path / "checkpoint"
    root.mkdir()
    keep = {"metadata": 100}
    tree(root, keep)
    stop = threading.Event()
    # At most 7 state directories of 40 files at once, beside the metadata file.
    most = {"files": 1 + 7 * 40, "bytes": 100 + 7 * (30 * 50 + 10 * 200)}

    def churn() -> None:
        i = 0
        while not stop.is_set():
            d = root / f"state-{i % 7}"
            tree(d, {f"v{j}.changelog": 50 for j in range(30)} | {f"sub/{j}.sst": 200 for j in range(10)})
            shutil.rmtree(root / f"state-{(i + 3) % 7}", ignore_errors=True)
            i += 1

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        seen = set()
        deadline = time.monotonic() + 3.0
        walks = 0
        while time.monotonic() < deadline or walks < 200:
            usage = dir_usage(root)
            assert usage is not None
            assert 100 <= usage[0] <= most["bytes"] and 1 <= usage[1] <= most["files"]
            seen.add(usage)
            walks += 1
    finally:
        stop.set()
        worker.join()
    assert len(seen) > 10           # the walks did see the directory change under them


def test_dir_usage_walks_a_big_checkpoint_in_tens_of_milliseconds(tmp_path):
    """A two-hour Spark run's checkpoint, generously: offsets and commits at minBatchesToRetain
    (100, with their .crc files), 8 state partitions x 2 operators each holding 100 changelog
    versions, 10 snapshots and 40 SST files: 4,400 files."""
    files = {}
    for log in ("offsets", "commits"):
        files |= {f"{log}/{b}": 400 for b in range(14_000, 14_100)}
        files |= {f"{log}/.{b}.crc": 12 for b in range(14_000, 14_100)}
    for op in range(2):
        for part in range(8):
            base = f"state/{op}/{part}"
            files |= {f"{base}/{v}.changelog": 3000 for v in range(14_000, 14_100)}
            files |= {f"{base}/.{v}.changelog.crc": 32 for v in range(14_000, 14_100)}
            files |= {f"{base}/{v}.zip": 9000 for v in range(14_000, 14_100, 10)}
            files |= {f"{base}/SSTs/{n}.sst": 60_000 for n in range(40)}
    tree(tmp_path / "ck", files)
    dir_usage(tmp_path / "ck")                       # the directory entries in the page cache, as in a run
    t = time.perf_counter()
    for _ in range(10):
        usage = dir_usage(tmp_path / "ck")
    per_walk_ms = (time.perf_counter() - t) * 100
    assert usage == (sum(files.values()), len(files))
    assert per_walk_ms < 200, per_walk_ms            # measured ~30 ms on the 2-core machine


# -- the sampler ---------------------------------------------------------------------------------

def test_the_sampler_writes_a_row_per_interval_with_every_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(health, "HEALTH_INTERVAL_S", 0.1)
    driver = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(30 * 2**20); time.sleep(30)"])
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    checkpoint, outputs = tmp_path / "checkpoint", tmp_path / "outputs"
    tree(checkpoint, {"state/0/0/1.changelog": 5000, "offsets/1": 70})
    tree(outputs, {"Echo-00001.parquet": 12_345})
    resources = ResourceSampler(engine.pid, tmp_path / "resources.csv", interval_s=0.1).start()
    sampler = HealthSampler(tmp_path / "health.csv", outputs=outputs, checkpoint=checkpoint,
                            state=spark_state(checkpoint, lambda: None), driver_pid=driver.pid, resources=resources)
    try:
        time.sleep(0.3)         # the driver's bytearray is touched, the resource sampler has a reading
        sampler.start()
        time.sleep(1.0)
        tree(outputs, {"Echo-00002.parquet": 1000})
        time.sleep(0.3)
    finally:
        sampler.stop()
        resources.stop()
        for p in (driver, engine):
            p.kill()
            p.wait()
    df = read_health(tmp_path / "health.csv")
    assert list(df.columns) == list(HEALTH_COLUMNS) and sampler.interval_s == 0.1
    assert 8 <= len(df) <= 16 and sampler.rows == len(df)       # 1.3 s at 0.1 s: ~14 rows
    gaps = np.diff(df["ts_ms"].to_numpy())
    assert gaps.max() < 400 and abs(np.median(gaps) - 100) <= 25   # on a fixed grid, however loaded
    assert (df["harness_rss_bytes"] > 50 * 2**20).all() and (df["driver_rss_bytes"] > 30 * 2**20).all()
    assert (df["jvm_rss_bytes"] == 0).all() and (df["python_rss_bytes"] > 0).all()
    assert (df["state_bytes"] == 5000).all() and (df["checkpoint_bytes"] == 5070).all()
    assert (df["checkpoint_files"] == 2).all()
    assert df["output_bytes"].iloc[0] == 12_345 and df["output_bytes"].iloc[-1] == 13_345
    assert df["sample_ms"].max() < 100 and sampler.max_sample_ms == df["sample_ms"].max()


def test_figures_it_cannot_have_are_left_empty(tmp_path):
    """No driver, no engine reading, a checkpoint elsewhere: empty cells, not zeros."""
    engine = ResourceSampler(None, tmp_path / "resources.csv")     # never started: no reading
    sampler = HealthSampler(tmp_path / "health.csv", outputs=tmp_path / "outputs", checkpoint=None,
                            state=spark_state(local_checkpoint("hdfs://nn/ckpt/run-1"), lambda: None),
                            driver_pid=None, resources=engine)
    row = sampler.sample()
    sampler.stop()
    engine.stop()
    assert row["harness_rss_bytes"] > 0
    assert [row[c] for c in HEALTH_COLUMNS[2:-1]] == [None] * 7
    df = read_health(tmp_path / "health.csv")
    assert len(df) == 1 and df.iloc[0, 2:-1].isna().all()
    assert local_checkpoint("file:///shared/ck/run") == local_checkpoint("/shared/ck/run")


def test_flinks_state_is_its_newest_completed_checkpoint(tmp_path):
    ck = tmp_path / "checkpoint"
    tree(ck, {"job-a/chk-3/_metadata": 100, "job-a/chk-3/state-1": 4000,
              "job-a/chk-4/_metadata": 100, "job-a/chk-4/state-1": 6000,
              "job-a/shared/x": 1, "job-a/taskowned/y": 1})
    os.utime(ck / "job-a" / "chk-3" / "_metadata", (1, 1))       # chk-4's _metadata is the newer
    heard = {}
    state = flink_state(ck, lambda: heard or None)
    assert state() == 6100                                         # heard of none: the newest on disk
    heard.update(path=str(ck / "job-a" / "chk-3"), size=777)
    assert state() == 4100                                         # the one the program reported
    shutil.rmtree(ck / "job-a" / "chk-3")                          # subsumed since: the newest on disk
    assert state() == 6100
    assert flink_state(None, lambda: {"path": "hdfs://nn/x/chk-9", "size": 4242})() == 4242
    assert flink_state(None, lambda: None)() is None
    assert runner("flink").state_gauge(ck, lambda: None)() == 6100     # the registry names the gauge
    assert runner("spark").state_gauge(ck, lambda: None)() is None       # no state/ subtree: not a Spark checkpoint


def test_the_samplers_memory_does_not_grow_with_its_rows(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    tree(checkpoint, {f"state/0/{i}.changelog": 10 for i in range(50)})
    sampler = HealthSampler(tmp_path / "health.csv", outputs=tmp_path, checkpoint=checkpoint,
                            state=spark_state(checkpoint, lambda: None))
    tracemalloc.start()
    try:
        for _ in range(50):
            sampler.sample()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            sampler.sample()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        sampler.stop()
    assert grown < 8 * 1024, grown       # keeping each row (a dict of 10 figures) would be ~150 KiB
    assert sampler.rows == 250


# -- the sink's duplicate check ---------------------------------------------------------------------

def _sink_memory() -> int:
    """Bytes allocated by harness/sink.py and still held (its per-batch bookkeeping)."""
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/harness/sink.py")])
    return sum(s.size for s in snap.statistics("filename"))


def test_the_sinks_memory_does_not_grow_with_the_number_of_batches(tmp_path, monkeypatch):
    """A two-hour run sends the sink 10^4 to 10^6 batches; it remembers the recent ones only (here
    256, to keep the test short), and still drops a batch sent again (a resend, Spark's re-run last
    batch). Measured from the sink's start (so every allocation of it is seen), each batch written
    at once (no buffered rows to blur the figure), once the window has filled: the largest figure
    of batches 2,000-2,750 is that of batches 500-1,000. The sink before kept a set of every batch
    id: it grew by 96 KiB here (the set's table, at 1,229 batches), and by ~70 bytes a batch."""
    monkeypatch.setattr(harness.sink, "RECENT_BATCHES", 256)
    monkeypatch.setattr(harness.sink, "FLUSH_ROWS", 1)
    rows = pa.table({"ID": pa.array([1], pa.int32()), "inputTS": pa.array([1_790_000_000_000], pa.int64())})
    tracemalloc.start()
    try:
        with SinkServer(tmp_path / "out") as sink, SinkClient(port=sink.port) as client:
            held = []
            for batch in range(3000):
                client.emit("S", batch, rows)
                if batch >= 500 and batch % 250 == 0:
                    held.append(_sink_memory())
            assert client.emit("S", batch, rows) == 0 and client.emit("S", batch - 200, rows) == 0     # resent
            stats = sink.stats()
    finally:
        tracemalloc.stop()
    early, late = max(held[:3]), max(held[-4:])
    assert late - early < 4 * 1024, (early, late)
    assert stats["emits"] == 3000 and stats["duplicates"] == 2 and stats["streams"] == {"S": 3000}


def test_a_batch_id_is_written_once_per_epoch_within_the_window(tmp_path):
    rows = pa.table({"x": pa.array([1], pa.int64())})
    with SinkServer(tmp_path / "out") as sink, SinkClient(port=sink.port, epoch="1.0.0") as a, \
            SinkClient(port=sink.port, epoch="1.0.1") as b:
        assert a.emit("T", 7, rows) == 1 and b.emit("T", 7, rows) == 1      # another sender: its own ids
        assert a.emit("T", 7, rows) == 0
        for batch in range(8, 8 + RECENT_BATCHES):
            a.emit("T", batch, rows)
        # Past the window an id is no longer known: written again, never dropped silently.
        assert a.emit("T", 7, rows) == 1 and a.emit("T", 8 + RECENT_BATCHES - 1, rows) == 0
