"""The load driver's releases: event order, TS stamping and pacing (nothing early, hold until begin).

Datasets are small (a few seconds of events) and played fast (speed > 1 or a high fixed rate), so
the whole file runs in seconds. Every driver listens on 127.0.0.1 and is stopped by its context
manager; a fixture checks that no driver thread outlives its test. What clients see of the
released events (replay, retention, the protocol) and bad inputs: test_driver_serving.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kit.wire.feed_client import DriverClient
from harness.config import DriverConfig
from harness.dataset import iter_events, open_dataset
from harness.playback import Driver
from harness.schedule import Pacing, aligned_run_start
from kit.errors import CepkitError
from tests.helpers import FAST, write_micro

# Every test here checks that no driver thread outlives it (the fixture is in conftest.py).
pytestmark = pytest.mark.usefixtures("no_leaked_threads")


def read_files(directory: Path, pattern: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(f) for f in sorted(directory.glob(pattern))])


def expected_merge(directory: Path, names: list[str]) -> pa.Table:
    """SEMANTICS.md section 1: by TS, then stream number, then row."""
    tables = [read_files(directory, f"{n}-*.parquet") for n in names]
    ts = np.concatenate([t.column("TS").to_numpy() for t in tables])
    stream_no = np.concatenate([np.full(t.num_rows, i) for i, t in enumerate(tables)])
    row = np.concatenate([np.arange(t.num_rows) for t in tables])
    order = np.lexsort((row, stream_no, ts))
    both = pa.concat_tables([t.append_column("stream", pa.array([n] * t.num_rows)) for t, n in zip(tables, names)])
    return both.take(pa.array(order))


def play_all(cfg: DriverConfig) -> tuple[pa.Table, dict, Driver]:
    """Run a driver to the end, pulling as events come; returns everything read, stats, driver."""
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        parts, pulled = [], 0
        total = c.info()["total_events"]
        while pulled < total:
            n = c.latest_offset(after=pulled, wait_ms=2000)
            part = c.read(pulled, n)
            parts.append(part)
            pulled += part.num_rows
        assert drv.wait_finished(10)
        return pa.concat_tables(parts), c.stats(), drv


# ---- order and stamping -------------------------------------------------------------------------

def test_ticks_are_released_in_file_order_with_scheduled_ts(ticks):
    speed = 8.0
    got, stats, drv = play_all(DriverConfig(ticks, speed=speed, **FAST))
    want = read_files(ticks, "ticks-*.parquet")
    assert got.column_names == ["symbol", "price", "size", "tickTS", "TS"]
    assert got.schema.field("symbol").type == pa.string()
    assert got.num_rows == want.num_rows == stats["released"] == stats["pulled"]
    for col in ("symbol", "price", "size", "tickTS"):
        assert got.column(col).to_pylist() == want.column(col).cast(got.schema.field(col).type).to_pylist()
    sim_start = json.loads((ticks / "manifest.json").read_text())["start_epoch_ms"]
    tick_ts = want.column("tickTS").to_numpy()
    # Scheduled stamping: exactly run_start + (tickTS - sim_start) / speed, floored to the ms.
    expected = drv.run_start_wall_ms + np.floor((tick_ts - sim_start) / speed).astype(np.int64)
    assert np.array_equal(got.column("TS").to_numpy(), expected)
    assert stats["backlog"] == 0 and stats["finished"]


def test_two_micro_streams_are_merged_by_ts_then_stream_then_row(micro2):
    got, _, _ = play_all(DriverConfig(micro2, speed=10.0, chunk_rows=700, **FAST))
    want = expected_merge(micro2, ["S1", "S2"])
    assert got.column_names == ["ID", "A1", "A2", "TS", "stream"]
    for col in ("ID", "A1", "A2", "stream"):
        assert got.column(col).to_pylist() == want.column(col).to_pylist()
    # At speed 10 TS keeps the simulated order: it never decreases over the merged stream.
    assert np.all(np.diff(got.column("TS").to_numpy()) >= 0)


def test_one_stream_of_several_can_be_played_alone(micro2):
    got, _, _ = play_all(DriverConfig(micro2, streams=("S2",), speed=20.0, **FAST))
    want = read_files(micro2, "S2-*.parquet")
    assert got.column_names == ["ID", "A1", "A2", "TS"]
    assert got.column("ID").to_pylist() == want.column("ID").to_pylist()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_merge_keeps_ties_in_stream_order_across_chunk_boundaries(tmp_path, fmt):
    ds = write_micro(tmp_path / "ds", {"S1": [0, 5, 5, 5, 5, 5, 7, 9, 9],
                                       "S2": [5, 5, 5, 6, 9, 9, 9, 9],
                                       "S3": [1, 5, 9]}, fmt=fmt)
    dataset = open_dataset(ds)
    for chunk_rows in (1, 2, 3, 100):
        rows = []
        for batch, ts in iter_events(dataset, chunk_rows):
            assert batch.column_names == ["ID", "A1", "stream"]
            rows += list(zip(ts.tolist(), batch.column("stream").to_pylist(), batch.column("ID").to_pylist()))
        assert rows == sorted(rows), chunk_rows      # (TS, stream name = number order, ID = row + 1)
        assert len(rows) == 20


def test_reading_a_one_file_stream_keeps_no_memory_of_what_it_has_read(tmp_path):
    """The feed reads a 1M-event file of 100 row groups batch by batch: pyarrow's memory stays at
    a few batches, not the file (its default pre-buffering kept every row group read until the
    reader was gone: the SF 512 standard run's feed grew by the whole 5 GB file)."""
    ds = write_micro(tmp_path / "ds", {"S1": list(range(1_000_000))})
    (path,) = ds.glob("S1-*.parquet")
    rng = np.random.default_rng(7)          # incompressible values: the file is as big as its data
    table = pq.read_table(path).set_column(1, "A1", pa.array(rng.random(1_000_000)))
    pq.write_table(table, path, row_group_size=10_000)
    file_bytes = path.stat().st_size
    assert file_bytes > 8 << 20
    base, peak, rows = pa.total_allocated_bytes(), 0, 0
    for batch, _ in iter_events(open_dataset(ds, verify=False), 10_000):
        rows += batch.num_rows
        del batch
        peak = max(peak, pa.total_allocated_bytes() - base)
    assert rows == 1_000_000
    assert peak < file_bytes / 8, (peak, file_bytes)


def test_micro_ts_is_rebased_by_whole_alignment_periods(tmp_path):
    ds = write_micro(tmp_path / "ds", {"S1": list(range(0, 300, 3))}, start_epoch_ms=1_000_037)
    got, _, drv = play_all(DriverConfig(ds, lead_ms=50, align_ms=250))
    shift = drv.run_start_wall_ms - 1_000_037
    assert shift % 250 == 0
    assert got.column("TS").to_pylist() == [t + shift for t in range(0, 300, 3)]


def test_run_start_alignment_and_explicit_start_checks(ticks):
    assert aligned_run_start(1_000_001, 1_000_000, 60_000) == 1_060_000
    assert aligned_run_start(1_060_000, 1_000_000, 60_000) == 1_060_000
    assert aligned_run_start(999_000, 1_000_000, 60_000) == 1_000_000
    sim_start = json.loads((ticks / "manifest.json").read_text())["start_epoch_ms"]
    with pytest.raises(CepkitError, match="start_wall_ms.*not a multiple of align_ms 60000"):
        Driver(DriverConfig(ticks, start_wall_ms=sim_start + 90_000 * 10**5 + 1))
    # The default alignment is one minute of the simulated clock.
    d = Driver(DriverConfig(ticks, hold=True))
    with d:
        start = d.begin()
    assert (start - sim_start) % 60_000 == 0


def test_send_stamp_is_never_before_the_scheduled_time(ticks):
    speed = 8.0
    got, _, drv = play_all(DriverConfig(ticks, speed=speed, stamp="send", **FAST))
    sim_start = json.loads((ticks / "manifest.json").read_text())["start_epoch_ms"]
    due = drv.run_start_wall_ms + np.floor((got.column("tickTS").to_numpy() - sim_start) / speed)
    late = got.column("TS").to_numpy() - due
    assert late.min() >= 0
    assert np.median(late) < 200         # released close to schedule, not in one burst at the end


def test_rate_pacing_spaces_events_evenly():
    p = Pacing("rate", sim_start_ms=0, rate_eps=3000.0)
    due = p.due_rel_ms(0, np.zeros(7, dtype=np.int64))
    assert due.tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert Pacing("rate", 0, rate_eps=1000.0).due_rel_ms(10**9, np.zeros(2, np.int64)).tolist() == [10**9, 10**9 + 1]
    assert Pacing("tickts", 100, speed=0.5).due_rel_ms(0, np.array([100, 101, 150])).tolist() == [0, 2, 100]


def test_rate_pacing_stamps_offsets_over_the_rate(micro2):
    got, _, drv = play_all(DriverConfig(micro2, pacing="rate", rate_eps=50_000.0, **FAST))
    i = np.arange(got.num_rows)
    assert np.array_equal(got.column("TS").to_numpy(), drv.run_start_wall_ms + (i * 1000) // 50_000)


def test_pull_pacing_releases_only_as_fast_as_the_engine_reads(ticks):
    """`pacing="pull"`: at most `pull_window_events` released ahead of the reads, all in order."""
    window = 1_000
    cfg = DriverConfig(ticks, pacing="pull", stamp="send", pull_window_events=window, **FAST)
    want = read_files(ticks, "ticks-*.parquet")
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        parts, pulled, ahead = [], 0, []
        total = c.info()["total_events"]
        while pulled < total:
            n = c.latest_offset(after=pulled, wait_ms=2000)
            ahead.append(n - pulled)
            part = c.read(pulled, min(n, pulled + 700))    # a slow engine: less than the window per read
            parts.append(part)
            pulled += part.num_rows
            time.sleep(0.001)
        assert drv.wait_finished(10)
        stats = c.stats()
    got = pa.concat_tables(parts)
    assert got.num_rows == want.num_rows == stats["released"]
    assert got.column("tickTS").to_pylist() == want.column("tickTS").to_pylist()
    assert max(ahead) <= window and min(ahead) > 0
    ts = got.column("TS").to_numpy()
    assert np.all(np.diff(ts) >= 0) and ts[-1] - ts[0] > 0      # stamped on release, over the reads


def test_pull_pacing_needs_send_stamps(ticks):
    with pytest.raises(CepkitError, match="stamp"):
        DriverConfig(ticks, pacing="pull")


# ---- pacing: nothing early -----------------------------------------------------------------------

def test_nothing_is_released_before_its_scheduled_time(micro2):
    # 2 x 2000 events/s at speed 0.25: ~1000 events per wall second, observed for 0.6 s.
    cfg = DriverConfig(micro2, speed=0.25, **FAST)
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        seen = []
        t_end = time.monotonic() + 0.6
        while time.monotonic() < t_end:
            n = c.latest_offset()
            seen.append((drv.clock.now_ms(), n))
            time.sleep(0.003)
        table = c.read(0, seen[-1][1])
    due = table.column("TS").to_numpy()       # scheduled stamping: TS is the due time
    assert table.num_rows > 300
    for now_ms, n in seen:
        if n:
            assert due[n - 1] <= now_ms       # everything released was due when we looked
        # ...and what was due well before we looked had been released (progress, not a lateness gate).
        assert n >= np.searchsorted(due, now_ms - 500, side="right") or n == table.num_rows


def test_hold_releases_nothing_until_begin(ticks):
    with Driver(DriverConfig(ticks, hold=True, speed=50.0, **FAST)) as drv, DriverClient(port=drv.port) as c:
        assert c.info()["clocks"]["run_start_wall_ms"] is None
        time.sleep(0.2)
        assert c.latest_offset() == 0
        assert c.read(0, 100).num_rows == 0
        start = c.begin()
        assert c.begin() == start == drv.run_start_wall_ms        # idempotent
        assert c.read(0, 100, wait_ms=5000).num_rows > 0
