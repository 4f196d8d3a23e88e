"""The load driver: event order, TS stamping, pacing, replayable reads, retention, errors.

Datasets are small (a few seconds of events) and played fast (speed > 1 or a high fixed rate), so
the whole file runs in seconds. Every driver listens on 127.0.0.1 and is stopped by its context
manager; a fixture checks that no driver thread outlives its test.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from datagen.micro import generate_micro
from datagen.pairs import generate_pairs
from kit.wire.feed_client import DriverClient
from harness.config import DriverConfig
from harness.dataset import iter_events, open_dataset
from harness.playback import Driver
from harness.process import DriverProcess
from kit.wire.protocol import BadRequestError, DriverError, OffsetEvictedError, PREFIX
from harness.schedule import LatenessRecorder, Pacing, aligned_run_start
from kit.config import MicroConfig, RateConfig
from kit.errors import CepkitError
from tests.helpers import pairs_config

# Runs start soon (lead_ms) and need no minute alignment unless a test is about alignment.
FAST = dict(lead_ms=50, align_ms=1)


# ---- datasets ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ticks(tmp_path_factory) -> Path:
    """~20k ticks over 4 s of simulated time, in 2 Parquet files."""
    out = tmp_path_factory.mktemp("drv") / "ticks"
    generate_pairs(pairs_config(file_count=2, rate={"profile": "constant", "duration_s": 4.0}), out)
    return out


@pytest.fixture(scope="module")
def micro2(tmp_path_factory) -> Path:
    """Two streams at 2000 events/s for 5 s (many equal TS within and across streams), 2 files each."""
    out = tmp_path_factory.mktemp("drv") / "micro2"
    generate_micro(MicroConfig(streams=2, file_count=2, attributes=2,
                               rate=RateConfig(profile="constant", basis_rate_eps=2000.0, duration_s=5.0)), out)
    return out


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


# ---- running drivers -----------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def no_leaked_threads():
    yield
    left = [t.name for t in threading.enumerate() if t.name.startswith("driver-")]
    assert not left, f"driver threads left running: {left}"


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


# ---- offsets: replay, reading ahead, eviction ----------------------------------------------------

def test_released_ranges_read_again_identically_from_concurrent_clients(ticks):
    with Driver(DriverConfig(ticks, speed=50.0, chunk_rows=1000, max_read_rows=777, **FAST)) as drv:
        assert drv.wait_finished(10)
        total = drv.dataset.total_rows
        with DriverClient(port=drv.port) as c:
            whole = c.read(0, total)
        assert whole.num_rows == total
        ranges = [(0, total), (5, 4321), (999, 1001), (total - 3, total), (2500, 2500)]
        results: dict[tuple[int, int, int], pa.Table] = {}

        def reader(k: int) -> None:
            with DriverClient(port=drv.port) as c:
                for a, b in ranges:
                    results[(k, a, b)] = c.read(a, b)

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for (k, a, b), table in results.items():
            assert table.equals(whole.slice(a, b - a)), (k, a, b)


def test_reading_beyond_the_released_offset(ticks):
    with Driver(DriverConfig(ticks, hold=True, speed=50.0, **FAST)) as drv, DriverClient(port=drv.port) as c:
        # Nothing released: an empty table at once, or after wait_ms if asked to wait.
        t0 = time.monotonic()
        assert c.read(10, 20).num_rows == 0
        empty = c.read(0, 20, wait_ms=100)
        assert empty.num_rows == 0 and empty.schema == c.schema
        assert time.monotonic() - t0 >= 0.1
        c.begin()
        assert drv.wait_finished(10)
        total = drv.dataset.total_rows
        # The end of the run: asking past it returns at once with what exists.
        t0 = time.monotonic()
        assert c.read(total - 5, total + 100, wait_ms=5000).num_rows == 5
        assert c.read(total, total + 100, wait_ms=5000).num_rows == 0
        assert c.latest_offset(after=total, wait_ms=5000) == total
        assert time.monotonic() - t0 < 2


def test_evicted_offsets_raise_a_clear_error(ticks):
    cfg = DriverConfig(ticks, speed=50.0, chunk_rows=1000, retain_bytes=1, **FAST)
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        assert drv.wait_finished(10)
        stats = c.stats()
        total = drv.dataset.total_rows
        assert 0 < stats["retained_from"] < total
        with pytest.raises(OffsetEvictedError, match=r"offset 0 was evicted.*retain_bytes=1"):
            c.read(0, 10)
        # The retained tail is still served.
        assert c.read(stats["retained_from"], total).num_rows == total - stats["retained_from"]


def test_unread_events_within_keep_unread_events_are_never_evicted(ticks):
    # The same tiny budget, but nothing has been read: the harness's q^b guard keeps it all.
    cfg = DriverConfig(ticks, speed=50.0, chunk_rows=1000, retain_bytes=1, keep_unread_events=10**9, **FAST)
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        assert drv.wait_finished(10)
        total = drv.dataset.total_rows
        assert c.stats()["retained_from"] == 0
        assert c.read(0, total).num_rows == total


def test_stats_report_backlog_and_lateness(ticks):
    with Driver(DriverConfig(ticks, speed=50.0, **FAST)) as drv, DriverClient(port=drv.port) as c:
        assert drv.wait_finished(10)
        c.read(0, 1234)
        s = c.stats()
        assert s["released"] == drv.dataset.total_rows
        assert s["pulled"] == 1234 and s["backlog"] == s["released"] - 1234
        lat = s["lateness"]
        assert lat["steps"] > 0 and 0 <= lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"]
        assert s["connections_open"] == 1


def test_lateness_recorder_percentiles():
    rec = LatenessRecorder()
    for x in [0.1] * 98 + [3.0, 250.0]:
        rec.add(x)
    s = rec.summary()
    assert s["steps"] == 100 and s["max_ms"] == 250.0
    assert abs(s["p50_ms"] - 0.105) < 1e-9 and abs(s["p99_ms"] - 3.005) < 1e-9
    assert LatenessRecorder().summary()["p99_ms"] is None


# ---- protocol and client -------------------------------------------------------------------------

def test_client_reconnects_transparently(ticks):
    with Driver(DriverConfig(ticks, speed=50.0, **FAST)) as drv, DriverClient(port=drv.port) as c:
        assert drv.wait_finished(10)
        first = c.read(0, 100)
        assert first.num_rows == 100
        drv._server.close_connections()
        assert c.read(0, 100).equals(first)
        assert c.reconnects >= 1


def test_bad_requests_get_one_line_errors(ticks):
    with Driver(DriverConfig(ticks, hold=True, **FAST)) as drv, DriverClient(port=drv.port) as c:
        with pytest.raises(BadRequestError, match="unknown op 'nope'"):
            c._request({"op": "nope"})
        with pytest.raises(BadRequestError, match=r"bad range \[5, 2\)"):
            c.read_once(5, 2)
        with pytest.raises(BadRequestError, match="start must be an integer"):
            c._request({"op": "read", "start": "x", "end": 3})
        # A frame whose header is not JSON gets a protocol error and the connection is closed.
        with socket.create_connection(("127.0.0.1", drv.port)) as s:
            s.sendall(PREFIX.pack(3, 0) + b"{{{")
            assert s.recv(1 << 16)
        assert c.latest_offset() == 0          # other connections are unaffected


def test_client_pickles_without_its_socket(ticks):
    import pickle
    with Driver(DriverConfig(ticks, speed=50.0, **FAST)) as drv, DriverClient(port=drv.port) as c:
        c.latest_offset()
        c2 = pickle.loads(pickle.dumps(c))
        assert c2.latest_offset() >= 0
        c2.close()


def test_driver_process_entry_point(ticks):
    cfg = DriverConfig(ticks, speed=50.0, **FAST)
    with DriverProcess(cfg, exit_when_drained=True) as proc:
        assert proc.ready["host"] == "127.0.0.1" and proc.ready["total_events"] > 0
        with proc.client() as c:
            total = proc.ready["total_events"]
            got = c.read(0, total, wait_ms=10_000)
            while got.num_rows < total:
                got = pa.concat_tables([got, c.read(got.num_rows, total, wait_ms=10_000)])
        stats = proc.wait(10)
    assert stats["released"] == stats["pulled"] == total


# ---- bad inputs ------------------------------------------------------------------------------------

def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _edit_manifest(ds: Path, change) -> None:
    m = json.loads((ds / "manifest.json").read_text())
    change(m)
    (ds / "manifest.json").write_text(json.dumps(m))


def test_missing_dataset_and_manifest(tmp_path):
    with pytest.raises(CepkitError, match="nowhere: dataset directory not found"):
        Driver(DriverConfig(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(CepkitError, match=r"empty/manifest.json: not found"):
        Driver(DriverConfig(tmp_path / "empty"))


@pytest.mark.parametrize("change, match", [
    (lambda m: m.update(kind="other"), r"manifest.json:kind: expected 'cepkit.datagen-manifest'"),
    (lambda m: m.update(start_epoch_ms="soon"), r"manifest.json:start_epoch_ms: expected an integer"),
    (lambda m: m.update(format="xls"), r"manifest.json:format: expected 'parquet' or 'csv'"),
    (lambda m: m.update(files=[]), r"manifest.json:files: expected a non-empty list"),
    (lambda m: m["files"][0].update(path="../x.parquet"), r"manifest.json:files\[0\].path: must be a file inside"),
    (lambda m: m["files"][1].update(path="gone.parquet"), r"gone.parquet: listed in manifest.json but missing"),
    (lambda m: m["files"][0].update(rows=3), r"ticks-00001-of-00002.parquet: has \d+ rows but manifest.json says 3"),
])
def test_bad_manifests_name_the_file_and_field(ticks, tmp_path, change, match):
    ds = _copy(ticks, tmp_path / "ds")
    _edit_manifest(ds, change)
    with pytest.raises(CepkitError, match=match) as e:
        Driver(DriverConfig(ds))
    assert "\n" not in str(e.value)


def test_invalid_json_unknown_stream_and_missing_column(micro2, tmp_path):
    ds = _copy(micro2, tmp_path / "ds")
    (ds / "manifest.json").write_text('{"kind": \n nope')
    with pytest.raises(CepkitError, match=r"manifest.json:2: invalid JSON"):
        Driver(DriverConfig(ds))
    with pytest.raises(CepkitError, match=r"manifest.json:streams: no stream 'S9' to play \(the dataset has S1, S2\)"):
        Driver(DriverConfig(micro2, streams=("S9",)))
    ds2 = tmp_path / "ds2"
    write_micro(ds2, {"S1": [1, 2, 3]})
    pq.write_table(pa.table({"ID": pa.array([1, 2, 3], pa.int32()), "TS": pa.array([1, 2, 3], pa.int64())}),
                   ds2 / "S1-00001-of-00001.parquet")
    with pytest.raises(CepkitError, match=r"S1-00001-of-00001.parquet:A1: missing column"):
        Driver(DriverConfig(ds2))


def test_out_of_order_rows_stop_the_run_with_the_file_named(tmp_path):
    ds = write_micro(tmp_path / "ds", {"S1": [1, 2, 3, 2, 4]})
    with pytest.raises(CepkitError, match=r"S1-00001-of-00001.parquet:TS: data row 4: 2 is earlier"):
        list(iter_events(open_dataset(ds), 2))
    with Driver(DriverConfig(ds, **FAST)) as drv, DriverClient(port=drv.port) as c:
        assert not drv.wait_finished(5)
        with pytest.raises(DriverError, match=r"S1-00001-of-00001.parquet:TS: data row 4"):
            c.latest_offset()


@pytest.mark.parametrize("kwargs, match", [
    (dict(pacing="fast"), "pacing: must be one of tickts, rate, pull"),
    (dict(pacing="rate"), "rate_eps: must be a positive number"),
    (dict(rate_eps=10.0), "rate_eps: only applies with pacing 'rate'"),
    (dict(speed=0), "speed: must be a positive number"),
    (dict(stamp="now"), "stamp: must be one of scheduled, send"),
    (dict(port=70000), "port: must be at most 65535"),
    (dict(align_ms=0), "align_ms: must be an integer >= 1"),
    (dict(streams=("S1", "S1")), "streams: names repeat"),
])
def test_config_checks_itself(kwargs, match):
    with pytest.raises(CepkitError, match=match):
        DriverConfig("somewhere", **kwargs)
    assert DriverConfig.from_dict(DriverConfig("x", pacing="rate", rate_eps=5.0).to_dict()).rate_eps == 5.0
