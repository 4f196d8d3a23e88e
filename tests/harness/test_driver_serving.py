"""The load driver as clients see it: replayable reads, retention and eviction, stats, the protocol
and its client, the process entry point, and one-line errors for bad datasets and settings.

Datasets are small (a few seconds of events) and played fast, so the whole file runs in seconds.
Every driver listens on 127.0.0.1 and is stopped by its context manager; a fixture checks that no
driver thread outlives its test. Event order, stamping and pacing: test_driver_release.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kit.wire.feed_client import DriverClient, served_ms
from harness.config import DriverConfig
from harness.dataset import iter_events, open_dataset
from harness.playback import Driver
from harness.process import DriverProcess
from kit.wire.protocol import BadRequestError, DriverError, OffsetEvictedError, PREFIX
from harness.schedule import LatenessRecorder
from kit.errors import CepkitError
from tests.helpers import FAST, write_micro

# Every test here checks that no driver thread outlives it (the fixture is in conftest.py).
pytestmark = pytest.mark.usefixtures("no_leaked_threads")


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


def test_each_event_keeps_the_time_it_was_first_served(ticks):
    with Driver(DriverConfig(ticks, speed=50.0, chunk_rows=1000, **FAST)) as drv:
        assert drv.wait_finished(10)
        with DriverClient(port=drv.port) as c:
            _, middle = c.read_once(1500, 1600)
            time.sleep(0.02)
            _, around = c.read_once(1000, 2000)     # over a chunk border, around the range read first
            _, again = c.read_once(1500, 1600)
    (m,) = middle["served"]
    assert m[0] == 100 and again["served"] == [m]
    (a, b, c_) = around["served"]
    assert (a[0], b, c_[0]) == (500, m, 400) and a[1] == c_[1] >= m[1] + 20
    assert served_ms(around).tolist() == [a[1]] * 500 + [m[1]] * 100 + [a[1]] * 400


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


def test_events_from_the_committed_offset_stay_for_a_restart(ticks):
    # The same tiny budget, everything read as it comes; but the engine's checkpoint is still at 0,
    # so a restarted engine must be able to read it all again.
    cfg = DriverConfig(ticks, speed=50.0, chunk_rows=1000, retain_bytes=1, hold=True, **FAST)
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        c.commit(0)
        c.begin()
        total, pos = drv.dataset.total_rows, 0
        while pos < total:
            pos += c.read(pos, total, wait_ms=1000).num_rows
        assert drv.wait_finished(10)
        stats = c.stats()
        assert (stats["pulled"], stats["committed"], stats["retained_from"]) == (total, 0, 0)
        assert c.read(0, total).num_rows == total
        c.commit(total)
        assert c.stats()["committed"] == total


def test_a_commit_by_time_covers_the_reads_answered_before_it_since_the_restore(ticks):
    cfg = DriverConfig(ticks, speed=50.0, chunk_rows=1000, hold=True, **FAST)
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        c.begin()
        assert drv.wait_finished(10)
        total = drv.dataset.total_rows
        assert c.commit_reads(before_ms=time.time_ns() // 1_000_000 + 10_000) is None    # nothing read yet
        c.read(0, 100)
        time.sleep(0.01)
        trigger = time.time_ns() // 1_000_000
        time.sleep(0.01)
        c.read(100, 200)                                           # after the trigger: not covered
        assert c.commit_reads(trigger) == 100
        time.sleep(0.01)                                           # the dead job's last read is before the restore
        restored = time.time_ns() // 1_000_000
        time.sleep(0.01)
        assert c.read_end_since(restored) == 0          # a commit of 100 of them: the rest to read again
        c.read(50, 80)                                             # a restored job reads again from 50
        time.sleep(0.01)
        # Its checkpoint covers its own reads only, not the dead job's read up to 200.
        assert c.commit_reads(time.time_ns() // 1_000_000, after_ms=restored) == 100
        c.read(80, total)
        time.sleep(0.01)
        assert c.commit_reads(time.time_ns() // 1_000_000, after_ms=restored) == total == c.stats()["committed"]
        # A job restored once every event is committed reads nothing again: it has read them all.
        time.sleep(0.01)
        again = time.time_ns() // 1_000_000
        assert c.read_end_since(again) == total


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
