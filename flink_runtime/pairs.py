"""The Pairs plans on Flink: the JVM plan (the default) and the Python plan (run.work = "python").

The same logic as on Spark (the words of specs/PAIRS_SEMANTICS.md), placed the Flink way
(specs/TRANSLATION.md, "The Flink programs", Pairs):

- the **JVM plan** (`run.work` "engine", "operators" or "jvm"; `cepkit.flink.PairsFlink`, with the
  Java Pairs logic Spark's real-time plan runs, runtime_common/java/cepkit/logic): the JVM feed
  source's ticks, one split, into a Java `ProcessFunction` chained to it that makes the partial
  rows per (granule, symbol) and the clock rows, `keyBy(bucket)`, a Java `KeyedProcessFunction`
  with the job's parallelism running each bucket's strategies with its state in Flink keyed state,
  and the JVM harness sink: every tick is handled by Flink's operators, no Python on the events' or
  the answers' way;
- the **Python plan** (`run.work = "python"`, or the kit's Python connectors): the feed's puller
  (flink_runtime/feed.py) reduces each range of ticks it reads to partial aggregates per (granule,
  monitored symbol) plus clock rows (runtime_common/pairs_partials.py), cut by bucket: one chunk
  Row `(key, seq, payload)` per bucket and range; `key_by(key)` spreads the buckets over the job's
  parallel instances of `BucketFunction`, a PyFlink `KeyedProcessFunction` that advances its bucket
  over each chunk in range order (runtime_common/pairs_bucket.py), with the bucket's two state
  records in Flink keyed value state, and sends its Indicator and MarketOrder rows to the harness
  sink itself (flink_runtime/emitter.py says why). A chunk plays the part of a Spark micro-batch
  for the bucket logic: any range of ticks works, since granules and periods carry over in the
  `open` state.

Plans of strategies over keys, in both: "keyed" (buckets over the parallel instances), "shared"
(one bucket, one key: every strategy in one task), "per-strategy" (one bucket per connected pair,
the finest the layout allows).
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
# run.work (kit.config.WORK_PLANS) -> the plan that runs: every family but "python" runs the JVM plan
# ("driver" is Spark's alone).
WORK = {"engine": "jvm", "operators": "jvm", "jvm": "jvm", "python": "python"}
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

    `buckets` (keyed plan): state keys, 0 for one per parallel instance and at least 2; `work`: the
    run's plan family (run.work), which picks the JVM or the Python plan (WORK)."""

    def __init__(self, strategies, plan: str, buckets: int = 0, work: str = "engine"):
        if plan not in PLANS:       # the translator checked it against kit.config.PLANS
            raise ValueError(f"unknown Pairs plan {plan!r}")
        if buckets < 0:
            raise ValueError(f"buckets must be >= 0, got {buckets}")
        if work not in WORK:
            raise ValueError(f"run.work {work!r}: Flink's Pairs plans are {', '.join(WORK)}")
        self.strategies = tuple(tuple(s) for s in strategies)
        self.plan, self.buckets, self.work = plan, buckets, work

    def _bucket_count(self, parallelism: int) -> int:
        if self.plan == "shared":
            return 1
        if self.plan == "per-strategy":
            return len(self.strategies)     # at most one per connected pair (Layout caps it)
        return self.buckets or max(2, parallelism)

    def build(self, job) -> dict:
        """The job (the JVM plan, or the Python plan: see the module doc); returns the streams."""
        if WORK[self.work] == "jvm" and getattr(job, "connectors", "jvm") == "jvm":
            return self.build_jvm(job)
        if WORK[self.work] == "jvm" and hasattr(job, "why"):
            job.why.append("--connectors python: the Python plan (the JVM plan reads the JVM source)")
        return self.build_python(job)

    def build_jvm(self, job) -> dict:
        """The JVM plan: the feed's ticks through cepkit.flink.PairsFlink into the JVM harness sink."""
        import json

        from pyflink.datastream import DataStream
        from pyflink.java_gateway import get_gateway

        from flink_runtime.jvm import feed_stream, runtime_jar, sink_stream

        runtime_jar(required=True)
        buckets = self._bucket_count(job.parallelism)
        jvm = get_gateway().jvm
        streams = json.loads(jvm.cepkit.flink.PairsFlink.streamsJson())
        if {name: [c[0] for c in cols] for name, cols in streams.items()} != OUTPUT_STREAMS:
            raise RuntimeError(f"the Flink runtime jar's Pairs streams {streams} are not {OUTPUT_STREAMS}: "
                               "a jar of another cepkit version?")
        # One split: the partial rows need the feed's one order (PairsFlink's doc says why).
        ticks = feed_stream(job, (), 1)
        job.source_used = "jvm"
        if job.source_partitions > 1:
            job.why.append("the Pairs JVM plan reads the feed as one split (its partial rows need the feed's order)")
        answers = jvm.cepkit.flink.PairsFlink.plan(ticks._j_data_stream, json.dumps(self.strategies), buckets,
                                                   job.parallelism)
        sink_stream(job, DataStream(answers), 0, streams)      # the `stream` column is the first
        job.sink_used = "jvm"
        job.work = {"family": self.work,
                    "queries": {"pairs": f"JVM plan: JVM feed, one split -> partial rows (Java ProcessFunction, "
                                         f"one task) -> keyBy(bucket) -> buckets (Java KeyedProcessFunction, "
                                         f"{buckets} keys over {job.parallelism} subtasks, Flink keyed state) "
                                         f"-> JVM sink"}}
        return OUTPUT_STREAMS

    def build_python(self, job) -> dict:
        """The Python plan: the feed's chunks by bucket into the bucket functions."""
        buckets = self._bucket_count(job.parallelism)
        chunks = BucketChunks(self.strategies, buckets,
                              spread_keys(buckets, job.parallelism, job.max_parallelism) if buckets > 1 else None)
        sink_host, sink_port = job.sink
        if hasattr(job, "why"):
            job.why.append("the Pairs Python plan reduces each range of ticks in Python")
        (job.feed(transform=chunks, interval_ms=CHUNK_MS)
            .key_by(lambda chunk: chunk[0], key_type=Types.INT())
            .process(BucketFunction(chunks, sink_host, sink_port, job.attempt, job.secret), output_type=Types.INT())
            .name("cepkit pairs buckets"))
        job.work = {"family": self.work,
                    "queries": {"pairs": f"Python plan: the kit's Python puller makes partial rows per "
                                         f"{CHUNK_MS}-ms range -> keyBy(bucket) -> buckets (PyFlink "
                                         f"KeyedProcessFunction, {buckets} keys over {job.parallelism} subtasks, "
                                         f"Flink keyed state), each sending its answers"}}
        return OUTPUT_STREAMS
