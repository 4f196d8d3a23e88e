"""The harness sink: stamping, files (Parquet, CSV, rolling, empty streams), the output log the
validator reads, latency statistics, duplicate batches and refusals. No Spark: a SinkClient in
this process sends to a SinkServer over loopback TCP, as the engine program's foreachBatch does.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.sink import LatencyHistogram, SinkServer
from kit.wire.sink_client import SinkClient, SinkError
from kit.errors import CepkitError
from kit.records import INDICATOR
from validator.outputlog import read_output_log

CLOCKS = {"run_start_wall_ms": 1_790_000_000_000, "sim_start_ms": 1_767_623_400_000, "speed": 2.0}


def rows(n: int, start: int = 0, input_ts: int | None = None) -> pa.Table:
    ids = np.arange(start, start + n)
    ts = np.full(n, input_ts if input_ts is not None else time.time_ns() // 1_000_000, dtype=np.int64)
    return pa.table({"key": pa.array([f"k{i % 3}" for i in ids], pa.string()),
                     "value": pa.array(ids * 0.5, pa.float64()),
                     "inputTS": pa.array(ts)})


@pytest.fixture(autouse=True)
def no_leaked_threads():
    yield
    left = [t.name for t in threading.enumerate() if t.name.startswith("sink-")]
    assert not left, f"sink threads left running: {left}"


def test_emitted_rows_are_stamped_and_logged_for_the_validator(tmp_path):
    out = tmp_path / "outputs"
    with SinkServer(out) as sink, SinkClient(port=sink.port) as client:
        before = time.time_ns() // 1_000_000
        assert client.emit("Main", 0, rows(5)) == 5
        assert client.emit("Main", 1, rows(0)) == 0          # an empty batch is fine
        assert client.emit("Main", 2, rows(3, start=5)) == 3
        assert client.emit("Side", 2, rows(2)) == 2
        after = time.time_ns() // 1_000_000
        stats = client.stats()
        assert stats["streams"] == {"Main": 8, "Side": 2} and stats["total_rows"] == 10
        assert before <= stats["last_arrival_ms"] <= after
        log_path = sink.finish(CLOCKS)
    assert log_path == out / "output-log.json"
    meta = json.loads(log_path.read_text())
    assert meta == {"kind": "cepkit.output-log", "schema_version": 1, "format": "parquet",
                    "run_start_wall_ms": CLOCKS["run_start_wall_ms"], "sim_start_ms": CLOCKS["sim_start_ms"],
                    "speed": 2.0, "pacing": "tickts", "streams": {"Main": {"files": ["Main-00001.parquet"]},
                                              "Side": {"files": ["Side-00001.parquet"]}}}
    log = read_output_log(out)
    main = log.stream("Main")
    assert main["value"].tolist() == [i * 0.5 for i in range(8)]           # arrival order kept
    assert main["batchId"].tolist() == [0] * 5 + [2] * 3
    assert ((main["arrivalTS"] >= before) & (main["arrivalTS"] <= after)).all()
    # One arrival stamp per emitted frame.
    assert main.groupby("batchId")["arrivalTS"].nunique().tolist() == [1, 1]
    assert log.clocks.speed == 2.0


def test_files_roll_and_csv_has_a_header(tmp_path):
    out = tmp_path / "outputs"
    with SinkServer(out, fmt="csv", roll_rows=4) as sink, SinkClient(port=sink.port) as client:
        client.emit("S", 0, rows(3))
        client.emit("S", 1, rows(7, start=3))
        sink.finish(CLOCKS)
    files = json.loads((out / "output-log.json").read_text())["streams"]["S"]["files"]
    assert files == ["S-00001.csv", "S-00002.csv", "S-00003.csv"]
    assert [len((out / f).read_text().splitlines()) - 1 for f in files] == [4, 4, 2]
    assert (out / files[0]).read_text().splitlines()[0] == '"key","value","inputTS","arrivalTS","batchId"'
    df = read_output_log(out).stream("S")
    assert df["value"].tolist() == [i * 0.5 for i in range(10)]


def test_parquet_rolls_across_flushes_with_one_row_group_per_flush(tmp_path):
    out = tmp_path / "outputs"
    with SinkServer(out, roll_rows=5) as sink, SinkClient(port=sink.port) as client:
        for b in range(4):
            client.emit("S", b, rows(3, start=3 * b))
        sink.finish(CLOCKS)
    files = sorted(out.glob("S-*.parquet"))
    assert [pq.ParquetFile(f).metadata.num_rows for f in files] == [5, 5, 2]
    assert pa.concat_tables([pq.read_table(f) for f in files]).column("value").to_pylist() == \
        [i * 0.5 for i in range(12)]


def test_buffered_rows_reach_the_disk_within_a_second_or_two(tmp_path):
    out = tmp_path / "outputs"
    with SinkServer(out) as sink, SinkClient(port=sink.port) as client:
        client.emit("S", 0, rows(10))
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and not (out / "S-00001.parquet").exists():
            time.sleep(0.05)
        # The row group is on disk while the run goes on (the footer only comes at finish).
        path = out / "S-00001.parquet"
        while time.monotonic() < deadline and path.stat().st_size < 200:
            time.sleep(0.05)
        assert path.stat().st_size >= 200
        sink.finish(CLOCKS)


def test_streams_without_rows_get_an_empty_file_with_their_schema(tmp_path):
    out = tmp_path / "outputs"
    schemas = {"Indicator": INDICATOR.arrow_schema(), "Quiet": pa.schema([("x", pa.int32())])}
    with SinkServer(out, streams=schemas) as sink:
        sink.finish({**CLOCKS, "speed": None})
    meta = json.loads((out / "output-log.json").read_text())
    assert list(meta["streams"]) == ["Indicator", "Quiet"]
    assert "speed" not in meta        # rate pacing: no wall/simulated relation; the reader defaults it
    empty = pq.read_table(out / "Indicator-00001.parquet")
    assert empty.num_rows == 0
    assert empty.schema.names == list(INDICATOR.names) + ["arrivalTS", "batchId"]
    log = read_output_log(out, {"Indicator": INDICATOR})
    assert len(log.stream("Indicator")) == 0 and len(log.stream("Quiet")) == 0


def test_latency_statistics_use_input_ts(tmp_path):
    with SinkServer(tmp_path / "o") as sink, SinkClient(port=sink.port) as client:
        now = time.time_ns() // 1_000_000
        client.emit("S", 0, rows(99, input_ts=now - 100))
        client.emit("S", 1, rows(1, input_ts=now - 5000))
        client.emit("T", 1, pa.table({"x": [1, 2]}))          # no inputTS: not in the latency
        lat = client.stats()["latency"]
        sink.finish(CLOCKS)
    assert lat["rows"] == 100
    assert 100 <= lat["p50_ms"] <= 100 + 2000 and lat["p50_ms"] == lat["p90_ms"]
    assert lat["max_ms"] == lat["p999_ms"] and lat["max_ms"] >= 5000


def test_latency_histogram_is_exact_below_ten_seconds():
    h = LatencyHistogram()
    h.add(np.arange(1, 1001))
    h.add(np.array([123_456]))
    s = h.summary()
    assert (s["p50_ms"], s["p99_ms"], s["min_ms"], s["max_ms"], s["rows"]) == (501, 991, 1, 123_456, 1001)


def test_a_batch_is_written_once_and_bad_emits_are_refused(tmp_path):
    with SinkServer(tmp_path / "o") as sink, SinkClient(port=sink.port) as client:
        assert client.emit("S", 7, rows(4)) == 4
        # A batch sent again (Spark re-running it, a resend after a lost answer) is not duplicated.
        assert client.emit("S", 7, rows(4)) == 0
        with pytest.raises(SinkError, match="sink at 127.0.0.1:.*stream must be a name"):
            client.emit("../evil", 8, rows(1))
        with pytest.raises(SinkError, match="arrivalTS.*stamp"):
            client.emit("S", 8, rows(1).append_column("arrivalTS", pa.array([1], pa.int64())))
        with pytest.raises(SinkError, match="unlike the stream's earlier batches"):
            client.emit("S", 9, pa.table({"other": [1]}))
        assert client.stats()["streams"] == {"S": 4}
        sink.finish(CLOCKS)
    with pytest.raises(SinkError, match="unreachable"):
        SinkClient(port=sink.port, reconnect_s=0.2).emit("S", 10, rows(1))


def test_declared_columns_must_be_present_and_the_first_refusal_is_kept_for_the_run(tmp_path):
    with SinkServer(tmp_path / "o", streams={"S": pa.schema([("key", pa.string()), ("z", pa.int64())])}) as sink, \
            SinkClient(port=sink.port) as client:
        assert sink.refused_output is None
        client.emit("S", 0, rows(1).append_column("z", pa.array([1], pa.int64())))
        assert sink.refused_output is None
        with pytest.raises(SinkError, match="missing column.*z"):
            client.emit("S", 1, rows(1))
        with pytest.raises(SinkError, match="stream must be a name"):
            client.emit("../evil", 2, rows(1))
        # The first refusal is the one the run ends with (harness/engine_run.py: no restart).
        assert sink.refused_output.startswith("emit S: missing column(s) z")
        sink.finish(CLOCKS)


def test_an_existing_output_log_is_never_overwritten(tmp_path):
    out = tmp_path / "outputs"
    with SinkServer(out) as sink, SinkClient(port=sink.port) as client:
        client.emit("S", 0, rows(2))
        sink.finish(CLOCKS)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(CepkitError, match="output-log.json: an output log is already there"):
        SinkServer(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    with pytest.raises(CepkitError, match="format"):
        SinkServer(tmp_path / "x", fmt="json")
