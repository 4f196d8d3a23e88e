"""The Pairs plans on Flink: partial aggregates in the feed, buckets of strategies in a keyed function.

The same logic as on Spark (runtime_common: pairs_partials, pairs_bucket, pairs_strategies, the
words of specs/PAIRS_SEMANTICS.md), placed the Flink way:
- the feed's puller (flink_runtime/feed.py) reduces each range of ticks it reads to partial
  aggregates per (granule, monitored symbol) plus clock rows, once for all strategies, and cuts
  them by bucket: one chunk Row `(key, seq, payload)` per bucket and range, so ticks never cross
  into the JVM;
- `key_by(key)` spreads the buckets (whole correlated pairs) over the job's parallel instances of
  `BucketFunction`, a `KeyedProcessFunction` that advances its bucket over each chunk, in range
  order (one upstream task keeps a key's order), with the bucket's two state records in Flink
  keyed value state (checkpointed with the job), and sends its Indicator and MarketOrder rows to
  the harness sink itself (flink_runtime/emitter.py says why).
A chunk plays the part of a Spark micro-batch for the bucket logic: any range of ticks works,
since granules and periods carry over in the `open` state. Plans: "keyed" (buckets over the
parallel instances), "shared" (one bucket, one key: every strategy in one task). The
"per-strategy" plan of the Spark translation, one independent pipeline per strategy, is the same
"shared" logic per strategy; on Flink it is the keyed plan with one bucket per strategy's pair.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

from flink_runtime.emitter import sink_client
from runtime_common.outputs import split_streams
from runtime_common.pairs_bucket import OUTPUT_SCHEMA, OUTPUT_STREAMS, PairsBucket
from runtime_common.pairs_partials import Layout

PLANS = ("keyed", "shared", "per-strategy")
# The feed reads a range at most this often: a bucket's work per range is mostly fixed (~ms), so
# ranges of a handful of ticks would cost more than the ticks (measured in specs/TRANSLATION.md).
CHUNK_MS = 50
_ARROW = {"string": pa.string(), "double": pa.float64(), "int": pa.int32(), "long": pa.int64()}
OUTPUT_ARROW = pa.schema([pa.field(n, _ARROW[t]) for n, t in (c.split() for c in OUTPUT_SCHEMA.split(", "))])


def spread_keys(buckets: int, parallelism: int, max_parallelism: int) -> tuple[int, ...]:
    """Bucket keys that Flink's key groups put on every parallel instance in turn: bucket i on
    instance i mod parallelism. Keys 0, 1, ... do not spread: PyFlink keys by `Row(k)`, and
    `KeyGroupRangeAssignment` puts Row(0) and Row(1) on the same one of two instances (measured:
    the keyed plan ran every bucket in one task). The assignment is Flink's own, asked of the JVM."""
    from pyflink.java_gateway import get_gateway

    gateway = get_gateway()
    assign = gateway.jvm.org.apache.flink.runtime.state.KeyGroupRangeAssignment.assignKeyToParallelOperator
    row_of = gateway.jvm.org.apache.flink.types.Row.of

    def instance(k: int) -> int:
        fields = gateway.new_array(gateway.jvm.java.lang.Object, 1)
        fields[0] = k
        return assign(row_of(fields), max_parallelism, parallelism)

    free: dict[int, list[int]] = {}
    keys, k = [], 0
    for i in range(buckets):
        want = i % parallelism
        while not free.get(want):
            free.setdefault(instance(k), []).append(k)
            k += 1
        keys.append(free[want].pop(0))
    return tuple(keys)


class BucketChunks:
    """The feed's transform: a range of ticks to `{bucket key: partial rows (Arrow)}`."""

    def __init__(self, strategies: tuple, buckets: int, keys: tuple[int, ...] | None = None):
        self.strategies, self.buckets, self.keys = strategies, buckets, keys
        self._layout = None

    @property
    def layout(self) -> Layout:
        if self._layout is None:
            self._layout = Layout(self.strategies, self.buckets, self.keys)
        return self._layout

    def __getstate__(self):
        return {"strategies": self.strategies, "buckets": self.buckets, "keys": self.keys}

    def __setstate__(self, state):
        self.strategies, self.buckets, self._layout = state["strategies"], state["buckets"], None
        self.keys = state.get("keys")

    def __call__(self, ticks: pa.Table) -> dict:
        partials = self.layout.partials(ticks)
        keys = partials.column("key")
        return {int(k): partials.filter(pc.equal(keys, k)) for k in pc.unique(keys).to_pylist()}


class _FlinkStore:
    """pairs_bucket.Store over Flink value states (the records pickled)."""

    def __init__(self, states: dict):
        self.states = states

    def get(self, name):
        return self.states[name].value()

    def put(self, name, value):
        self.states[name].update(value)


class BucketFunction(KeyedProcessFunction):
    """One bucket of strategies per key, over the feed's chunks (see the module doc)."""

    def __init__(self, chunks: BucketChunks, sink_host: str, sink_port: int, attempt: int = 1,
                 secret: str | None = None):
        self.chunks, self.sink_host, self.sink_port = chunks, sink_host, int(sink_port)
        self.attempt = int(attempt)
        self.secret = secret        # the run's, pickled with the function: its worker may be on another host

    def open(self, runtime_context) -> None:
        layout = self.chunks.layout
        self.logic = {k: PairsBucket(b, layout.granule_ms) for k, b in zip(layout.keys, layout.buckets)}
        self.n_keys = len(layout.keys)
        self.index = {k: i for i, k in enumerate(layout.keys)}
        self.store = _FlinkStore({name: runtime_context.get_state(ValueStateDescriptor(name, Types.PICKLED_BYTE_ARRAY()))
                                  for name in ("open", "books")})
        self.sink = sink_client(self.sink_host, self.sink_port, self.attempt, runtime_context, self.secret)

    def close(self) -> None:
        self.sink.close()

    def process_element(self, chunk, ctx):
        key, seq, partials = int(chunk[0]), int(chunk[1]), chunk[2]
        out = self.logic[key].process(self.store, partials.to_pandas())
        if len(out):
            table = pa.Table.from_pandas(out, schema=OUTPUT_ARROW, preserve_index=False)
            for stream, part in split_streams(table, OUTPUT_STREAMS).items():
                # One id per (range, bucket): a range's outputs of each bucket are one batch.
                self.sink.emit(stream, seq * self.n_keys + self.index[key], part)
        return
        yield  # a generator with no output: the rows went to the sink


class PairsProgram:
    """What a generated Pairs program for Flink runs: `run_app(PROGRAM.build, ...)`.

    `buckets` (keyed plan): state keys, 0 for one per parallel instance and at least 2."""

    def __init__(self, strategies, plan: str, buckets: int = 0):
        if plan not in PLANS:       # the translator checked it against kit.config.PLANS
            raise ValueError(f"unknown Pairs plan {plan!r}")
        if buckets < 0:
            raise ValueError(f"buckets must be >= 0, got {buckets}")
        self.strategies = tuple(tuple(s) for s in strategies)
        self.plan, self.buckets = plan, buckets

    def _bucket_count(self, parallelism: int) -> int:
        if self.plan == "shared":
            return 1
        if self.plan == "per-strategy":
            return len(self.strategies)     # at most one per connected pair (Layout caps it)
        return self.buckets or max(2, parallelism)

    def build(self, job) -> dict:
        """The job: the feed's chunks by bucket into the bucket functions; returns the streams."""
        buckets = self._bucket_count(job.parallelism)
        chunks = BucketChunks(self.strategies, buckets,
                              spread_keys(buckets, job.parallelism, job.max_parallelism) if buckets > 1 else None)
        sink_host, sink_port = job.sink
        if hasattr(job, "why"):
            job.why.append("the Pairs plan reduces each range of ticks in Python")
        (job.feed(transform=chunks, interval_ms=CHUNK_MS)
            .key_by(lambda chunk: chunk[0], key_type=Types.INT())
            .process(BucketFunction(chunks, sink_host, sink_port, job.attempt, job.secret), output_type=Types.INT())
            .name("cepkit pairs buckets"))
        return OUTPUT_STREAMS
