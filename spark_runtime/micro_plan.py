"""The Spark plan of a microbenchmark workload: every query of the workload in one streaming DataFrame.

A generated program holds its workload as data (a `MicroPlan`: the query literals of
translators/micro_literal.py, each query's plan as translators/spark_micro.py chose it from the plan
family run.work, the output row type, the join table) and calls `build_micro`. Each plan is built
as specs/TRANSLATION.md says:

- `filter`: a where + select on the source; several distinct filters in one pass (one branch: an
  `explode` of one row per filter an event passes), so the batch is read once, not once per filter;
- `broadcast_join` (J2), `jdbc_join` (J3 through Spark's JDBC source): a stream-static join with the
  table read once (JDBC: every batch) and broadcast; `lookup_join` (J3): per micro-batch and task,
  one `SELECT ... WHERE id = ANY(keys)` through psycopg joined in pandas (`mapInPandas`);
- `jvm_logic` (count windows, window joins, patterns): the Java logic (runtime_common/java/cepkit/
  logic) as user code in one JVM `transformWithState` for all such queries (cepkit.spark.LogicPlan):
  events routed per query they are relevant to, grouped by (query, key value) for a keyed pattern
  and by query otherwise, sorted by offset within a group's call;
- `jvm_window` (Q3, Q4): the paned windows in the JVM (cepkit.spark.WindowRealTime): pane records
  per group made in the source's tasks, merged and closed by the first event of a later pane in
  `transformWithState`, a bucket's rows of a micro-batch sorted back into feed order;
- `spark_window` (Q3, run.work = "operators"): Spark's sliding `window()` over TS with a zero-delay
  watermark in append mode (its inputTS is the window's end: Spark cannot name the closing event);
- `interval_join` (a keyed all-all pattern, run.work = "operators"): Spark's stream-stream interval
  self-join (the pairs the pattern's semantics define are exactly the join's), its two sides' state
  in RocksDB with the join's event-time state format (spark_runtime/app.py);
- `python_core` (run.work = "python"): the kinds' cores of runtime_common/micro_cores/ in one
  `transformWithStateInPandas` operator, one group per query (per query and key bucket for a keyed
  pattern), each group's events sorted by offset;
- `driver_core` (run.work = "driver"): the cores on the driver once per micro-batch
  (spark_runtime/driver_cores.py; the events they read pass through to the collect).

Identical queries are planned once and their rows copied to every query's output stream.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from typing import Iterator

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from kit.errors import CepkitError
from runtime_common import join_table
from runtime_common.micro_lookup import lookup_rows, table_fields
from runtime_common.micro_rows import output_rows
from spark_runtime.driver_cores import INPUT_PREFIX, INPUT_STREAM, DriverCores
from runtime_common.micro_cores import core_for, state_codec
from runtime_common.micro_cores.pattern_chunks import ChunkedPatternCore
from spark_runtime.chunk_state import ChunkedState
from spark_runtime.realtime import cap_shuffle_partitions
from spark_runtime.source import FORMAT as SOURCE_FORMAT

# The plans a query may have (translators/spark_micro.py, which this package may not import).
PLANS = ("filter", "broadcast_join", "lookup_join", "jdbc_join", "spark_window", "interval_join", "jvm_window",
         "jvm_logic", "python_core", "driver_core")
LOGIC_PLAN_CLASS = "cepkit.spark.LogicPlan"
WINDOW_PLAN_CLASS = "cepkit.spark.WindowRealTime"
_STATE_SCHEMA = StructType([StructField("blob", BinaryType())])
_AGGREGATES = {"SUM": F.sum, "AVG": F.avg, "MAX": F.max, "MIN": F.min, "STDEV": F.stddev_pop,
               "MEDIAN": F.median, "COUNT": lambda c: F.count(F.lit(1))}


@dataclass(frozen=True)
class MicroPlan:
    """A workload as a generated program states it.

    `output_fields` is the one row type of the output ("name type" each): `stream`, then the union
    of the queries' columns, then ingestTS. `multi_stream`: the driver adds a `stream` column only
    when the dataset has several streams. `table_path`: the join table (Parquet) of J2.
    """

    workload: str
    queries: tuple
    output_fields: tuple
    multi_stream: bool
    table_path: str | None = None
    plans: dict | None = None       # query id -> its plan (PLANS)
    shuffles: int = 1               # shuffles of the source's events per batch

    def __post_init__(self) -> None:
        ids = [q["id"] for q in self.queries]
        if not isinstance(self.plans, dict) or set(self.plans) != set(ids):
            raise ValueError(f"plans: must name the plan of every query ({', '.join(ids)})")
        bad = sorted({p for p in self.plans.values() if p not in PLANS})
        if bad:
            raise ValueError(f"plans: unknown plan(s) {', '.join(bad)} (one of {', '.join(PLANS)})")

    def plan_of(self, q) -> str:
        return self.plans[q["id"]]

    @property
    def output_streams(self) -> dict[str, list[str]]:
        """Every output stream (one per query) with its columns; the sink's stamps come after them."""
        return {q["id"]: list(q["fields"]) + ["ingestTS"] for q in self.queries}

    @property
    def output_schema(self) -> str:
        return ", ".join(self.output_fields)

    @property
    def out_columns(self) -> list[str]:
        return [f.split()[0] for f in self.output_fields]


def shared_queries(queries) -> dict[str, list[str]]:
    """{representative id: the ids of every query identical to it (itself first)}, in query order.

    Identical queries (equal but for their ids, thesis 4.5.6) are computed once: only the first of
    each set is planned, and its rows are copied to the others' output streams at the end, so N
    identical queries cost one query plus N-fold output rows, not N times the work."""
    sets: dict[str, list[str]] = {}
    for q in queries:
        sig = json.dumps({k: v for k, v in q.items() if k != "id"}, sort_keys=True, default=str)
        sets.setdefault(sig, []).append(q["id"])
    return {ids[0]: ids for ids in sets.values()}


def build_micro(spark, events, plan: MicroPlan, realtime: bool = False):
    """The streaming plan: driver events in, one DataFrame with every query's rows out (and, when
    cores run on the driver, the events they read, with the foreachBatch stage that runs them).
    `realtime`: the plan for Spark's real-time mode (the translator admitted only plans it runs)."""
    if plan.shuffles > 1 and python_source(events):
        # Spark 4.3 plans the input partitions of each shuffle over a Python data source from its own
        # thread, over one worker socket; two at once corrupt the stream (specs/TRANSLATION.md).
        raise CepkitError(f"workload {plan.workload}: its plan shuffles the source's events {plan.shuffles} times per "
                          f"batch, which Spark 4.3 cannot do over the kit's Python data source (run.connectors = "
                          f"\"python\", or the runtime jar missing); use the JVM source (run.connectors = \"jvm\", "
                          f"python -m harness.runtime_jar)")
    shared = shared_queries(plan.queries)
    planned = [q for q in plan.queries if q["id"] in shared]
    partitions = cap_shuffle_partitions(spark) if realtime else int(spark.conf.get("spark.sql.shuffle.partitions"))
    parts = []
    filters = [q for q in planned if plan.plan_of(q) == "filter"]
    if filters:
        parts.append(_filters(plan, events, filters))
    for q in planned:
        p = plan.plan_of(q)
        if p == "spark_window":
            parts.append(_native_time_window(plan, events, q))
        elif p == "jvm_window":
            parts.append(_jvm_time_window(plan, spark, events, q, partitions, realtime))
        elif p in ("broadcast_join", "jdbc_join"):
            parts.append(_table_join(plan, spark, events, q))
        elif p == "lookup_join":
            parts.append(_db_table_join(plan, events, q))
        elif p == "interval_join":
            parts.append(_join_pattern(plan, events, q))
    logic = [q for q in planned if plan.plan_of(q) == "jvm_logic"]
    if logic:
        parts.append(_jvm_logic(plan, spark, events, logic, realtime))
    in_operator = [q for q in planned if plan.plan_of(q) == "python_core"]
    if in_operator:
        parts.append(_stateful(plan, events, in_operator, 2 * partitions))
    on_driver = [q for q in planned if plan.plan_of(q) == "driver_core"]
    if on_driver:
        parts.append(_driver_input(plan, events, on_driver))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part, allowMissingColumns=True)
    copies = {rep: ids for rep, ids in shared.items() if len(ids) > 1}
    if copies:
        # Each row of a representative goes to the output stream of every query of its set.
        fan = F.create_map(*[x for rep, ids in copies.items() for x in (F.lit(rep), F.array(*map(F.lit, ids)))])
        out = out.withColumn("stream", F.explode(F.coalesce(fan[F.col("stream")], F.array(F.col("stream")))))
    if not on_driver:
        return out.select(*plan.out_columns), plan.output_streams
    inputs = [c for c in out.columns if c.startswith(INPUT_PREFIX)]
    stage = DriverCores(on_driver, {q["id"]: shared[q["id"]] for q in on_driver}, plan.out_columns,
                        [c[len(INPUT_PREFIX):] for c in inputs])
    return out.select(*plan.out_columns, *inputs), plan.output_streams, stage


def python_source(events) -> bool:
    """Whether `events` come from the kit's Python data source (spark_runtime/source.py) rather than
    the JVM one: its format's name is the streaming relation's."""
    try:
        return SOURCE_FORMAT in events._jdf.logicalPlan().toString()
    except Exception:  # noqa: BLE001 - no JVM plan to read (not a Spark DataFrame): not the Python source
        return False


def _jvm_logic(plan: MicroPlan, spark, events, queries, realtime: bool):
    """Count windows, window joins and patterns as the Java logic in one JVM transformWithState
    (cepkit.spark.LogicPlan): routed per query an event is relevant to, grouped by (query, key
    value) for a keyed pattern and by query otherwise."""
    from pyspark.sql import DataFrame

    jdf = _jvm_class(spark, LOGIC_PLAN_CLASS).plan(events._jdf, json.dumps(list(queries)), plan.output_schema,
                                                  bool(realtime))
    return DataFrame(jdf, spark)


def _jvm_time_window(plan: MicroPlan, spark, events, q, partitions: int, realtime: bool):
    """Q3 or Q4 in the JVM (cepkit.spark.WindowRealTime, specs/TRANSLATION.md): each window's rows
    once, at the first event of a later pane, with that event's TS as inputTS. In real-time mode the
    plan holds one task slot for the source and one per shuffle partition for the whole batch, so
    the shuffle partitions are capped to the slots the source leaves (build_micro)."""
    from pyspark.sql import DataFrame

    src = _of_stream(plan, events, q["inputs"][0])
    jdf = _jvm_class(spark, WINDOW_PLAN_CLASS).plan(src._jdf, json.dumps(q), partitions, bool(realtime))
    return DataFrame(jdf, spark)


def _jvm_class(spark, name: str):
    """A class of cepkit's runtime jar through py4j, or a one-line error saying how to build the jar."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(name)
    except Exception:  # noqa: BLE001 - py4j raises its own error for a missing class
        raise CepkitError(f"{name} is not on the class path: the plan runs in cepkit's Spark runtime jar "
                          f"(python -m harness.runtime_jar builds it)") from None
    return functools.reduce(getattr, name.split("."), jvm)


def _driver_input(plan: MicroPlan, events, queries):
    """The events the driver-run cores read, passed through to the collect as rows of stream
    INPUT_STREAM: their columns prefixed INPUT_PREFIX, the output columns null."""
    stream = F.col("stream") if plan.multi_stream else F.lit("S1")
    events = events.withColumn("stream", stream)
    wanted = F.lit(False)
    for q in queries:
        wanted = wanted | _routed_to(q, stream)
    keep = needed_columns(events.columns, queries)
    keep += [] if "stream" in keep else ["stream"]        # the driver routes events by it
    nulls = [F.lit(None).cast(t).alias(n) for n, t in (f.split() for f in plan.output_fields) if n != "stream"]
    return events.where(wanted).select(F.lit(INPUT_STREAM).alias("stream"), *nulls,
                                       *[F.col(c).alias(INPUT_PREFIX + c) for c in keep])


def _of_stream(plan: MicroPlan, events, stream: str):
    return events.where(F.col("stream") == stream) if plan.multi_stream else events


def _condition(where, column=F.col):
    """All comparisons of a `where` list hold (AND)."""
    cond = F.lit(True)
    for field, op, value in where:
        cond = cond & _compare(column(field), op, value)
    return cond


def _compare(col, op: str, value: float):
    return {"lt": col < value, "le": col <= value, "gt": col > value, "ge": col >= value, "eq": col == value,
            "ne": col != value}[op]


def _filter(plan: MicroPlan, events, q):
    src = _of_stream(plan, events, q["inputs"][0])
    cols = [F.col(f).alias(out) for f, out in zip(q["select"], q["fields"])]
    return src.where(_condition(q["where"])).select(F.lit(q["id"]).alias("stream"), *cols,
                                                    F.col("TS").alias("inputTS"), "ingestTS")


def _filters(plan: MicroPlan, events, queries):
    """Every filter as one branch over the source (one filter: `_filter`). Per event, one struct per
    query (of every output column, null where the query has none) when the event passes the
    query's condition, exploded into rows. A union of one branch per filter would read the batch
    from the source once per filter, and real-time mode refuses a union of branches over one source."""
    if len(queries) == 1:
        return _filter(plan, events, queries[0])
    types = dict(f.split() for f in plan.output_fields)

    def row(q):
        chosen = {**{out: F.col(field) for field, out in zip(q["select"], q["fields"])},
                  "stream": F.lit(q["id"]), "inputTS": F.col("TS"), "ingestTS": F.col("ingestTS")}
        values = [chosen.get(name, F.lit(None)).cast(types[name]).alias(name) for name in plan.out_columns]
        cond = _condition(q["where"])
        if plan.multi_stream:
            cond = cond & (F.col("stream") == q["inputs"][0])
        return F.when(cond, F.struct(*values))

    return (events.select(F.explode(F.array(*[row(q) for q in queries])).alias("_row"))
            .where(F.col("_row").isNotNull()).select("_row.*"))


def _native_time_window(plan: MicroPlan, events, q):
    """Q3 as Spark plans it: sliding window() on TS, watermark delay 0, append mode. A window is
    emitted in the batch after the one whose events moved the watermark past its end; its inputTS
    is the window's end, the earliest instant it could close (latency measured from it is at most
    one inter-arrival time too long)."""
    src = _of_stream(plan, events, q["inputs"][0]).withColumn("_t", F.timestamp_millis("TS"))
    window = F.window("_t", f"{q['range_ms']} milliseconds", f"{q['slide_ms']} milliseconds").alias("_w")
    aggs = [_AGGREGATES[f](F.col(field) if field else None).alias(alias) for f, field, alias in q["aggregates"]]
    out = (src.withWatermark("_t", "0 seconds")
           .groupBy(window, *q["group_by"])
           .agg(*aggs, F.max("ingestTS").alias("ingestTS")))
    end = F.unix_millis(F.col("_w.end"))
    return out.select(F.lit(q["id"]).alias("stream"), *q["group_by"], *[a[2] for a in q["aggregates"]],
                      end.alias("windowEnd"), end.alias("inputTS"), "ingestTS")


def _join_pattern(plan: MicroPlan, events, q):
    """A keyed all-all pattern as an interval self-join: a1 (the first element's events) joins a2
    (the second's) on the key, with `a1.TS <= a2.TS < a1.TS + within` and a1 before a2 in the
    feed's order (offset), which is specs/SEMANTICS.md section 8's set of matches for all-all
    consumption. The join emits a pair in the micro-batch of its later event (a1's of earlier
    batches are in the state, a1's of the same batch are added before a2's are matched), with
    inputTS and ingestTS of a2, the triggering event.

    The watermark (event time `_t` = TS, delay 1 ms: TS never decreases along the feed, and an
    event with the previous batch's largest TS must not count as late) lets Spark evict an a1
    once no later a2 can be within `within` of it, and an a2 once no later a1 can precede it."""
    events = events.withColumn("stream", F.col("stream") if plan.multi_stream else F.lit("S1"))
    stream = F.col("stream")
    routed = (events.where(_routed_to(q, stream)).select(*needed_columns(events.columns, [q]))
              .withColumn("_t", F.timestamp_millis("TS"))
              .withWatermark("_t", "1 millisecond"))
    a1 = routed.where(_is_element(q["first"], stream)).alias("_a1")
    a2 = routed.where(_is_element(q["second"], stream)).alias("_a2")
    within = F.expr(f"INTERVAL '{q['within_ms'] / 1000:.3f}' SECOND")
    key = q["key"]
    cond = ((F.col(f"_a1.{key}") == F.col(f"_a2.{key}"))
            & (F.col("_a2._t") >= F.col("_a1._t")) & (F.col("_a2._t") < F.col("_a1._t") + within)
            & (F.col("_a1.offset") < F.col("_a2.offset")))
    aliases = {q["first"]["alias"]: "_a1", q["second"]["alias"]: "_a2"}

    def column(name: str):
        alias, _, field = name.partition(".")
        return F.col(f"{aliases[alias]}.{field}")

    cols = [column(s).alias(f) for s, f in zip(q["select"], q["fields"])]
    return a1.join(a2, cond, "inner").select(F.lit(q["id"]).alias("stream"), *cols,
                                             F.col("_a2.TS").alias("inputTS"), F.col("_a2.ingestTS").alias("ingestTS"))


def _table(plan: MicroPlan, spark, q):
    """The table side of a stream-to-table join, its columns renamed T_<name>."""
    fields = table_fields(q)
    if plan.plan_of(q) == "broadcast_join":       # J2: read once, broadcast to every task
        if plan.table_path is None:
            raise RuntimeError(f"query {q['id']}: joins a table in memory but the program names none")
        if join_table.is_csv(plan.table_path):       # a CSV dataset's T.csv, read with the spec's types
            table = spark.read.csv(plan.table_path, header=True, schema=join_table.spark_schema(plan.table_path))
        else:
            table = spark.read.parquet(plan.table_path)
        return F.broadcast(table.select(*[F.col(c).alias(f"T_{c}") for c in fields]))
    # J3, JDBC plan: Spark's JDBC source (Debian's PostgreSQL JDBC driver, on the classpath through
    # spark.jars) reads the whole table again in every micro-batch; no join keys reach the database.
    # Broadcast, so the stream side is not shuffled: with two shuffles over the Python source in one
    # batch, Spark 4.3 plans their input partitions from two threads over one Python worker socket
    # and the stream fails with a NegativeArraySizeException (seen in CI; specs/TRANSLATION.md).
    url = os.environ.get("CEPKIT_PG_JDBC_URL")
    if not url:
        raise RuntimeError(f"query {q['id']}: CEPKIT_PG_JDBC_URL is not set (the PostgreSQL JDBC URL)")
    table = (spark.read.format("jdbc").option("url", url).option("driver", "org.postgresql.Driver")
             .option("dbtable", "t").load())
    return F.broadcast(table.select(*[F.col(c.lower()).alias(f"T_{c}") for c in fields]))  # PostgreSQL folds names


def _table_join(plan: MicroPlan, spark, events, q):
    """Stream-static join with the table (J2 in memory, J3 through JDBC)."""
    table = _table(plan, spark, q)
    src = _of_stream(plan, events, q["input"])
    cond = src[q["stream_key"]] == table[f"T_{q['table_key']}"]

    def column(name: str):
        head, _, field = name.partition(".")
        return table[f"T_{field}"] if head == q["table"] else src[field]

    joined = src.join(table, cond & _condition(q["where"], column), "inner")
    cols = [column(f).alias(out) for f, out in zip(q["select"], q["fields"])]
    return joined.select(F.lit(q["id"]).alias("stream"), *cols, src["TS"].alias("inputTS"), src["ingestTS"])


def _db_rows(batches, q, dsn: str):
    """One task's share of a J3 query: look its keys up in PostgreSQL once per batch of rows."""
    import psycopg     # only J3's tasks need it

    with psycopg.connect(dsn) as conn:
        for events in batches:
            yield lookup_rows(q, events, conn)


def _db_table_join(plan: MicroPlan, events, q):
    """Stream-to-table join against the table in PostgreSQL (J3), per micro-batch and task: the
    table never enters Spark's memory."""
    dsn = os.environ.get("CEPKIT_PG_DSN")
    if not dsn:
        raise RuntimeError(f"query {q['id']}: CEPKIT_PG_DSN is not set (the PostgreSQL connection string)")
    src = _of_stream(plan, events, q["input"])
    types = dict(f.split() for f in plan.output_fields)
    schema = ", ".join(f"{c} {types[c]}" for c in ["stream", *q["fields"], "ingestTS"])
    return src.mapInPandas(functools.partial(_db_rows, q=q, dsn=dsn), schema)


class MicroProcessor(StatefulProcessor):
    """The Spark side of the cores: one group per query, its state in one value state."""

    def __init__(self, queries, out_columns):
        self.queries = {q["id"]: q for q in queries}
        self.out_columns = list(out_columns)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.cores = {qid: core_for(q) for qid, q in self.queries.items()}
        self.state = handle.getValueState("core", _STATE_SCHEMA)
        # A chunked pattern core's state is stored a chunk at a time (spark_runtime/chunk_state.py).
        self.chunked = (ChunkedState(handle) if any(isinstance(c, ChunkedPatternCore) for c in self.cores.values())
                        else None)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        qid = key[0]
        q, core = self.queries[qid], self.cores[qid]
        events = pd.concat(list(rows), ignore_index=True).sort_values("offset", kind="stable", ignore_index=True)
        if isinstance(core, ChunkedPatternCore):
            group = tuple(key)
            state = self.chunked.load(group, core)
            before = {c["id"] for c in state["chunks"]}
            out = core.process(state, events)
            self.chunked.store(group, state, before)
        else:
            state = state_codec.loads(self.state.get()[0]) if self.state.exists() else core.initial_state()
            out = core.process(state, events)
            self.state.update((state_codec.dumps(state),))
        if len(out):
            yield output_rows(q, out, events, self.out_columns)

    def close(self) -> None:
        pass


def _routed_to(q, stream):
    """Whether an event goes to query q's group. A pattern's elements' Where are checked here, so an
    event that can be neither its first nor its second element never crosses the shuffle
    (predicate push-down, thesis 4.5.4); its core checks them again per element."""
    if q["kind"] != "pattern":
        return stream.isin(q["inputs"])
    return _is_element(q["first"], stream) | _is_element(q["second"], stream)


def _is_element(element, stream):
    """Whether an event can be this element of a pattern: its stream, and its Where."""
    return (stream == element["stream"]) & _condition(element["where"])


def _bucket(q, buckets: int):
    """Which group of query q an event joins. A pattern with a key keeps its state per key, so
    its keys are hashed over `buckets` groups that run as parallel tasks; every other core's
    semantics span its whole input (a count window counts every event, a time window closes on the
    stream's next event, a window join's windows are the streams' last rows), so it stays one group."""
    if q["kind"] == "pattern" and q.get("key"):
        return F.pmod(F.hash(F.col(q["key"])), F.lit(buckets))
    return F.lit(0)


def needed_columns(columns, queries) -> list[str]:
    """The event columns the cores can read: those a query literal names (a field, a key, a
    qualified `S1.A1`), `stream` for joins and patterns, plus TS, offset and ingestTS. Every row of
    the stateful operator crosses a shuffle and the JVM/Python boundary twice, so unread columns
    are dropped before it (a superset is harmless; a core never sees less than it names)."""
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", json.dumps(list(queries), default=str)))
    if any(q["kind"] in ("window_join", "pattern") for q in queries):
        named.add("stream")          # they tell their inputs' events apart by it
    return [c for c in columns if c in named or c in ("TS", "offset", "ingestTS")]


def _stateful(plan: MicroPlan, events, queries, buckets: int):
    """Route each event to every stateful query that reads its stream, then run the processor."""
    stream = F.col("stream") if plan.multi_stream else F.lit("S1")
    routes = F.array(*[F.when(_routed_to(q, stream), F.struct(F.lit(q["id"]).alias("query"),
                                                              _bucket(q, buckets).alias("bucket")))
                       for q in queries])
    events = events.withColumn("stream", stream)
    keep = needed_columns(events.columns, queries)
    routed = (events.select(*keep, F.explode(routes).alias("_route"))
              .where(F.col("_route").isNotNull())
              .select(*keep, "_route.query", "_route.bucket"))
    return routed.groupBy("query", "bucket").transformWithStateInPandas(
        MicroProcessor(queries, plan.out_columns), plan.output_schema, "Append", "None")
