"""The Pairs plans on Spark: the JVM plan (the default) and the Python plans (run.work = "python").

Why a stateful processor and not DataFrame operators: Spark has no count windows and no CEP
language. A period closes at the first tick of a later period *of any symbol*, in event order,
and the count window, the band crossings (which compare with the previous Indicator) and the
position machine are sequential over a strategy's history. Spark's time windows close on the
watermark instead, at a batch boundary, and cannot see the previous window's result. So the
strategies run in a keyed stateful processor (arbitrary state API v2), their state in Spark's
RocksDB state store, checkpointed with every batch.

Plan families (run.work, specs/TRANSLATION.md):
- the **JVM plan** ("engine", "operators", "jvm"; `cepkit.spark.PairsRealTime`, with the Java Pairs
  logic Flink's plan runs too, runtime_common/java/cepkit/logic): each source task turns the ticks
  of its offset range into partial rows per (granule, symbol) and clock rows (a Java
  `mapPartitions`), one shuffle by bucket, and a JVM `transformWithState` runs each bucket's
  strategies; in micro-batches and in Spark's real-time mode, no tick enters Python;
- the **Python plans** ("python"): the same steps in Spark's Python workers (the Python source's
  partition transform, runtime_common/pairs_partials.py; `transformWithStateInPandas` with
  runtime_common/pairs_bucket.py and pairs_strategies.py).

Plans of strategies over keys (run.plan):
- "keyed" (default): buckets of whole correlated pairs, one state key each, whose key values are
  picked to land on different shuffle partitions, so the strategies of a batch run in parallel
  tasks; the source's tasks make the partial rows, so no tick is shuffled;
- "shared": one key serves every strategy (one task). The Python plan sends it every tick, the
  shape of the plan before "keyed", kept to measure what spreading buys; the JVM plan is the keyed
  plan with one bucket;
- "per-strategy": the Python plan is one independent pipeline per strategy (projection, stateful
  operator) unioned into one output, as a naive engine would do it; the JVM plan is the keyed plan
  with a bucket per connected pair of strategies, the finest the layout allows.
All run the same logic; they differ only in where it runs.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import zlib
from typing import Iterator

import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from kit.errors import CepkitError
from runtime_common.pairs_bucket import OUTPUT_SCHEMA, OUTPUT_STREAMS, STATE_RECORDS, PairsBucket
from runtime_common.pairs_partials import PARTIAL_SCHEMA, TICK_COLUMNS, Layout
from spark_runtime.realtime import cap_shuffle_partitions, jvm_classes_present

PLANS = ("keyed", "shared", "per-strategy")
# run.work (kit.config.WORK_PLANS) -> the plan that runs: every family but "python" runs the JVM
# plan; "driver" has no Pairs plan (the translator refuses it).
WORK = {"engine": "jvm", "operators": "jvm", "jvm": "jvm", "python": "python"}
# Engine settings a Pairs program asks for (specs/TRANSLATION.md, "Where a batch's time goes"):
# the JIT's first tier only, since in a two-minute run of the Python plan the JVM spent a core
# compiling Spark's planning code with C2 and little of its time in hot loops (the ticks never
# enter it). The JVM plan keeps it, unmeasured: its per-tick work is a hash lookup and three
# additions.
SPARK_CONF = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
              "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


def _struct(fields) -> StructType:
    """A state record's Spark schema: longs, and vectors packed in binary fields (pairs_bucket)."""
    return StructType([StructField(name, LongType() if t == "long" else BinaryType()) for name, t in fields])


class _Strategies:
    """The program's strategy tuples with a digest, so a Python worker builds its layout and
    bucket logic once and finds them again by digest in later tasks (workers are reused).

    Pickled compressed, and unpickled without decompressing: the source's reader and the stateful
    processor carry the strategies into every task of every micro-batch (Spark broadcasts each
    stage's task binary), and 6,400 plain tuples (SF 256) made ~330 KB that the JVM allocated,
    compressed and sent several times a batch; compressed they are ~6 times smaller, and a worker
    decompresses them once."""

    def __init__(self, rows):
        self._rows = tuple(tuple(r) for r in rows)
        self.digest = hashlib.sha256(repr(self._rows).encode()).hexdigest()
        self._packed: bytes | None = None

    @property
    def rows(self) -> tuple:
        if self._rows is None:
            self._rows = pickle.loads(zlib.decompress(self._packed))
        return self._rows

    def __getstate__(self) -> dict:
        packed = self._packed or zlib.compress(pickle.dumps(self._rows, protocol=5), 6)
        return {"digest": self.digest, "packed": packed}

    def __setstate__(self, state: dict) -> None:
        self.digest, self._packed, self._rows = state["digest"], state["packed"], None


_LAYOUTS: dict = {}
_LOGIC: dict = {}


def _layout(strategies: _Strategies, buckets: int, keys: tuple) -> Layout:
    key = (strategies.digest, buckets, keys)
    if key not in _LAYOUTS:
        _LAYOUTS[key] = Layout(strategies.rows, buckets, keys)
    return _LAYOUTS[key]


def _logic(strategies: _Strategies, buckets: int, keys: tuple) -> dict[int, PairsBucket]:
    key = (strategies.digest, buckets, keys)
    if key not in _LOGIC:
        layout = _layout(strategies, buckets, keys)
        _LOGIC[key] = {k: PairsBucket(b, layout.granule_ms) for k, b in zip(layout.keys, layout.buckets)}
    return _LOGIC[key]


class PartialsTransform:
    """The source's partition transform (spark_runtime/source.py): a partition's ticks to partial
    rows of the buckets (`Layout.partials`)."""

    name = "pairs_partials"
    schema = PARTIAL_SCHEMA

    def __init__(self, strategies: _Strategies, buckets: int, keys: tuple):
        self.args = (strategies, buckets, keys)

    def __call__(self, ticks: pa.Table) -> pa.Table:
        return _layout(*self.args).partials(ticks)


class _SparkStore:
    """pairs_bucket.Store over the processor's value states."""

    def __init__(self, values: dict):
        self.values = values

    def get(self, name):
        return self.values[name].get()

    def put(self, name, value):
        self.values[name].update(value)


class BucketProcessor(StatefulProcessor):
    """One bucket of strategies per key. With `raw`, the input is ticks (the one-key plans) and
    the processor makes the partial rows of its single bucket itself."""

    def __init__(self, strategies: _Strategies, buckets: int, keys: tuple, raw: bool = False):
        self.args, self.raw = (strategies, buckets, keys), raw

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.store = _SparkStore({name: handle.getValueState(name, _struct(fields))
                                  for name, fields in STATE_RECORDS.items()})

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        frame = pd.concat(list(rows), ignore_index=True)
        if self.raw:
            ticks = pa.Table.from_pandas(frame, preserve_index=False)
            frame = _layout(*self.args).partials(ticks).to_pandas()
            key = (self.args[2][0],)
        out = _logic(*self.args)[int(key[0])].process(self.store, frame)
        if len(out):
            yield out

    def close(self) -> None:
        pass


def spread_keys(spark, n: int, partitions: int) -> tuple[int, ...]:
    """n grouping-key values that Spark's hash partitioning (Murmur3 of the int key, modulo the
    shuffle partitions, as `groupBy` places them) puts on partitions 0, 1, 2, ... round-robin."""
    probe = spark.range(0, 64 * max(n, partitions)).select(
        F.col("id").cast("int").alias("k"), F.expr(f"pmod(hash(cast(id as int)), {partitions})").alias("p"))
    by_part: dict[int, list[int]] = {}
    for row in probe.collect():
        by_part.setdefault(int(row.p), []).append(int(row.k))
    return tuple(by_part[i % partitions][i // partitions] for i in range(n))


class PairsProgram:
    """What a generated Pairs program runs:
    `run_app(p.build, transform=p.source_transform, spark_conf=SPARK_CONF,
    source_partitions=p.source_partitions, realtime_build=p.build_realtime, work=p.work)`.

    `buckets` (keyed plan): state keys, 0 for one per shuffle partition and at least 2. `work`: the
    run's plan family (run.work), which picks the JVM or the Python plan (WORK). `p.work` is what
    the program's `started` event says of it ({"family", "queries": {"pairs": the plan in words}}),
    filled in when the plan is built, before the query starts."""

    def __init__(self, strategies, plan: str, buckets: int = 0, work: str = "engine"):
        if plan not in PLANS:       # the translator checked it against kit.config.PLANS
            raise ValueError(f"unknown Pairs plan {plan!r}")
        if buckets < 0:
            raise ValueError(f"buckets must be >= 0, got {buckets}")
        if work not in WORK:
            raise ValueError(f"run.work {work!r}: Spark's Pairs plans are {', '.join(WORK)}")
        self.strategies = _Strategies(strategies)
        self.plan, self.buckets = plan, buckets
        self.jvm = WORK[work] == "jvm"
        self.work = {"family": work, "queries": {}}
        self._partials: PartialsTransform | None = None
        # The Python plans reduce ticks in the Python source's partition transform; the JVM plan
        # reads the JVM source (none).
        self.source_transform = None if self.jvm else self.transform

    def _keyed(self, spark) -> PartialsTransform:
        if self._partials is None:
            partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
            n = len(Layout(self.strategies.rows, self.buckets or max(2, partitions)).buckets)
            self._partials = PartialsTransform(self.strategies, n, spread_keys(spark, n, partitions))
        return self._partials

    def transform(self, spark):
        """The source's partition transform: the partial rows in the Python keyed plan, else None."""
        return self._keyed(spark) if self.plan == "keyed" and not self.jvm else None

    @staticmethod
    def source_partitions(spark) -> int:
        """Offset ranges the source reads in parallel: one per core, so both cores of a small
        machine reduce ticks (the --source-partitions flag overrides it)."""
        return max(1, spark.sparkContext.defaultParallelism)

    def _jvm_buckets(self, partitions: int) -> int:
        """State keys of the JVM plan: the keyed plan's, one (shared) or one per strategy, which the
        layout caps at one per connected pair (per-strategy)."""
        if self.plan == "shared":
            return 1
        if self.plan == "per-strategy":
            return len(self.strategies.rows)
        return self.buckets or max(2, partitions)

    def _jvm_plan(self, spark, events, buckets: int, partitions: int, realtime: bool):
        from pyspark.sql import DataFrame

        if not jvm_classes_present(spark):
            raise CepkitError(f"run.work = {self.work['family']!r}: the Pairs JVM plan needs cepkit's Spark runtime "
                              "jar on the class path (scripts/setup.sh builds it: python -m harness.runtime_jar); "
                              "run.work = \"python\" runs the Python plan")
        rows = json.dumps([list(s) for s in self.strategies.rows])
        jvm = spark.sparkContext._jvm
        jdf = jvm.cepkit.spark.PairsRealTime.plan(events._jdf, rows, buckets, partitions, realtime)
        keys = len(Layout(self.strategies.rows, buckets).buckets)
        mode = ("real-time mode: one source task" if realtime else
                "micro-batches: each source task (one offset range of the batch)")
        self.work["queries"]["pairs"] = (
            f"JVM plan, {mode} -> partial rows (Java mapPartitions, PairsPartials) -> shuffle by bucket -> "
            f"buckets (Java transformWithState, PairsBucket, {keys} keys over {partitions} shuffle partitions"
            f"{'' if realtime else ', rows put in feed order per batch'}, Spark's state store) on the executors")
        return DataFrame(jdf, spark), OUTPUT_STREAMS

    def build_realtime(self, spark, events):
        """The keyed plan in Spark's real-time mode, in the JVM (cepkit.spark.PairsRealTime, specs/
        TRANSLATION.md): the feed's ticks in, the same output rows out. It holds one task slot for
        the source and one per shuffle partition for the whole batch, so the shuffle partitions (and
        buckets) are capped to the slots the source leaves."""
        if self.plan != "keyed" or not self.jvm:        # the translator refuses the others
            raise ValueError(f"the {self.plan} plan of run.work {self.work['family']!r} has no real-time form")
        partitions = cap_shuffle_partitions(spark)
        return self._jvm_plan(spark, events, self.buckets or partitions, partitions, True)

    def build(self, spark, events):
        """The streaming plan in micro-batches: the source's rows in, one DataFrame of Indicator and
        MarketOrder rows out."""
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        if self.jvm:
            return self._jvm_plan(spark, events, self._jvm_buckets(partitions), partitions, False)
        if self.plan == "keyed":
            part = self._keyed(spark)
            out = events.groupBy("key").transformWithStateInPandas(BucketProcessor(*part.args), OUTPUT_SCHEMA,
                                                                   "Append", "None")
            self.work["queries"]["pairs"] = (
                f"Python plan: partial rows in the Python source's partition transform (one per offset range) "
                f"-> shuffle by bucket -> buckets (transformWithStateInPandas, {len(part.args[2])} keys over "
                f"{partitions} shuffle partitions, Spark's state store) in the Python workers")
            return out, OUTPUT_STREAMS
        ticks = events.select(*TICK_COLUMNS)
        if self.plan == "shared":
            self.work["queries"]["pairs"] = ("Python plan, shared: every tick to one key (transformWithStateInPandas "
                                             "making its partial rows and running every strategy, one task)")
            return _one_key(ticks, self.strategies.rows, "all"), OUTPUT_STREAMS
        branches = [_one_key(ticks, (s,), s[0]) for s in self.strategies.rows]
        out = branches[0]
        for branch in branches[1:]:
            out = out.unionByName(branch)
        self.work["queries"]["pairs"] = (f"Python plan, per-strategy: {len(branches)} branches, each every tick to "
                                         f"one key (transformWithStateInPandas), unioned")
        return out, OUTPUT_STREAMS


def _one_key(ticks, strategies: tuple, group: str):
    """Every tick to one key that runs `strategies`. Ticks of symbols the group does not monitor
    still advance the period clock, so they stay, with symbol and price nulled (a few bytes
    instead of a string on the way through the shuffle)."""
    symbols = sorted({s[1] for s in strategies} | {s[2] for s in strategies})
    mine = F.col("symbol").isin(symbols)
    return (ticks
            .select(F.when(mine, F.col("symbol")).alias("symbol"), F.when(mine, F.col("price")).alias("price"),
                    "tickTS", "TS", "offset", "ingestTS", F.lit(group).alias("group"))
            .groupBy("group")
            .transformWithStateInPandas(BucketProcessor(_Strategies(strategies), 1, (0,), raw=True), OUTPUT_SCHEMA,
                                        "Append", "None"))
