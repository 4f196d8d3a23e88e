"""The driver's splits (specs/DRIVER.md, "Splits"): K parallel readers share the feed in blocks of B
offsets; the driver follows each split's position and commits the least of them, answers a
restored job's `reads` by the least split, and gives caught-up splits the last released TS for
their watermark. Old (unsplit) commits and reads keep their rules (test_driver_serving.py)."""

from __future__ import annotations

import time

import pytest

from harness.buffer import split_position
from harness.config import DriverConfig
from harness.playback import Driver
from kit.wire.feed_client import DriverClient
from kit.wire.protocol import BadRequestError
from tests.helpers import FAST

pytestmark = pytest.mark.usefixtures("no_leaked_threads")


def _ms() -> int:
    time.sleep(0.01)
    return time.time_ns() // 1_000_000


def test_a_splits_position_is_the_first_offset_it_owns_at_or_after_a_read():
    # Blocks of 10, 3 splits: split 0 owns [0, 10), [30, 40), ...; split 2 owns [20, 30), [50, 60).
    assert [split_position(x, 0, 3, 10) for x in (0, 5, 10, 29, 30, 31)] == [0, 5, 30, 30, 30, 31]
    assert [split_position(x, 2, 3, 10) for x in (0, 20, 25, 30, 59, 60)] == [20, 20, 25, 50, 59, 80]
    assert [split_position(x, 0, 1, 10) for x in (0, 7, 123)] == [0, 7, 123]


def test_the_commit_is_the_least_splits_position_and_only_once_every_split_has_one(ticks):
    cfg = DriverConfig(ticks, speed=50.0, chunk_rows=1000, hold=True, **FAST)
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        c.begin()
        assert drv.wait_finished(10)
        total = drv.dataset.total_rows
        c.commit(300, split=(1, 2))
        assert c.stats()["committed"] is None              # split 0 has said nothing yet
        c.commit(100, split=(0, 2))
        assert c.stats()["committed"] == 100
        c.commit(50, split=(0, 2))                         # a split's position never goes back
        c.commit(500, split=(0, 2))
        assert c.stats()["committed"] == 300
        c.commit(total + 1000, split=(1, 2))
        c.commit(total + 1000, split=(0, 2))
        assert c.stats()["committed"] == total            # capped at the released offset
        with pytest.raises(BadRequestError, match="2 splits, not 3"):
            c.commit(10, split=(0, 3))
        with pytest.raises(BadRequestError, match=r"split must be in \[0, splits\)"):
            c.commit(10, split=(2, 2))


def test_commits_by_time_and_reads_since_a_restore_follow_each_split(ticks):
    cfg = DriverConfig(ticks, speed=50.0, chunk_rows=1000, hold=True, **FAST)
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        c.begin()
        assert drv.wait_finished(10)
        total = drv.dataset.total_rows
        b = 100                                            # split 0: [0, 100), [200, 300), ...; split 1 the others
        _, head = c.read_once(0, 100, split=(0, 2, b))     # split 0 whole block: at 200 now
        assert head["rows"] == 100 and head["released"] == total and head["last_ts"] is not None
        c.read_once(100, 150, split=(1, 2, b))             # split 1 half its block: at 150
        trigger = _ms()
        c.read_once(150, 200, split=(1, 2, b))             # after the trigger: not covered
        assert c.commit_reads(trigger) == 150              # min(200, 150)
        restored = _ms()
        assert c.read_end_since(restored) == 0             # neither split has read again
        c.read_once(200, 300, split=(0, 2, b))             # split 0 reads again: at 400
        assert c.read_end_since(restored) == 0             # split 1 has not: the restored job has not read all
        c.read_once(150, 200, split=(1, 2, b))             # split 1: at 300
        assert c.read_end_since(restored) == 300
        # Every split reading to the end: the least position is capped at the released offset.
        pos = {0: 400, 1: 300}
        while min(pos.values()) < total:
            for i in (0, 1):
                if pos[i] < total:
                    _, h = c.read_once(pos[i], (pos[i] // b + 1) * b, split=(i, 2, b))
                    pos[i] = split_position(h["end"], i, 2, b)
        assert c.read_end_since(restored) == total
        assert c.commit_reads(_ms(), after_ms=restored) == total == c.stats()["committed"]


def test_a_split_read_says_the_last_released_ts_with_the_released_offset(ticks):
    cfg = DriverConfig(ticks, speed=50.0, chunk_rows=1000, hold=True, **FAST)
    with Driver(cfg) as drv, DriverClient(port=drv.port) as c:
        _, head = c.read_once(0, 10, split=(0, 1, 10))
        assert head["rows"] == 0 and head["released"] == 0 and head["last_ts"] is None
        c.begin()
        assert drv.wait_finished(10)
        total = drv.dataset.total_rows
        everything = c.read(0, total)
        _, head = c.read_once(0, 10, split=(0, 1, 10))
        assert head["released"] == total and head["last_ts"] == everything.column("TS")[-1].as_py()
        _, plain = c.read_once(0, 10)
        assert "last_ts" not in plain                       # unsplit reads answer as before
        with pytest.raises(BadRequestError, match="block must be >= 1"):
            c.read_once(0, 10, split=(0, 1, 0))
