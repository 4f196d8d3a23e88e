"""The PySpark driver source, used directly (no Spark session): offsets, read limits, partition
splitting, replayable reads with offset and ingestTS, options and loud errors. The end-to-end
path through Spark is tests/harness/test_engine_run.py.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from datagen.pairs import generate_pairs
from kit.wire.feed_client import DriverClient
from harness.config import DriverConfig
from harness.playback import Driver
from kit.wire.protocol import OffsetEvictedError
from spark_runtime.source import (DriverSource, DriverStreamReader, OffsetRange, SourceOptions, spark_ddl,
                                  split_range)
from kit.errors import CepkitError
from tests.helpers import pairs_config

FAST = dict(lead_ms=20, align_ms=1)


@pytest.fixture(scope="module")
def ticks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("src") / "ticks"
    generate_pairs(pairs_config(rate={"profile": "constant", "duration_s": 2.0}), out)
    return out


def reader_for(port: int, **options) -> DriverStreamReader:
    source = DriverSource({"port": str(port), **{k: str(v) for k, v in options.items()}})
    return source.streamReader(None)


def read_all(reader: DriverStreamReader, start: int, end: int) -> pa.Table:
    # As Spark does it: plan the partitions, ship each (pickled) to a worker, read it there.
    parts = [pickle.loads(pickle.dumps(p)) for p in reader.partitions({"offset": start}, {"offset": end})]
    worker = pickle.loads(pickle.dumps(reader))
    return pa.Table.from_batches([b for p in parts for b in worker.read(p)])


def test_split_range_covers_the_range_contiguously():
    assert split_range(5, 5, 3) == []
    assert split_range(0, 2, 4) == [OffsetRange(0, 1), OffsetRange(1, 2)]
    parts = split_range(10, 111, 4)
    assert [(p.start, p.end) for p in parts] == [(10, 35), (35, 60), (60, 85), (85, 111)]
    assert split_range(0, 7, 1) == [OffsetRange(0, 7)]


def test_schema_is_the_drivers_columns_then_offset_and_ingest_ts(ticks):
    with Driver(DriverConfig(ticks, hold=True, **FAST)) as drv:
        source = DriverSource({"port": str(drv.port)})
        assert source.schema() == ("`symbol` STRING, `price` INT, `size` INT, `tickTS` BIGINT, `TS` BIGINT, "
                                   "`offset` BIGINT, `ingestTS` BIGINT")
    assert spark_ddl(pa.schema([("ID", pa.int32()), ("A1", pa.float64())])) == "`ID` INT, `A1` DOUBLE"


def test_offsets_limits_and_replayable_reads(ticks):
    with Driver(DriverConfig(ticks, speed=4.0, **FAST)) as drv:
        reader = reader_for(drv.port, partitions=3, maxRowsPerBatch=1000, waitMs=2000)
        assert reader.initialOffset() == {"offset": 0}
        assert reader.getDefaultReadLimit() == ReadMaxRows(1000)
        assert drv.wait_finished(10)
        total = drv.buffer.total_events
        # The option's cap applies through the default limit; a ReadAllAvailable ignores it.
        assert reader.latestOffset({"offset": 0}, ReadMaxRows(1000)) == {"offset": 1000}
        assert reader.latestOffset({"offset": 0}, ReadAllAvailable()) == {"offset": total}
        assert reader.reportLatestOffset() == {"offset": total}
        before = time.time_ns() // 1_000_000
        first = read_all(reader, 100, 2100)
        after = time.time_ns() // 1_000_000
        time.sleep(0.05)
        again = read_all(reader, 100, 2100)        # as a retried task reads it
        later = read_all(reader, 2100, 2200)
        want = DriverClient(port=drv.port).read(100, 2100)
        reader.commit({"offset": 2100})
        reader.stop()
    assert first.column_names == want.column_names + ["offset", "ingestTS"]
    assert first.column("offset").to_pylist() == list(range(100, 2100))
    # ingestTS included: a re-read is the first read, row for row (Spark compares a retried map
    # task's output with the first attempt's and fails the job on a difference).
    assert first.equals(again)
    assert all(first.column(c).equals(want.column(c)) for c in want.column_names)
    ingest = first.column("ingestTS").to_numpy()
    assert before <= ingest.min() and ingest.max() <= after
    assert (ingest >= first.column("TS").to_numpy()).all()     # pulled after it was due
    assert later.column("ingestTS").to_numpy().min() > after
    # Spark checks nullable flags too: every field is nullable, as in Spark's schema.
    assert all(f.nullable for f in first.schema)


def test_latest_offset_waits_for_events_then_answers_start(ticks):
    with Driver(DriverConfig(ticks, hold=True, **FAST)) as drv:
        reader = reader_for(drv.port, waitMs=150)
        t = time.monotonic()
        assert reader.latestOffset({"offset": 0}, ReadAllAvailable()) == {"offset": 0}
        assert time.monotonic() - t >= 0.14                    # long-polled, not spinning
        assert reader.partitions({"offset": 0}, {"offset": 0}) == []


def test_evicted_offsets_fail_loudly(ticks):
    # A tiny retention: by the end only the last chunk is kept.
    with Driver(DriverConfig(ticks, speed=20.0, chunk_rows=500, retain_bytes=1, **FAST)) as drv:
        assert drv.wait_finished(10)
        reader = reader_for(drv.port)
        with pytest.raises(OffsetEvictedError, match="offset 0 was evicted"):
            read_all(reader, 0, 10)


def test_bad_options_are_one_line_errors():
    with pytest.raises(CepkitError, match="option port: required"):
        SourceOptions.parse({})
    with pytest.raises(CepkitError, match="option partitions: must be >= 1"):
        SourceOptions.parse({"port": "1", "partitions": "0"})
    with pytest.raises(CepkitError, match="option waitMs: must be an integer"):
        SourceOptions.parse({"port": "1", "waitMs": "soon"})
    opts = SourceOptions.parse({"PORT": "7", "maxrowsperbatch": "5"})
    assert (opts.port, opts.max_rows_per_batch, opts.partitions, opts.wait_ms) == (7, 5, 1, 20)
    assert np.array_equal(np.array([p.start for p in split_range(0, 9, 3)]), [0, 3, 6])


def test_a_query_is_stalled_only_with_unread_events_no_batch_and_no_job():
    from spark_runtime.watch import STALL_S, is_stalled
    asked: list = []

    def idle():
        asked.append(1)
        return False

    assert is_stalled(1411, 1268, quiet_s=STALL_S, jobs_running=idle)               # the CI stall
    assert is_stalled(500, None, quiet_s=STALL_S + 1, jobs_running=idle)            # never got a first batch
    assert not is_stalled(1411, 1268, quiet_s=STALL_S, jobs_running=lambda: True)   # a long batch is working
    asked.clear()
    assert not is_stalled(1411, 1268, quiet_s=STALL_S - 1, jobs_running=idle)       # not long enough
    assert not is_stalled(1411, 1411, quiet_s=10 * STALL_S, jobs_running=idle)      # everything read: idle
    assert not is_stalled(0, None, quiet_s=10 * STALL_S, jobs_running=idle)         # nothing released yet
    assert not asked                    # the JVM is not asked on every poll, only when it decides
