"""cepkit's Flink source and sink (flink_runtime/java/cepkit/flink) against the real harness feed and
sink, driven as Flink's tasks drive them but without Flink's runtime (tests/flink_runtime/probe/
FlinkProbe.java): one split reads exactly the driver's rows with their offsets and first-served
times (ingestTS) bit for bit, its watermark one below the last TS it handed out; K splits read
exactly their blocks, end with the last released TS as their watermark, and the driver commits
the least split's position; the sink writes each stream's columns in its Arrow schema, batch ids
of its subtask, nothing lost. The run's secret is presented. The end-to-end Flink runs are
tests/cepkit_app/test_flink_jvm_e2e.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.config import DriverConfig
from harness.flink_jar import build_jar, class_path, flink_python, pyflink_home
from harness.playback import Driver
from harness.sink import SinkServer
from kit.wire.feed_client import DriverClient, served_ms
from tests.helpers import write_micro

pytestmark = [pytest.mark.flink,
              pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh installs")]
FAST = dict(lead_ms=20, align_ms=1)
SECRET = "f11cc0" * 5 + "7b"
PROBE = Path(__file__).parent / "probe" / "FlinkProbe.java"
COLUMNS = json.dumps([["ID", "int"], ["A1", "double"], ["TS", "long"]])


@pytest.fixture(scope="module")
def probe_cp(tmp_path_factory):
    """The probe compiled against the Flink runtime jar and PyFlink's jars: its class path."""
    home = pyflink_home(flink_python())
    jar = build_jar()
    out = tmp_path_factory.mktemp("probe")
    cp = os.pathsep.join((str(jar), class_path(home)))
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(PROBE)], check=True, timeout=300)
    return os.pathsep.join((str(out), cp))


def probe(cp: str, *args) -> subprocess.CompletedProcess:
    # Arrow (Flink's relocated copy) reaches into java.nio buffers, as Flink's own JVM options allow it.
    cmd = ["java", "--add-opens=java.base/java.nio=ALL-UNNAMED", "-cp", cp, "FlinkProbe", *map(str, args)]
    return subprocess.run(cmd, input=SECRET + "\n", capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    """3,000 events of one stream, several sharing a TS (so watermarks are one below a TS, never at it)."""
    return write_micro(tmp_path_factory.mktemp("feed") / "micro", {"S1": [1_000_000 + i // 3 for i in range(3000)]})


def _read(cp, port, tmp_path, k, block, limits, total):
    out = tmp_path / f"read-{k}.txt"
    proc = probe(cp, "read", "127.0.0.1", port, COLUMNS, json.dumps([["stream", "S1"]]), k, block, 700,
                 ",".join(map(str, limits)), total, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, wms, pos = {}, {}, {}
    for line in out.read_text().splitlines():
        kind, split, *rest = line.split(" ")
        if kind == "row":
            rows.setdefault(int(split), []).append(rest)
        elif kind == "wm":
            wms.setdefault(int(split), []).append((sum(len(r) for r in rows.values()), int(rest[0])))
        else:
            pos[int(split)] = int(rest[0])
    return rows, wms, pos


def _driver_rows(port: int, total: int) -> list[list[str]]:
    """The driver's rows as the probe prints them: ID A1 TS offset ingestTS stream timestamp."""
    out = []
    with DriverClient(port=port, secret=SECRET) as c:
        pos = 0
        while pos < total:
            table, resp = c.read_once(pos, total)
            ingest = served_ms(resp)
            for i, r in enumerate(table.to_pylist()):
                out.append([str(r["ID"]), repr(r["A1"]), str(r["TS"]), str(pos + i), str(int(ingest[i])), "S1",
                            str(r["TS"])])
            pos = resp["end"]
    return out


def test_one_split_reads_exactly_the_drivers_rows(probe_cp, events, tmp_path):
    with Driver(DriverConfig(events, speed=50.0, **FAST), secret=SECRET) as drv:
        assert drv.wait_finished(10)
        total = drv.buffer.total_events
        rows, wms, pos = _read(probe_cp, drv.port, tmp_path, 1, 4096, [-1], total)
        expected = _driver_rows(drv.port, total)        # read after the probe: its first-served times
    assert rows[0] == expected and len(expected) == total == 3000
    assert pos == {0: total}
    # Each watermark is one below the largest TS handed out before it, and below every later TS.
    ts = [int(r[2]) for r in rows[0]]
    assert wms[0] and all(w == max(ts[:n]) - 1 and all(t > w for t in ts[n:]) for n, w in wms[0])
    assert wms[0][-1][1] == ts[-1] - 1


def test_splits_read_their_blocks_and_end_with_the_last_released_ts(probe_cp, events, tmp_path):
    with Driver(DriverConfig(events, speed=50.0, **FAST), secret=SECRET) as drv:
        assert drv.wait_finished(10)
        total = drv.buffer.total_events
        rows, wms, pos = _read(probe_cp, drv.port, tmp_path, 3, 100, [-1, -1, -1], total)
        expected = _driver_rows(drv.port, total)
    for i in range(3):
        offsets = [int(r[3]) for r in rows[i]]
        assert offsets == [o for o in range(total) if (o // 100) % 3 == i]
        assert rows[i] == [expected[o] for o in offsets]
        # Every split ends at the feed's last TS minus 1 ms, whichever holds the last event.
        assert wms[i][-1][1] == int(expected[-1][2]) - 1
        assert [w for _, w in wms[i]] == sorted({w for _, w in wms[i]})
        assert pos[i] >= total
    assert sorted(int(r[3]) for i in rows for r in rows[i]) == list(range(total))


def test_the_driver_commits_the_least_splits_position(probe_cp, events, tmp_path):
    with Driver(DriverConfig(events, speed=50.0, **FAST), secret=SECRET) as drv, \
            DriverClient(port=drv.port, secret=SECRET) as c:
        assert drv.wait_finished(10)
        total = drv.buffer.total_events
        before = time.time_ns() // 1_000_000
        # Split 0 reads 7 of its blocks (0, 2, ..., 12: at 1,400), split 1 three (1, 3, 5: at 700).
        rows, _, pos = _read(probe_cp, drv.port, tmp_path, 2, 100, [700, 300], total)
        assert pos == {0: 1400, 1: 700}
        assert [len(rows[0]), len(rows[1])] == [700, 300]
        time.sleep(0.01)
        assert c.read_end_since(before) == 700
        assert c.commit_reads(time.time_ns() // 1_000_000, after_ms=before) == 700 == c.stats()["committed"]


def test_the_sink_writes_each_streams_columns_in_its_subtasks_batches(probe_cp, tmp_path):
    sink = SinkServer(tmp_path / "out", secret=SECRET)
    try:
        proc = probe(probe_cp, "sink", "127.0.0.1", sink.port, 3, 1, 3, 1001)
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        sink.finish({"run_start_wall_ms": 0, "sim_start_ms": 0, "speed": 1.0})
    a = pq.read_table(tmp_path / "out" / "a-00001.parquet")
    b = pq.read_table(tmp_path / "out" / "b-00001.parquet")
    assert [str(f.type) for f in a.schema][:4] == ["int32", "double", "int64", "string"]
    assert [str(f.type) for f in b.schema][:3] == ["int32", "bool", "int64"]
    ra, rb = a.to_pylist(), b.to_pylist()
    assert [r["ID"] for r in ra] == list(range(0, 1001, 2)) and [r["ID"] for r in rb] == list(range(1, 1001, 2))
    for r in ra:
        i = r["ID"]
        assert r["X"] == (None if i % 10 == 0 else i / 4.0)
        assert r["T"] == (1_700_000_000 + i) * 1000 + i % 1000 and r["name"] == f"n{i}\u00e9"
    for r in rb:
        i = r["ID"]
        assert r["flag"] == (i % 3 == 0) and r["N"] == i * 1_000_000_007
    # Flushes numbered flush * parallelism + subtask: subtask 1 of 3; at least the half-way flush and the close.
    ids = sorted({r["batchId"] for r in ra + rb})
    assert len(ids) >= 2 and all(x % 3 == 1 for x in ids)
