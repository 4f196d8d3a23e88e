"""The microbenchmark query kinds on Flink: SQL over the events table, the kit's Java logic in keyed
operators, the kit's Python cores in a keyed Python function: each query as its plan says.

The program (translators/flink_micro.py) gives every query a plan (`PLANS`: "sql", "jvm" or
"python", chosen by the plan family run.work, specs/TRANSLATION.md "Microbenchmarks on Flink"):
- "sql": its Flink SQL text over the view `events` and one view per stream (`S1`, `S2`, ...):
  the feed's events as a table with event time (flink_runtime/tables.py); its rows go to the
  harness sink from the JVM (or the Python emitter, flink_runtime/emitter.py);
- "jvm": the kit's Java logic (runtime_common/java/cepkit/logic) in `cepkit.flink.MicroFlink`, a
  KeyedProcessFunction built here through py4j over the events' Rows, its rows to the JVM sink;
- "python": the engine-neutral Python core of its kind (runtime_common/micro_cores, the code the
  Spark plan runs) or J3's PostgreSQL lookup (runtime_common/micro_lookup) in `QueryFunction`, a
  keyed Python function with one key per query, fed by the Python puller's ranges.

Where events come from. A workload with no "python" query reads its events in the JVM
(flink_runtime/jvm.py: a Java source, run.source_partitions splits, or one when a query runs the
Java logic, which needs each key's events in feed order) and no Python operator is on their way.
Otherwise the feed's puller (flink_runtime/feed.py) cuts each range it reads into chunks
(`MicroChunks`): key -1 carries the whole range, which `Explode` turns back into one Row per event
for the SQL and Java queries, and key i the events the i-th Python query reads
(runtime_common.micro_rows.routed); one feed has one reader's commits and end of run.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.functions import FlatMapFunction
from pyflink.datastream.state import ValueStateDescriptor

from flink_runtime.emitter import arrow_schema, sink_client
from flink_runtime.feed import event_fields
from flink_runtime.jdbc import jdbc_driver_jar, jdbc_target
from flink_runtime.tables import events_table
from runtime_common import join_table
from runtime_common.micro_cores import CORES
from runtime_common.micro_lookup import lookup_rows
from runtime_common.micro_rows import output_rows, routed

SQL_EVENTS = -1
STREAM = "stream"
# A range read at most this often: a core's work per range is partly fixed.
CHUNK_MS = 20


class MicroChunks:
    """The feed's transform: a range of events to `{-1: every event (for the SQL and Java
    queries), i: the events of the i-th Python query}`; a single-stream dataset's events get their
    `stream` (S1)."""

    def __init__(self, queries: tuple, rows: bool, single_stream: str | None):
        self.queries, self.sql, self.single_stream = queries, rows, single_stream

    def __call__(self, table: pa.Table) -> dict:
        if self.single_stream is not None:
            table = table.append_column(STREAM, pa.array([self.single_stream] * table.num_rows, pa.string()))
        out = {SQL_EVENTS: table} if self.sql else {}
        if self.queries:
            events = table.to_pandas()
            for i, q in enumerate(self.queries):
                mine = events[routed(q, events)].reset_index(drop=True)
                if len(mine):
                    out[i] = mine
        return out


class Explode(FlatMapFunction):
    """Chunk -1 back into one Row per event, for the events table and the Java queries."""

    def flat_map(self, chunk):
        table = chunk[2]
        for values in zip(*(table.column(n).to_pylist() for n in table.column_names)):
            yield Row(*values)


class QueryFunction(KeyedProcessFunction):
    """The Python queries, one per key (see the module doc); rows straight to the harness sink."""

    def __init__(self, queries: tuple, sink: tuple[str, int], attempt: int = 1, secret: str | None = None):
        self.queries, self.sink_address, self.attempt = queries, sink, int(attempt)
        self.secret = secret        # the run's, pickled with the function (as the DSN below, and why)
        # J3's database, read where the job is built (the program's environment): a cluster's
        # Python workers are the TaskManagers' children and do not have the program's environment.
        self.dsn = os.environ.get("CEPKIT_PG_DSN")

    def open(self, runtime_context) -> None:
        self.sink = sink_client(*self.sink_address, self.attempt, runtime_context, self.secret)
        self.cores = {i: CORES[q["kind"]](q) for i, q in enumerate(self.queries) if q["kind"] in CORES}
        self.schemas = {i: arrow_schema(list(zip(q["fields"], q["types"])) + [("ingestTS", "long")])
                        for i, q in enumerate(self.queries)}
        self.state = runtime_context.get_state(ValueStateDescriptor("core", Types.PICKLED_BYTE_ARRAY()))
        self.conn = None

    def close(self) -> None:
        self.sink.close()
        if self.conn is not None:
            self.conn.close()

    def _database(self):
        if self.conn is None:
            import psycopg      # only J3 needs it

            dsn = self.dsn or os.environ.get("CEPKIT_PG_DSN")
            if not dsn:
                raise RuntimeError("CEPKIT_PG_DSN is not set (the PostgreSQL connection string for J3)")
            self.conn = psycopg.connect(dsn, autocommit=True)
        return self.conn

    def process_element(self, chunk, ctx):
        i, seq, events = int(chunk[0]), int(chunk[1]), chunk[2]
        q = self.queries[i]
        columns = [*q["fields"], "ingestTS"]
        if i in self.cores:
            core = self.cores[i]
            state = self.state.value()
            state = core.initial_state() if state is None else state
            out = core.process(state, events)
            self.state.update(state)
            if not len(out):
                return
            frame = output_rows(q, out, events, ["stream", *columns])
        else:
            frame = lookup_rows(q, events, self._database())
            if not len(frame):
                return
        table = pa.Table.from_pandas(frame[columns], schema=self.schemas[i], preserve_index=False)
        self.sink.emit(q["id"], seq, table)
        return
        yield  # a generator with no output: the rows went to the sink


PLANS = ("sql", "jvm", "python")


def jvm_feed(queries, plans: dict) -> bool:
    """Whether the program reads the feed in the JVM: no query of it runs in Python (its Python
    queries read the feed's ranges in Python, and one feed has one reader's commits and end of
    run). `--connectors python` (run.connectors) keeps the Python feed and emitter for every workload."""
    return all(plans[q["id"]] != "python" for q in queries)


def sink_layout(q: dict) -> dict:
    """The HarnessSink layout of a Java query's Rows (`stream`, the query's fields, `ingestTS`):
    {id: [[field, type, position], ...]}."""
    columns = [*zip(q["fields"], q["types"]), ("ingestTS", "long")]
    return {q["id"]: [[name, kind, i + 1] for i, (name, kind) in enumerate(columns)]}


class MicroProgram:
    """What a generated micro program for Flink runs: `run_app(PROGRAM.build, ...)`. `plans`: each
    query's plan ("sql", "jvm", "python"; default: "sql" for the queries with SQL, else "python");
    `work`: the plan family and each query's plan in words (the `started` event's `work`)."""

    def __init__(self, workload: str, queries, sql: dict, multi_stream: bool, table_path: str | None,
                 plans: dict | None = None, work: dict | None = None):
        self.workload, self.queries, self.sql = workload, tuple(queries), dict(sql)
        self.multi_stream, self.table_path = multi_stream, table_path
        self.plans = dict(plans) if plans is not None else {
            q["id"]: "sql" if q["id"] in self.sql else "python" for q in self.queries}
        for q in self.queries:
            plan = self.plans.get(q["id"])
            if plan not in PLANS or (plan == "sql") != (q["id"] in self.sql):
                raise ValueError(f"query {q['id']}: plan {plan!r}; one of {', '.join(PLANS)}, sql exactly "
                                 "for the queries with SQL")
        self.work = work
        self._jars: set[str] = set()

    def _of(self, plan: str) -> tuple:
        return tuple(q for q in self.queries if self.plans[q["id"]] == plan)

    def build(self, job) -> dict:
        job.work = self.work
        python_queries, java_queries = self._of("python"), self._of("jvm")
        single = None if self.multi_stream else self.queries[0]["inputs"][0]
        fields = event_fields(job.client.schema)
        if not self.multi_stream:
            fields.append((STREAM, Types.STRING()))
        if jvm_feed(self.queries, self.plans) and getattr(job, "connectors", "jvm") == "jvm":
            constants = [] if single is None else [(STREAM, single)]
            if any(q["kind"] != "table_join" for q in java_queries):
                # One split: the Java logic needs each key's events in feed order (MicroFlink's doc says
                # why); J3's lookups need no order.
                from flink_runtime.jvm import feed_stream

                rows = feed_stream(job, constants, 1)
                job.source_used = "jvm"
                if job.source_partitions > 1:
                    job.why.append("the Java logic's queries read the feed as one split (they need each key's "
                                   "events in feed order)")
            else:
                rows = job.jvm_feed(constants)
            return {**self._sql(job, rows, fields, jvm=True), **self._java(job, rows, stamp=False)}
        if hasattr(job, "why"):
            job.why.append("--connectors python" if jvm_feed(self.queries, self.plans) else
                           "Python queries read the feed's ranges in Python: "
                           + ", ".join(q["id"] for q in python_queries))
        chunks = job.feed(transform=MicroChunks(python_queries, bool(self.sql or java_queries), single),
                          interval_ms=CHUNK_MS)
        streams = {}
        if python_queries:
            # Parallelism 1 up to the shuffle: the feed's order of ranges must reach each key as read.
            (chunks.filter(lambda c: c[0] != SQL_EVENTS).set_parallelism(1)
                .key_by(lambda c: c[0], key_type=Types.INT())
                .process(QueryFunction(python_queries, job.sink, job.attempt, job.secret), output_type=Types.INT())
                .name("cepkit python queries: " + ", ".join(q["id"] for q in python_queries)))
            streams.update({q["id"]: [*q["fields"], "ingestTS"] for q in python_queries})
        if self.sql or java_queries:
            # One task, in the feed's order, from the puller to the Java queries' shuffle.
            rows = (chunks.filter(lambda c: c[0] == SQL_EVENTS).set_parallelism(1)
                    .flat_map(Explode(), output_type=Types.ROW_NAMED([n for n, _ in fields], [t for _, t in fields]))
                    .name("cepkit events").set_parallelism(1))
            streams.update(self._sql(job, rows, fields))
            streams.update(self._java(job, rows, stamp=True))
        if python_queries:
            job.sink_used = "python"        # QueryFunction sends its rows from Python
        return streams

    def _sql(self, job, rows, fields, jvm: bool = False) -> dict:
        """The SQL queries over the events' Rows: the JVM feed's (`jvm`: their timestamps and the
        source's watermarks) or the Python feed's exploded ranges (rowtime and its watermark from TS)."""
        if not self.sql:
            return {}
        tables = job.tables
        tables.create_temporary_view("events", events_table(job, rows, fields, source_watermark=jvm))
        for name in sorted({s for q in self.queries for s in q["inputs"]}):
            tables.create_temporary_view(name, tables.sql_query(f"SELECT * FROM events WHERE `stream` = '{name}'"))
        if self.table_path:
            frame = join_table.read(self.table_path).to_pandas()     # T.parquet, or a CSV dataset's T.csv
            tables.create_temporary_view("T", tables.from_pandas(frame))
        streams = {}
        for q in self.queries:
            if q["id"] in self.sql:
                table = tables.sql_query(self.sql[q["id"]])
                columns = [c for c in [*q["fields"], "ingestTS"] if c in table.get_schema().get_field_names()]
                job.output(table, {q["id"]: columns}, jvm=jvm)
                streams[q["id"]] = columns
        return streams

    def _lookup(self, job, j_events, q: dict):
        """J3 in the JVM (cepkit.flink.MicroLookup): its DSN from the program's environment (a
        cluster's TaskManagers do not have it: it travels in the job, as the run's secret does)."""
        from pyflink.java_gateway import get_gateway

        dsn = os.environ.get("CEPKIT_PG_DSN")
        if not dsn:
            raise RuntimeError(f"query {q['id']}: CEPKIT_PG_DSN is not set (the PostgreSQL connection string for J3)")
        url, props = jdbc_target(dsn)
        jar = jdbc_driver_jar()
        if jar not in self._jars:
            job.env.add_jars("file://" + jar)
            self._jars.add(jar)
        return get_gateway().jvm.cepkit.flink.MicroLookup.plan(j_events, json.dumps(q), url, json.dumps(props),
                                                                int(job.parallelism))

    def _java(self, job, rows, stamp: bool) -> dict:
        """The Java queries (cepkit.flink.MicroFlink) over the events' Rows in feed order (one task),
        each to the JVM sink; with `stamp` the Rows get their TS as timestamps and its watermark first."""
        from pyflink.datastream import DataStream
        from pyflink.java_gateway import get_gateway

        from flink_runtime.jvm import runtime_jar, sink_stream

        streams = {}
        queries = self._of("jvm")
        if not queries:
            return streams
        runtime_jar(required=True)
        micro = get_gateway().jvm.cepkit.flink.MicroFlink
        # The Python feed's Rows carry no timestamps: TS and its watermark, once for every Java query.
        j_events = micro.stamped(rows._j_data_stream) if stamp else rows._j_data_stream
        whole = 0
        for q in queries:
            text = json.dumps(q)
            if q["kind"] == "table_join":
                j_rows = self._lookup(job, j_events, q)
            else:
                j_rows = micro.plan(j_events, text, whole, int(job.parallelism))
                whole += not (q["kind"] == "pattern" and q.get("key"))
            sink_stream(job, DataStream(j_rows), 0, sink_layout(q))
            job.sink_used = job.sink_used or "jvm"
            streams[q["id"]] = [*q["fields"], "ingestTS"]
        return streams
