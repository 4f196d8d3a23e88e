"""The Flink runtime's pieces that need PyFlink's environment but no JVM, checked under the Flink
interpreter (`.venv-flink`): the master's parallelism, timestamps to epoch ms, the feed's chunks
for Pairs buckets and micro queries. The engine itself runs in the end-to-end tests."""

from __future__ import annotations

import subprocess

import pytest

from harness.environments import checkout_root, engine_python

pytestmark = pytest.mark.flink

CHECKS = r'''
import datetime as dt
import numpy as np, pyarrow as pa
from flink_runtime.app import parallelism_of
from flink_runtime.emitter import epoch_ms, arrow_schema
from flink_runtime.micro import MicroChunks, SQL_EVENTS
from flink_runtime.pairs import BucketChunks
from kit.errors import CepkitError
from runtime_common.pairs_partials import Layout

assert parallelism_of("local[3]") == 3 and parallelism_of("local[*]") >= 1
try:
    parallelism_of("yarn"); raise SystemExit("yarn accepted")
except CepkitError:
    pass
assert epoch_ms(dt.datetime(2026, 1, 1, 0, 0, 0, 123000)) == 1767225600123
assert epoch_ms(dt.datetime(2026, 1, 1, 1, 0, 0, 5000, tzinfo=dt.timezone(dt.timedelta(hours=1)))) == 1767225600005
assert arrow_schema([("a", "int"), ("w", "timestamp_ms")]).types == [pa.int32(), pa.int64()]

strategies = (("s1", "AAA", "BBB", 100000, 5, 3, 1.0, 0.1), ("s2", "CCC", "DDD", 100000, 5, 3, 1.0, 0.1))
n = 200
ticks = pa.table({"symbol": pa.array(np.array(["AAA", "BBB", "CCC", "DDD", "EEE"])[np.arange(n) % 5]),
                  "price": pa.array(np.arange(n, dtype=np.int32) + 100), "size": pa.array(np.ones(n, np.int32)),
                  "tickTS": pa.array(np.arange(n, dtype=np.int64) * 100), "TS": pa.array(np.arange(n, dtype=np.int64) * 100),
                  "offset": pa.array(np.arange(n, dtype=np.int64)), "ingestTS": pa.array(np.zeros(n, np.int64))})
chunks = BucketChunks(strategies, 2)(ticks)
whole = Layout(strategies, 2).partials(ticks)
assert sorted(chunks) == [0, 1]
assert sum(t.num_rows for t in chunks.values()) == whole.num_rows
assert all(set(t.column("key").to_pylist()) == {k} for k, t in chunks.items())

q = {"id": "q", "kind": "count_window", "inputs": ["S1"]}
events = pa.table({"ID": pa.array([1, 2], pa.int32()), "A1": [1.0, 2.0], "TS": [1, 2], "offset": [0, 1],
                   "ingestTS": [5, 6]})
out = MicroChunks((q,), True, "S1")(events)
assert out[SQL_EVENTS].column("stream").to_pylist() == ["S1", "S1"] and len(out[0]) == 2
print("ok")
'''


def test_the_runtime_pieces_under_the_flink_interpreter():
    python = engine_python("flink")
    proc = subprocess.run([python, "-c", CHECKS], capture_output=True, text=True, timeout=300,
                          cwd=checkout_root(), env={"PYTHONPATH": str(checkout_root())})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
