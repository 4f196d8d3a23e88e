"""The JVM feed source and sink writer (spark_runtime/java/, Spark's real-time mode) against the real
harness feed and sink, driven as Spark drives them (cepkit.spark.RuntimeProbe): micro-batches of a
read limit split into partitions read exactly the driver's rows, with offset and ingestTS; a
real-time reader hands out events as the driver releases them, their arrival time their ingestTS,
and ends where it got to; the writer's rows reach the sink, each stream with its columns, nothing
lost; the run's secret is presented, and a wrong one refused in one line. The end-to-end runs in
real-time mode are tests/cepkit_app/test_realtime_e2e.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datagen.pairs import generate_pairs
from harness.config import DriverConfig
from harness.playback import Driver
from harness.runtime_jar import build_jar
from harness.sink import SinkServer
from kit.wire.feed_client import DriverClient, served_ms
from tests.helpers import pairs_config

# In the e2e stage, beside the real-time runs: JVMs are slow to start, and the default run has no room.
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh installs")]
FAST = dict(lead_ms=20, align_ms=1)
SECRET = "c0ffee" * 5 + "01"


@pytest.fixture(scope="module")
def jar():
    return build_jar(sys.executable)


@pytest.fixture(scope="module")
def ticks(tmp_path_factory):
    out = tmp_path_factory.mktemp("jvm") / "ticks"
    generate_pairs(pairs_config(rate={"profile": "constant", "duration_s": 2.0}), out)
    return out


def probe(jar, *args, wait=True):
    import pyspark

    cp = os.pathsep.join((str(jar), os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")))
    # Arrow reaches into java.nio buffers, as Spark's own launcher allows it.
    cmd = ["java", "--add-opens=java.base/java.nio=ALL-UNNAMED", "-cp", cp, "cepkit.spark.RuntimeProbe",
           *map(str, args)]
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _rows(path) -> list[list[str]]:
    return [line.split(",") for line in path.read_text().splitlines()]


def _expected(port: int, start: int, end: int) -> list[list[str]]:
    with DriverClient(port=port, secret=SECRET) as c:
        table, resp = c.read_once(start, end)
    ingest = served_ms(resp)
    return [[r["symbol"], str(r["price"]), str(r["size"]), str(r["tickTS"]), str(r["TS"]), str(start + i),
             str(int(ingest[i]))] for i, r in enumerate(table.to_pylist())]


def test_micro_batches_read_exactly_the_drivers_rows(jar, ticks, tmp_path):
    with Driver(DriverConfig(ticks, speed=50.0, **FAST), secret=SECRET) as drv:
        proc = probe(jar, "micro", drv.port, SECRET, 3, 700, tmp_path / "out.csv")
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = _rows(tmp_path / "out.csv")
        total = drv.buffer.total_events
        assert len(rows) == total > 2000
        batches = [int(r[0]) for r in rows]
        assert max(batches.count(b) for b in set(batches)) <= 700            # the read limit holds
        got = sorted((r[1:] for r in rows), key=lambda r: int(r[5]))
        assert got == _expected(drv.port, 0, total)
        assert drv.buffer.committed == total                                # every batch committed


def test_a_real_time_reader_follows_the_driver_and_ends_where_it_got_to(jar, ticks, tmp_path):
    with Driver(DriverConfig(ticks, hold=True, speed=2.0, **FAST), secret=SECRET) as drv:
        run = probe(jar, "realtime", drv.port, SECRET, 0, 500, 5000, tmp_path / "rt.csv", wait=False)
        time.sleep(2.0)                     # the reader waits at the driver for the first event
        with DriverClient(port=drv.port, secret=SECRET) as c:
            c.begin()
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err[-3000:]
        rows = _rows(tmp_path / "rt.csv")
        assert rows[-1] == ["offset", "500"]
        assert [r[1:] for r in rows[:-1]] == _expected(drv.port, 0, 500)
        assert all(r[0] == r[-1] for r in rows[:-1])                # arrival time = ingestTS
        # A later batch starts where one ended; at the end of the events it times out and says so.
        total = drv.buffer.total_events
        time.sleep(2.5)
        proc = probe(jar, "realtime", drv.port, SECRET, 500, total, 300, tmp_path / "rt2.csv")
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = _rows(tmp_path / "rt2.csv")
        assert rows[-1] == ["offset", str(total)] and len(rows) == total - 500 + 1


def test_the_writer_sends_each_streams_rows_to_the_sink(jar, tmp_path):
    schema = {"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("stream", "string"), ("strategy", "string"), ("ratio", "double"), ("price", "integer"),
                     ("inputTS", "long"), ("ingestTS", "long"))]}
    streams = {"Indicator": ["strategy", "ratio", "inputTS", "ingestTS"],
               "MarketOrder": ["strategy", "price", "inputTS", "ingestTS"]}
    lines = [f"Indicator,st_{i},{i / 3!r},,{1000 + i},{1001 + i}" if i % 3 else f"MarketOrder,st_{i},,{i},{1000 + i},"
             for i in range(3000)]
    (tmp_path / "rows.csv").write_text("\n".join(lines) + "\n")
    sink = SinkServer(tmp_path / "out", secret=SECRET)
    try:
        proc = probe(jar, "sink", sink.port, SECRET, json.dumps(schema), json.dumps(streams), tmp_path / "rows.csv")
        assert proc.returncode == 0, proc.stderr[-3000:]
        stats = sink.stats()
        assert stats["streams"] == {"Indicator": 2000, "MarketOrder": 1000} and stats["duplicates"] == 0
    finally:
        sink.finish({"run_start_wall_ms": 0, "sim_start_ms": 0, "speed": 1.0})
    ind = pq.read_table(tmp_path / "out" / "Indicator-00001.parquet")
    assert ind.column_names == ["strategy", "ratio", "inputTS", "ingestTS", "arrivalTS", "batchId"]
    assert sorted(ind.column("inputTS").to_pylist()) == [1000 + i for i in range(3000) if i % 3]
    assert ind.column("ratio").to_pylist()[0] == 1 / 3
    orders = pq.read_table(tmp_path / "out" / "MarketOrder-00001.parquet")
    assert orders.schema.field("price").type == pa.int32() and orders.column("ingestTS").null_count == 1000
    # A wrong secret: refused, in one line, and the task fails (a row is never dropped silently).
    wrong = SinkServer(tmp_path / "out2", secret=SECRET)
    try:
        proc = probe(jar, "sink", wrong.port, "0" * 32, json.dumps(schema), json.dumps(streams), tmp_path / "rows.csv")
        assert proc.returncode != 0 and "cepkit sink: sink at 127.0.0.1" in proc.stderr
    finally:
        wrong.finish(None)
