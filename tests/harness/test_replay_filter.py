"""The sink drops the answers a restored engine sends again, and nothing else
(harness/replay_filter.py, harness/sink.py with epoch-tagged emits)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from harness.replay_filter import ReplayFilter, identity_hashes
from harness.sink import SinkServer
from kit.wire.sink_client import SinkClient


def _rows(*rows) -> pa.Table:
    """(id, inputTS, value) rows; value is a double (left out of the identity)."""
    ids, ts, values = zip(*rows) if rows else ((), (), ())
    return pa.table({"id": pa.array(ids, pa.int64()), "inputTS": pa.array(ts, pa.int64()),
                     "value": pa.array(values, pa.float64())})


def test_identity_leaves_out_doubles_and_the_stamps():
    a = identity_hashes(_rows((1, 10, 0.1), (2, 20, 0.2)), ())
    b = identity_hashes(_rows((1, 10, 0.1 + 1e-16), (2, 21, 0.2)), ())
    assert a[0] == b[0] and a[1] != b[1]


def test_a_new_epoch_drops_each_earlier_answer_once_since_the_cut():
    f = ReplayFilter(())
    f.admit("s", "1.0", _rows((1, 10, 1.0)), 1_000)            # before the checkpoint: never replayed
    f.checkpoint_completed(2_000)
    f.admit("s", "1.0", _rows((2, 20, 1.0), (3, 30, 1.0), (3, 30, 1.0)), 2_500)
    # The restored job sends again 2, 3, 3 (sums regrouped: another double) and then new answers;
    # 1 is not dropped: it came before the restored checkpoint, so a new 1 is a new answer.
    out = f.admit("s", "2.0", _rows((1, 10, 1.0), (2, 20, 1.5), (3, 30, 1.0)), 3_000)
    assert out.column("id").to_pylist() == [1] and f.dropped == 2
    out = f.admit("s", "2.0", _rows((3, 30, 1.0), (3, 30, 1.0), (4, 40, 1.0)), 3_100)
    assert out.column("id").to_pylist() == [3, 4] and f.dropped == 3
    assert "s" not in f.matching        # every earlier answer matched: comparing ends
    assert f.admit("s", "2.0", _rows((2, 20, 1.0)), 3_200).num_rows == 1


def test_comparing_ends_once_the_replay_is_past_the_earlier_epoch():
    f = ReplayFilter(())
    f.admit("s", "1.0", _rows((5, 50, 1.0), (6, 60, 1.0)), 1_000)
    assert f.admit("s", "2.0", _rows((5, 50, 1.0)), 2_000).num_rows == 0
    assert f.admit("s", "2.0", _rows((7, 70, 1.0)), 2_100).num_rows == 1      # past inputTS 60
    assert f.matching["s"].caught_up == {""}
    assert f.admit("s", "2.0", _rows((6, 60, 1.0)), 2_200).num_rows == 1      # no longer compared


def test_each_sender_replays_at_its_own_pace():
    # Two subtasks: a's keys 1, 2; b's keys 5, 6. After the restore a catches up first; b's replay,
    # later, is still dropped (one sender past the earlier generation says nothing of another).
    f = ReplayFilter(())
    f.admit("s", "1.0.0", _rows((1, 10, 1.0), (2, 60, 1.0)), 1_000)
    f.admit("s", "1.0.1", _rows((5, 20, 1.0), (6, 50, 1.0)), 1_000)
    assert f.admit("s", "1.1.0", _rows((1, 10, 1.0), (2, 60, 1.0)), 2_000).num_rows == 0
    assert f.admit("s", "1.1.0", _rows((3, 70, 1.0)), 2_100).num_rows == 1    # a is past inputTS 60
    out = f.admit("s", "1.1.1", _rows((5, 20, 1.0), (6, 50, 1.0), (7, 80, 1.0)), 2_500)
    assert out.column("id").to_pylist() == [7] and f.dropped == 4 and "s" not in f.matching


def test_a_late_send_of_an_earlier_generation_is_an_original():
    # The cancelled attempt's last send arrives after the restored one began: its rows are answers
    # the restored job will send again, so they are dropped then; the generation does not go back.
    f = ReplayFilter(())
    f.admit("s", "1.0.0", _rows((1, 10, 1.0)), 1_000)
    assert f.admit("s", "1.1.0", _rows((1, 10, 1.0)), 2_000).num_rows == 0
    assert f.admit("s", "1.0.1", _rows((5, 20, 1.0)), 2_050).num_rows == 1    # late, kept
    assert f.generation["s"] == ((0, 1), (0, 1))
    assert f.admit("s", "1.1.1", _rows((5, 20, 1.0), (8, 30, 1.0)), 2_100).column("id").to_pylist() == [8]


def test_the_sink_keeps_every_answer_once_across_epochs(tmp_path):
    schema = _rows().schema
    with SinkServer(tmp_path / "out", streams={"s": schema}, replay_filter=True) as sink:
        first = SinkClient(port=sink.port, epoch="1.0")
        assert first.emit("s", 0, _rows((1, 10, 1.0), (2, 20, 1.0))) == 2
        assert first.emit("s", 0, _rows((1, 10, 1.0))) == 0                  # a resend: same epoch, same id
        again = SinkClient(port=sink.port, epoch="2.0")
        assert again.emit("s", 0, _rows((2, 20, 1.0), (3, 30, 1.0))) == 1    # id 0 again, in a new epoch
        stats = sink.stats()
        assert stats["replayed_rows_dropped"] == 1 and stats["duplicates"] == 1
        first.close()
        again.close()
        log = sink.finish({"run_start_wall_ms": 0, "sim_start_ms": 0, "speed": 1.0})
    table = pq.read_table(next(log.parent.glob("s-*.parquet")))
    assert sorted(table.column("id").to_pylist()) == [1, 2, 3]


def test_without_epochs_the_sink_is_as_before(tmp_path):
    with SinkServer(tmp_path / "out", replay_filter=True) as sink:
        c = SinkClient(port=sink.port)
        assert c.emit("s", 0, _rows((1, 10, 1.0))) == 1
        assert c.emit("s", 0, _rows((1, 10, 1.0))) == 0
        assert c.emit("s", 1, _rows((1, 10, 1.0))) == 1                      # no epoch: nothing compared
        c.close()
        sink.finish(None)
