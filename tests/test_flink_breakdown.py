"""Where a Flink run's time goes: flink_runtime/metrics.py (the program's sampler of Flink's REST
API), validator/flink_metrics.py (the samples summarised) and benchmarks/flink_breakdown.py (the
tables, the verdict, the chart).

Engine-free: the summary over sample lines captured from real runs (a short `cepkit pairs
--engine flink` run, and a tiny PyFlink job), and the poller against a stand-in JobManager that
serves REST answers captured from Flink 2.3. With `-m flink`: the poller against a real PyFlink job.
"""

from __future__ import annotations

import copy
import http.server
import json
import subprocess
import sys
import threading
import time

import pytest

from flink_runtime.metrics import MetricsPoller
from flink_runtime.rest import RestError
from tests.helpers import REPO
from validator.flink_metrics import (EMITTER, ENGINE, FEED, QUERY, VertexSummary, measured_window, roles, summarize,
                                     verdict)

# -- real samples ------------------------------------------------------------------------------------
# A tiny PyFlink 2.3 job (datagen 3,000 rows/s -> Python map -> key_by -> a Python process function
# looping 4,000 times a row -> map; parallelism 2; checkpoints every 3 s), sampled every 2 s by
# MetricsPoller with metrics.fetcher.update-interval 1 s: four consecutive samples. The third
# repeats the second's counters (the JobManager served its previous fetch), the datagen source's
# busy time is NaN in Flink (a legacy source), so None.
_SRC = "Source: src[1] -> TableToDataStream -> mapper, _stream_key_by_map_operator"


def _tiny(ts, src_out, busy, bp, idle, rin, completed, new):
    return {"event": "flink_metrics", "ts_ms": ts, "job_id": "ddeb795c7afd17ab970dc09710e8e9c0",
            "job_state": "RUNNING", "jm_now_ms": ts - 40,
            "vertices": [{"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": _SRC, "parallelism": 2, "status": "RUNNING",
                          "busy_ms": [None, None], "backpressured_ms": [0, 0], "idle_ms": [0, 0], "records_in": [0, 0],
                          "records_out": src_out},
                         {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "proc, last", "parallelism": 2,
                          "status": "RUNNING", "busy_ms": busy, "backpressured_ms": bp, "idle_ms": idle,
                          "records_in": rin, "records_out": [0, 0]}],
            "checkpoints": {"completed": completed, "failed": 1, "in_progress": 0, "restored": 0,
                            "latest": new[-1] if new else None, "new": new}}


def _ckpt(i, trigger, done, duration):
    return {"id": i, "status": "COMPLETED", "savepoint": False, "trigger_ts_ms": trigger, "completed_ts_ms": done,
            "duration_ms": duration, "size": 4212, "state_size": 4212}


TINY = [
    _tiny(1795706677316, [17008, 18000], [6814, 5419], [0, 0], [5008, 6403], [20471, 14537], 4,
          [_ckpt(4, 1795706674480, 1795706675310, 830)]),
    _tiny(1795706679352, [20036, 20500], [7453, 6296], [0, 0], [6425, 7582], [23693, 16843], 4, []),
    _tiny(1795706681404, [20036, 20500], [7453, 6296], [0, 0], [6425, 7582], [23693, 16843], 6,
          [_ckpt(5, 1795706677477, 1795706678104, 627), _ckpt(6, 1795706680478, 1795706680969, 491)]),
    _tiny(1795706683414, [26521, 27003], [9348, 7785], [0, 0], [8607, 10170], [30636, 21900], 6, []),
]


def test_the_shares_are_the_counters_differences_over_the_subtasks_time():
    b = summarize(TINY)
    src, proc = b.vertices
    assert [v.name for v in b.vertices] == [_SRC, "proc, last"]
    # busy: (9348-6814) + (7785-5419) = 4900 ms of (4900 + idle (8607-5008) + (10170-6403) = 7366) ms
    assert proc.busy == pytest.approx(4900 / (4900 + 7366))
    assert proc.backpressured == 0 and proc.idle == pytest.approx(7366 / 12266)
    assert proc.busiest_subtask == 0 and proc.busiest_subtask_busy == pytest.approx(2534 / (2534 + 3599))
    # three steps, one of which did not move (the same fetch served twice): two points of the timeline
    assert proc.points == 2 and [round(t, 1) for t, _, _ in b.timeline["proc, last"]] == [1.0, 4.1]
    # records per second of the subtasks' own time (6,133 ms each from the first sample to the last),
    # or of the samples' wall time for a vertex whose time is not measured
    assert proc.records_in_per_s == pytest.approx(((30636 - 20471) + (21900 - 14537)) / 6.133)
    seconds = (TINY[-1]["ts_ms"] - TINY[0]["ts_ms"]) / 1000
    assert src.records_out_per_s == pytest.approx(((26521 - 17008) + (27003 - 18000)) / seconds)
    # a legacy source's busy time is not measured: no shares, no verdict on it
    assert src.busy is None and src.busiest_subtask_busy is None and src.points == 0
    assert b.verdict.kind == "headroom" and b.verdict.vertex == "proc, last"   # 41 % busy at most
    assert b.samples == 4 and b.jobs == 1 and b.seconds == pytest.approx(6.098)


def test_checkpoints_are_counted_once_and_savepoints_left_out():
    events = copy.deepcopy(TINY)
    events[3]["checkpoints"]["new"] = [dict(_ckpt(7, 1795706683000, 1795706683100, 100), savepoint=True)]
    c = summarize(events).checkpoints
    assert c.count == 3 and c.duration_p50_ms == 627 and c.duration_max_ms == 830 and c.size_max == 4212
    assert c.failed == 0        # the count of failures did not move in the measured part


# -- a real cepkit run ---------------------------------------------------------------------------------
# Lines of logs/engine.stdout.jsonl of a real run: `cepkit pairs --engine flink -c
# tests/data/configs/short-pairs.toml --master 'local[2]' --set 'run.spark_conf=["metrics.fetcher.update-interval=1 s"]'`
# (SF 1, ~25k ticks/s on average; PyFlink 2.3, the 2-core machine): `started`, the samples from
# 2 s before the run start (1795707760000, run.json) to 8 s after it, `finished`. The fourth sample
# repeats the third's figures; both Pairs buckets (keys 0 and 1) went to subtask 0.
PAIRS_RUN_START = 1795707760000
PAIRS = [json.loads(line) for line in r"""
{"event": "started", "flink_version": "2.3.0", "engine": "flink", "query_id": "4f8c7e0d6b66535483ddab97d816263a", "run_id": "4f8c7e0d6b66535483ddab97d816263a", "pid": 15686, "master": "local[2]", "parallelism": 2, "rest_url": "http://127.0.0.1:46677", "attempt": 1, "restored_from": null, "streams": {"Indicator": ["strategy", "ratio", "avgRatio", "upperBand", "lowerBand", "inputTickTS", "inputTS", "ingestTS"], "MarketOrder": ["strategy", "type", "symbol", "price", "size", "inputTickTS", "inputTS", "ingestTS"]}, "harness_ts_ms": 1795707757328}
{"event": "flink_metrics", "ts_ms": 1795707759566, "job_id": "4f8c7e0d6b66535483ddab97d816263a", "job_state": "RUNNING", "jm_now_ms": 1795707759568, "vertices": [{"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": "Source: cepkit_feed_trigger[1] -> TableToDataStream -> _stream_key_by_map_operator", "parallelism": 2, "status": "RUNNING", "busy_ms": [null, null], "backpressured_ms": [0, 0], "idle_ms": [0, 0], "records_in": [0, 0], "records_out": [2, 2]}, {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "cepkit feed, _stream_key_by_map_operator", "parallelism": 1, "status": "RUNNING", "busy_ms": [943], "backpressured_ms": [0], "idle_ms": [1746], "records_in": [6], "records_out": [0]}, {"id": "80fe6c4f32f605d447b391cdb16cc1ff", "name": "cepkit pairs buckets", "parallelism": 2, "status": "RUNNING", "busy_ms": [64, 33], "backpressured_ms": [0, 0], "idle_ms": [2635, 2641], "records_in": [0, 0], "records_out": [0, 0]}], "checkpoints": {"completed": 1, "failed": 1, "in_progress": 0, "restored": 0, "latest": {"id": 1, "status": "COMPLETED", "savepoint": false, "trigger_ts_ms": 1795707756922, "completed_ts_ms": 1795707757243, "duration_ms": 321, "size": 8553, "state_size": 8553}, "new": []}, "harness_ts_ms": 1795707759596, "attempt": 1}
{"event": "flink_metrics", "ts_ms": 1795707761647, "job_id": "4f8c7e0d6b66535483ddab97d816263a", "job_state": "RUNNING", "jm_now_ms": 1795707761651, "vertices": [{"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": "Source: cepkit_feed_trigger[1] -> TableToDataStream -> _stream_key_by_map_operator", "parallelism": 2, "status": "RUNNING", "busy_ms": [null, null], "backpressured_ms": [0, 0], "idle_ms": [0, 0], "records_in": [0, 0], "records_out": [5, 5]}, {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "cepkit feed, _stream_key_by_map_operator", "parallelism": 1, "status": "RUNNING", "busy_ms": [1599], "backpressured_ms": [0], "idle_ms": [3197], "records_in": [10], "records_out": [52]}, {"id": "80fe6c4f32f605d447b391cdb16cc1ff", "name": "cepkit pairs buckets", "parallelism": 2, "status": "RUNNING", "busy_ms": [487, 37], "backpressured_ms": [0, 0], "idle_ms": [4317, 4740], "records_in": [52, 0], "records_out": [0, 0]}], "checkpoints": {"completed": 1, "failed": 1, "in_progress": 0, "restored": 0, "latest": {"id": 1, "status": "COMPLETED", "savepoint": false, "trigger_ts_ms": 1795707756922, "completed_ts_ms": 1795707757243, "duration_ms": 321, "size": 8553, "state_size": 8553}, "new": []}, "harness_ts_ms": 1795707761713, "attempt": 1}
{"event": "flink_metrics", "ts_ms": 1795707763652, "job_id": "4f8c7e0d6b66535483ddab97d816263a", "job_state": "RUNNING", "jm_now_ms": 1795707763657, "vertices": [{"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": "Source: cepkit_feed_trigger[1] -> TableToDataStream -> _stream_key_by_map_operator", "parallelism": 2, "status": "RUNNING", "busy_ms": [null, null], "backpressured_ms": [0, 0], "idle_ms": [0, 0], "records_in": [0, 0], "records_out": [5, 5]}, {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "cepkit feed, _stream_key_by_map_operator", "parallelism": 1, "status": "RUNNING", "busy_ms": [2545], "backpressured_ms": [0], "idle_ms": [4244], "records_in": [14], "records_out": [102]}, {"id": "80fe6c4f32f605d447b391cdb16cc1ff", "name": "cepkit pairs buckets", "parallelism": 2, "status": "RUNNING", "busy_ms": [1192, 33], "backpressured_ms": [0, 0], "idle_ms": [5596, 6730], "records_in": [102, 0], "records_out": [0, 0]}], "checkpoints": {"completed": 1, "failed": 1, "in_progress": 0, "restored": 0, "latest": {"id": 1, "status": "COMPLETED", "savepoint": false, "trigger_ts_ms": 1795707756922, "completed_ts_ms": 1795707757243, "duration_ms": 321, "size": 8553, "state_size": 8553}, "new": []}, "harness_ts_ms": 1795707763701, "attempt": 1}
{"event": "flink_metrics", "ts_ms": 1795707765814, "job_id": "4f8c7e0d6b66535483ddab97d816263a", "job_state": "RUNNING", "jm_now_ms": 1795707765949, "vertices": [{"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": "Source: cepkit_feed_trigger[1] -> TableToDataStream -> _stream_key_by_map_operator", "parallelism": 2, "status": "RUNNING", "busy_ms": [null, null], "backpressured_ms": [0, 0], "idle_ms": [0, 0], "records_in": [0, 0], "records_out": [7, 7]}, {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "cepkit feed, _stream_key_by_map_operator", "parallelism": 1, "status": "RUNNING", "busy_ms": [2545], "backpressured_ms": [0], "idle_ms": [4244], "records_in": [14], "records_out": [102]}, {"id": "80fe6c4f32f605d447b391cdb16cc1ff", "name": "cepkit pairs buckets", "parallelism": 2, "status": "RUNNING", "busy_ms": [1192, 33], "backpressured_ms": [0, 0], "idle_ms": [5596, 6730], "records_in": [102, 0], "records_out": [0, 0]}], "checkpoints": {"completed": 1, "failed": 1, "in_progress": 0, "restored": 0, "latest": {"id": 1, "status": "COMPLETED", "savepoint": false, "trigger_ts_ms": 1795707756922, "completed_ts_ms": 1795707757243, "duration_ms": 321, "size": 8553, "state_size": 8553}, "new": []}, "harness_ts_ms": 1795707766164, "attempt": 1}
{"event": "flink_metrics", "ts_ms": 1795707767892, "job_id": "4f8c7e0d6b66535483ddab97d816263a", "job_state": "RUNNING", "jm_now_ms": 1795707767897, "vertices": [{"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": "Source: cepkit_feed_trigger[1] -> TableToDataStream -> _stream_key_by_map_operator", "parallelism": 2, "status": "RUNNING", "busy_ms": [null, null], "backpressured_ms": [0, 0], "idle_ms": [0, 0], "records_in": [0, 0], "records_out": [11, 11]}, {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "cepkit feed, _stream_key_by_map_operator", "parallelism": 1, "status": "RUNNING", "busy_ms": [4633], "backpressured_ms": [0], "idle_ms": [6390], "records_in": [22], "records_out": [198]}, {"id": "80fe6c4f32f605d447b391cdb16cc1ff", "name": "cepkit pairs buckets", "parallelism": 2, "status": "RUNNING", "busy_ms": [2315, 36], "backpressured_ms": [0, 0], "idle_ms": [8706, 10960], "records_in": [198, 0], "records_out": [0, 0]}], "checkpoints": {"completed": 2, "failed": 1, "in_progress": 0, "restored": 0, "latest": {"id": 2, "status": "COMPLETED", "savepoint": false, "trigger_ts_ms": 1795707766916, "completed_ts_ms": 1795707766956, "duration_ms": 40, "size": 21382, "state_size": 21382}, "new": [{"id": 2, "status": "COMPLETED", "savepoint": false, "trigger_ts_ms": 1795707766916, "completed_ts_ms": 1795707766956, "duration_ms": 40, "size": 21382, "state_size": 21382}]}, "harness_ts_ms": 1795707767935, "attempt": 1}
{"event": "finished", "batches": null, "output_rows": 125, "end_offset": 754039, "last_batch_id": null, "harness_ts_ms": 1795707790911, "attempt": 1}
""".strip().splitlines()]


def test_a_pairs_run_s_breakdown():
    b = summarize(PAIRS, PAIRS_RUN_START)
    assert (b.start_ms, b.end_ms, b.samples, b.jobs) == (PAIRS_RUN_START, 1795707790911, 4, 1)   # the sample before: out
    trigger, feed, buckets = b.vertices
    assert trigger.roles == [FEED] and trigger.busy is None
    assert feed.name == "cepkit feed, _stream_key_by_map_operator" and feed.roles == [FEED] and feed.parallelism == 1
    assert feed.busy == pytest.approx((4633 - 1599) / ((4633 - 1599) + (6390 - 3197))) and feed.backpressured == 0
    assert feed.points == 2         # the repeated sample is no point
    # subtask 1 got no chunk: its busy time stepped back 1 ms (Flink derives it), counted as 0
    assert buckets.roles == [QUERY]
    assert buckets.busy == pytest.approx(1828 / (1828 + (8706 - 4317) + (10960 - 4740)))
    assert buckets.busiest_subtask == 0 and buckets.busiest_subtask_busy == pytest.approx(1828 / (1828 + 4389))
    assert buckets.records_in_per_s == pytest.approx((198 - 52) / ((6217 + 6219) / 2 / 1000))
    assert feed.records_out_per_s == pytest.approx((198 - 52) / 6.227)       # its one subtask: 3,034 + 3,193 ms
    c = b.checkpoints
    assert (c.count, c.duration_p50_ms, c.duration_max_ms, c.size_max, c.failed) == (1, 40, 40, 21382, 0)
    assert b.verdict.kind == "headroom" and b.verdict.vertex == feed.name and "the kit's feed" in b.verdict.text


def test_the_kit_s_operators_are_named_by_role():
    assert roles("cepkit feed") == [FEED]
    assert roles("Source: cepkit_feed_trigger[1] -> TableToDataStream -> _stream_key_by_map_operator") == [FEED]
    assert roles("cepkit pairs buckets") == [QUERY]
    assert roles("cepkit sink: q1") == [EMITTER]
    assert roles("Calc[5] -> TableToDataStream -> cepkit sink: q1") == [EMITTER, ENGINE]
    # a micro program's feed, chained (as Flink 2.3 named it) with the SQL operators of a time window
    assert roles("cepkit feed, Filter, cepkit events -> DataStreamToTable -> Calc[4] -> WatermarkAssigner[5] -> "
                 "Calc[6] -> LocalWindowAggregate[7]") == [FEED, ENGINE]
    assert roles("proc, last") == [ENGINE]
    assert roles("GlobalWindowAggregate[12] -> Calc[13]") == [ENGINE]


def test_the_measured_part_starts_at_the_run_start_and_ends_at_finished():
    events = [{"event": "started", "harness_ts_ms": 100}, {"event": "progress", "input_rows": 0, "harness_ts_ms": 200},
              {"event": "progress", "input_rows": 5, "harness_ts_ms": 300}, {"event": "finished", "harness_ts_ms": 900}]
    assert measured_window(events) == (300, 900)
    assert measured_window(events, run_start_ms=250) == (250, 900)
    assert measured_window(events[:2]) == (None, None)


def test_samples_outside_the_measured_part_and_of_another_job_do_not_count():
    events = copy.deepcopy(TINY)
    # a restarted program's samples are of a new job: no pair spans two jobs
    for e in events[1:]:
        e["job_id"] = "another"
    b = summarize(events)
    proc = b.vertices[1]
    assert b.jobs == 2 and proc.points == 1      # (1, 2) did not move, (2, 3) counts
    busy = (9348 - 7453) + (7785 - 6296)
    assert proc.busy == pytest.approx(busy / (busy + (8607 - 6425) + (10170 - 7582)))
    # the run started after the first sample: it is left out
    late = summarize([*TINY, {"event": "finished", "harness_ts_ms": TINY[2]["ts_ms"]}], run_start_ms=TINY[1]["ts_ms"])
    assert late.samples == 2 and late.vertices[1].points == 0 and late.vertices[1].busy is None


def test_figures_flink_has_not_measured_yet_are_skipped():
    # a task's first metrics read NaN (None) until the JobManager's first fetch after it started
    events = copy.deepcopy(TINY)
    events[0]["vertices"][1]["busy_ms"] = [None, None]
    proc = summarize(events).vertices[1]
    busy = (9348 - 7453) + (7785 - 6296)
    assert proc.busy == pytest.approx(busy / (busy + (8607 - 6425) + (10170 - 7582))) and proc.points == 1
    # the records count from the first sample all the same (their clock: the samples' wall time)
    seconds = (TINY[-1]["ts_ms"] - TINY[0]["ts_ms"]) / 1000
    assert proc.records_in_per_s == pytest.approx(((30636 - 20471) + (21900 - 14537)) / seconds)


def _vertex(name, busy, bp=0.0, top=None):
    v = VertexSummary(name, roles(name), 2, 5, busy, bp, 1 - busy - bp, 0, busy if top is None else top)
    return v


def test_the_verdict_is_the_busiest_vertex_that_is_not_backpressured():
    feed = _vertex("cepkit feed", 0.35, bp=0.6)
    buckets = _vertex("cepkit pairs buckets", 0.7, top=0.95)
    v = verdict([feed, buckets])
    assert v.kind == "bottleneck" and v.vertex == "cepkit pairs buckets"
    assert "query logic" in v.text and "backpressured: 'cepkit feed' 60%" in v.text
    # the feed busy and nothing downstream pressing on it: the kit's feed is the bottleneck
    v = verdict([_vertex("cepkit feed", 0.9), _vertex("cepkit pairs buckets", 0.2)])
    assert v.kind == "bottleneck" and v.vertex == "cepkit feed" and "the kit's feed" in v.text
    assert verdict([_vertex("cepkit feed", 0.1), _vertex("cepkit sink: q1", 0.3)]).kind == "headroom"
    assert verdict([VertexSummary("x", [ENGINE], 1)]).kind == "unknown"


# -- the poller against a stand-in JobManager --------------------------------------------------------
# Flink 2.3's answers (trimmed: fields the poller does not read left out), from the tiny job above.
REST_JOB = {"jid": "11bc8bdeac575cbfce1ba5b1c0c3199e", "name": "explore", "state": "RUNNING", "now": 1795706431562,
            "vertices": [
                {"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": _SRC, "parallelism": 2, "status": "RUNNING",
                 "metrics": {"read-records": 0, "write-records": 42000, "accumulated-backpressured-time": 0,
                             "accumulated-idle-time": 0, "accumulated-busy-time": "NaN"}},
                {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "proc, last", "parallelism": 2, "status": "RUNNING",
                 "metrics": {"read-records": 42000, "write-records": 0, "accumulated-backpressured-time": 0,
                             "accumulated-idle-time": 32624, "accumulated-busy-time": 8915.0}}]}


def _subtask(i, busy, idle, rin, rout):
    return {"subtask": i, "status": "RUNNING", "attempt": 0,
            "metrics": {"read-bytes": 0, "read-bytes-complete": True, "read-records": rin, "write-records": rout,
                        "accumulated-backpressured-time": 0, "accumulated-idle-time": idle,
                        "accumulated-busy-time": busy}}


REST_VERTICES = {
    "cbc357ccb763df2852fee8c4fc7d55f2": {"id": "cbc357ccb763df2852fee8c4fc7d55f2", "name": _SRC, "parallelism": 2,
                                         "subtasks": [_subtask(1, "NaN", 0, 0, 21000), _subtask(0, "NaN", 0, 0, 21000)]},
    "306d8342cb5b2ad8b53f1be57f65bee8": {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "proc, last",
                                         "parallelism": 2, "subtasks": [_subtask(0, 3700.0, 15554, 17771, 0),
                                                                        _subtask(1, 5215.0, 17070, 24229, 0)]}}
_HISTORY = [{"className": "completed", "id": i, "status": "COMPLETED", "is_savepoint": False,
             "trigger_timestamp": 1795706408799 + 2000 * (i - 1), "latest_ack_timestamp": 1795706409011 + 2000 * (i - 1),
             "checkpointed_size": 4212, "state_size": 4212, "end_to_end_duration": 212 + i,
             "external_path": f"file:/tmp/fb-explore/ckpt/11bc8bdeac575cbfce1ba5b1c0c3199e/chk-{i}"}
            for i in (11, 10, 9)]
REST_CHECKPOINTS = {"counts": {"restored": 0, "total": 12, "in_progress": 0, "completed": 11, "failed": 1},
                    "latest": {"completed": _HISTORY[0], "savepoint": None, "failed": None, "restored": None},
                    "history": _HISTORY}
JID = REST_JOB["jid"]


class _JobManager(http.server.BaseHTTPRequestHandler):
    routes: dict = {}
    hang: set = set()

    def do_GET(self):   # noqa: N802 - http.server's name
        if self.path in self.hang:
            time.sleep(3)
        doc = self.routes.get(self.path)
        body = json.dumps(doc).encode() if doc is not None else b'{"errors": ["Not found"]}'
        try:
            self.send_response(200 if doc is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:     # the poller gave up on a hung answer and closed the connection
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def jobmanager():
    routes = {f"/jobs/{JID}": REST_JOB, f"/jobs/{JID}/checkpoints": REST_CHECKPOINTS,
              **{f"/jobs/{JID}/vertices/{vid}": doc for vid, doc in REST_VERTICES.items()}}
    handler = type("JM", (_JobManager,), {"routes": routes, "hang": set()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_the_poller_reads_flink_s_answers(jobmanager):
    base, _ = jobmanager
    poller = MetricsPoller(base, JID)
    s = poller.poll()
    json.dumps(s, allow_nan=False)       # JSON as the program prints it
    assert s["job_state"] == "RUNNING" and s["jm_now_ms"] == 1795706431562 and "errors" not in s
    src, proc = s["vertices"]
    assert src["name"] == _SRC and src["busy_ms"] == [None, None] and src["records_out"] == [21000, 21000]
    assert proc == {"id": "306d8342cb5b2ad8b53f1be57f65bee8", "name": "proc, last", "parallelism": 2,
                    "status": "RUNNING", "busy_ms": [3700, 5215], "backpressured_ms": [0, 0], "idle_ms": [15554, 17070],
                    "records_in": [17771, 24229], "records_out": [0, 0]}
    c = s["checkpoints"]
    assert (c["completed"], c["failed"], c["in_progress"]) == (11, 1, 0)
    assert c["latest"]["id"] == 11 and c["latest"]["duration_ms"] == 223 and c["latest"]["size"] == 4212
    assert [x["id"] for x in c["new"]] == [9, 10, 11]
    assert poller.poll()["checkpoints"]["new"] == []        # each checkpoint listed once


def test_a_failing_part_leaves_a_partial_sample(jobmanager):
    base, handler = jobmanager
    del handler.routes[f"/jobs/{JID}/vertices/306d8342cb5b2ad8b53f1be57f65bee8"]
    s = MetricsPoller(base, JID).poll()
    assert len(s["errors"]) == 1 and "proc, last" in s["errors"][0]
    proc = s["vertices"][1]
    assert "busy_ms" not in proc and proc["busy_ms_sum"] == 8915 and proc["idle_ms_sum"] == 32624
    assert summarize([{**s, "event": "flink_metrics", "ts_ms": 1}, {**s, "event": "flink_metrics", "ts_ms": 2}])


def test_the_poller_never_hangs(jobmanager):
    base, handler = jobmanager
    handler.hang.add(f"/jobs/{JID}/checkpoints")
    t0 = time.monotonic()
    s = MetricsPoller(base, JID, budget_s=1.0).poll()
    assert time.monotonic() - t0 < 2.0
    assert s["checkpoints"] is None and any("checkpoints" in e for e in s["errors"])
    with pytest.raises(RestError):
        MetricsPoller(base, "0" * 32).poll()        # no such job
    handler.hang.add(f"/jobs/{JID}")
    t0 = time.monotonic()
    with pytest.raises(RestError):
        MetricsPoller(base, JID, budget_s=0.5).poll()
    assert time.monotonic() - t0 < 1.5


# -- the script ------------------------------------------------------------------------------------------

def _run_dir(tmp_path, events, run_start_ms=None):
    engine = tmp_path / "run" / "engine"
    (engine / "logs").mkdir(parents=True)
    (engine / "logs" / "engine.stdout.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    if run_start_ms is not None:
        (engine / "run.json").write_text(json.dumps({"timings": {"run_start_wall_ms": run_start_ms}}))
    return engine


def _script(*args, cwd):
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "flink_breakdown.py"), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_script_prints_the_tables_and_the_verdict(tmp_path):
    engine = _run_dir(tmp_path, TINY)
    proc = _script(tmp_path / "run", "--chart", cwd=tmp_path)       # a pipeline's run directory: every engine below
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{engine}: 4 samples over 6 s")
    row = next(ln for ln in lines if ln.strip().startswith("proc, last"))
    assert "39.9%" in row and "0.0%" in row and "60.1%" in row and "the engine's own operators" in row
    assert any("checkpoints: 3, duration p50 627 ms, max 830 ms" in ln for ln in lines)
    verdict_line = next(ln.strip() for ln in lines if ln.strip().startswith("verdict: "))
    assert verdict_line.startswith("verdict: headroom: no operator busy half the time; the busiest is 'proc, last'")
    assert (engine / "flink_breakdown.png").stat().st_size > 10_000
    doc = json.loads(_script(engine, "--json", cwd=tmp_path).stdout)
    assert doc[str(engine)]["verdict"]["vertex"] == "proc, last"
    pairs = _run_dir(tmp_path / "pairs", PAIRS, run_start_ms=PAIRS_RUN_START)    # run.json's run start
    out = _script(pairs, cwd=tmp_path).stdout
    assert out.startswith(f"{pairs}: 4 samples over 6 s")
    assert "48.7%" in next(ln for ln in out.splitlines() if ln.strip().startswith("cepkit feed"))
    assert "verdict: headroom: no operator busy half the time; the busiest is 'cepkit feed, " in out
    spark = _run_dir(tmp_path / "spark", [{"event": "batch", "batch_id": 0}])
    proc = _script(spark, cwd=tmp_path)
    assert proc.returncode == 1 and "no flink_metrics lines" in proc.stderr


# -- a real PyFlink job ----------------------------------------------------------------------------------

JOB = r'''
import json, sys, time
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment, KeyedProcessFunction
from pyflink.table import EnvironmentSettings, StreamTableEnvironment
from flink_runtime.metrics import MetricsPoller
from flink_runtime.rest import rest_url

conf = Configuration()
for k, v in {"rest.bind-address": "127.0.0.1", "execution.checkpointing.interval": "2 s",
             "execution.checkpointing.dir": "file://" + sys.argv[1], "state.backend.type": "hashmap",
             "metrics.fetcher.update-interval": "1 s", "taskmanager.memory.process.size": "1g",
             "python.executable": sys.executable, "python.client.executable": sys.executable}.items():
    conf.set_string(k, v)
env = StreamExecutionEnvironment.get_execution_environment(conf)
env.set_parallelism(2)
tables = StreamTableEnvironment.create(env, EnvironmentSettings.in_streaming_mode())
tables.execute_sql("CREATE TEMPORARY TABLE src (n INT) WITH ('connector' = 'datagen', 'rows-per-second' = '2000', "
                   "'fields.n.min' = '0', 'fields.n.max' = '99')")

class Work(KeyedProcessFunction):
    def process_element(self, value, ctx):
        s = 0
        for i in range(2000):
            s += i
        yield value

(tables.to_data_stream(tables.from_path("src")).map(lambda r: r[0], output_type=Types.INT()).name("mapper")
    .key_by(lambda v: v % 7, key_type=Types.INT()).process(Work(), output_type=Types.INT()).name("work"))
client = env.execute_async("metrics-test")
try:
    poller = MetricsPoller(rest_url(client), str(client.get_job_id()))
    for _ in range(8):
        time.sleep(2)
        t0 = time.monotonic()
        sample = poller.poll()
        print(json.dumps({"event": "flink_metrics", "ts_ms": time.time_ns() // 1_000_000, "poll_s": time.monotonic() - t0,
                          **sample}), flush=True)
finally:
    client.cancel().result()
'''


@pytest.mark.flink
def test_the_poller_against_a_real_flink_job(tmp_path):
    from harness.environments import checkout_root, engine_python

    proc = subprocess.run([engine_python("flink"), "-c", JOB, str(tmp_path / "ckpt")], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env={"PYTHONPATH": str(checkout_root())})
    assert proc.returncode == 0, proc.stderr[-3000:]
    samples = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith('{"event": "flink_metrics"')]
    assert len(samples) == 8
    for s in samples:
        json.dumps(s, allow_nan=False)
        assert s["job_state"] == "RUNNING" and "errors" not in s and s["poll_s"] < 3.0
        assert [v["parallelism"] for v in s["vertices"]] == [2, 2]
        assert all(len(v[k]) == 2 for v in s["vertices"] for k in ("busy_ms", "idle_ms", "records_in"))
    source, work = samples[-1]["vertices"]
    assert source["name"].startswith("Source: src") and work["name"] == "work"
    assert source["busy_ms"] == [None, None]            # a legacy source: Flink cannot tell
    # cumulative: never back
    for a, b in zip(samples, samples[1:]):
        for va, vb in zip(a["vertices"], b["vertices"]):
            for k in ("idle_ms", "records_in", "records_out"):
                assert all(y >= x for x, y in zip(va[k], vb[k]) if x is not None and y is not None)
    assert sum(work["records_in"]) > 5000 and all(x > 0 for x in work["busy_ms"])
    listed = [c["id"] for s in samples for c in s["checkpoints"]["new"]]
    assert listed and len(listed) == len(set(listed)) and samples[-1]["checkpoints"]["completed"] >= 3
    b = summarize(samples)
    w = b.vertices[1]
    assert w.points >= 4 and 0 < w.busy < 1 and w.records_in_per_s == pytest.approx(2000, rel=0.35)
    assert b.checkpoints.count >= 3 and b.verdict.kind in ("bottleneck", "busiest", "headroom")
