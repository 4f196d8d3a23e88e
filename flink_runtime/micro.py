"""The microbenchmark query kinds on Flink: SQL over the events table, Python cores in a keyed function.

A workload whose queries are all SQL reads its events and sends its answers in the JVM
(flink_runtime/jvm.py: a Java source and sink, no Python on the events' way). Otherwise the feed's
puller (flink_runtime/feed.py) cuts each range of events it reads into chunks
(`MicroChunks`): key -1 carries the whole range for the SQL queries, which `Explode` turns back
into one Row per event for the events table (flink_runtime/tables.py: `rowtime` from `TS` and its
watermark), registered as the view `events` and one view per stream (`S1`, `S2`, ...); key i
carries the events the i-th Python query reads (runtime_common.micro_rows.routed). Each SQL query
(its text is in the program, translators/flink_micro.py) becomes an output table whose rows go to
the harness sink through flink_runtime/emitter.py. The Python queries run in `QueryFunction`, a
keyed function with one key per query: the engine-neutral core of its kind
(runtime_common/micro_cores, the code the Spark plan runs) over each chunk in range order, its
state in Flink keyed state; J3 asks PostgreSQL for each chunk's keys (runtime_common/micro_lookup).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
from pyflink.common import Row, Types
from pyflink.datastream import KeyedProcessFunction
from pyflink.datastream.functions import FlatMapFunction
from pyflink.datastream.state import ValueStateDescriptor

from flink_runtime.emitter import arrow_schema, sink_client
from flink_runtime.feed import event_fields
from flink_runtime.tables import events_table
from runtime_common.micro_cores import CORES
from runtime_common.micro_lookup import lookup_rows
from runtime_common.micro_rows import output_rows, routed

SQL_EVENTS = -1
STREAM = "stream"
# A range read at most this often: a core's work per range is partly fixed.
CHUNK_MS = 20


class MicroChunks:
    """The feed's transform: a range of events to `{-1: every event (for SQL), i: the events of
    the i-th Python query}`; a single-stream dataset's events get their `stream` (S1)."""

    def __init__(self, queries: tuple, sql: bool, single_stream: str | None):
        self.queries, self.sql, self.single_stream = queries, sql, single_stream

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
    """Chunk -1 back into one Row per event, for the events table."""

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


def jvm_plan(queries, sql: dict) -> bool:
    """Every query is SQL: the program reads the feed and answers the sink in the JVM
    (flink_runtime/jvm.py). A workload with a Python query keeps the Python feed for all: its Python
    queries read the feed's ranges in Python, and one feed has one reader's commits and end of run.
    `--connectors python` (run.connectors) keeps the Python feed and emitter for every workload."""
    return bool(sql) and all(q["id"] in sql for q in queries)


class MicroProgram:
    """What a generated micro program for Flink runs: `run_app(PROGRAM.build, ...)`."""

    def __init__(self, workload: str, queries, sql: dict, multi_stream: bool, table_path: str | None):
        self.workload, self.queries, self.sql = workload, tuple(queries), dict(sql)
        self.multi_stream, self.table_path = multi_stream, table_path

    def build(self, job) -> dict:
        python_queries = tuple(q for q in self.queries if q["id"] not in self.sql)
        single = None if self.multi_stream else self.queries[0]["inputs"][0]
        if jvm_plan(self.queries, self.sql) and getattr(job, "connectors", "jvm") == "jvm":
            constants = [] if single is None else [(STREAM, single)]
            return self._sql(job, job.jvm_feed(constants), jvm=True)
        if hasattr(job, "why"):
            job.why.append("--connectors python" if jvm_plan(self.queries, self.sql) else
                           "Python queries read the feed's ranges in Python: "
                           + ", ".join(q["id"] for q in python_queries))
        chunks = job.feed(transform=MicroChunks(python_queries, bool(self.sql), single), interval_ms=CHUNK_MS)
        streams = {}
        if python_queries:
            # Parallelism 1 up to the shuffle: the feed's order of ranges must reach each key as read.
            (chunks.filter(lambda c: c[0] != SQL_EVENTS).set_parallelism(1)
                .key_by(lambda c: c[0], key_type=Types.INT())
                .process(QueryFunction(python_queries, job.sink, job.attempt, job.secret), output_type=Types.INT())
                .name("cepkit python queries: " + ", ".join(q["id"] for q in python_queries)))
            streams.update({q["id"]: [*q["fields"], "ingestTS"] for q in python_queries})
        if self.sql:
            streams.update(self._sql(job, chunks))
        return streams

    def _sql(self, job, chunks, jvm: bool = False) -> dict:
        """The SQL queries over the events: `chunks` are the Python feed's (their -1 chunks exploded
        into event Rows), or with `jvm` the JVM feed's event Rows themselves."""
        fields = event_fields(job.client.schema)
        if not self.multi_stream:
            fields.append((STREAM, Types.STRING()))
        if jvm:
            rows = chunks
        else:
            rows = (chunks.filter(lambda c: c[0] == SQL_EVENTS).set_parallelism(1)
                    .flat_map(Explode(), output_type=Types.ROW_NAMED([n for n, _ in fields], [t for _, t in fields]))
                    .name("cepkit events").set_parallelism(1))
        tables = job.tables
        tables.create_temporary_view("events", events_table(job, rows, fields, source_watermark=jvm))
        for name in sorted({s for q in self.queries for s in q["inputs"]}):
            tables.create_temporary_view(name, tables.sql_query(f"SELECT * FROM events WHERE `stream` = '{name}'"))
        if self.table_path:
            frame = pq.read_table(self.table_path).to_pandas()
            tables.create_temporary_view("T", tables.from_pandas(frame))
        streams = {}
        for q in self.queries:
            if q["id"] in self.sql:
                table = tables.sql_query(self.sql[q["id"]])
                columns = [c for c in [*q["fields"], "ingestTS"] if c in table.get_schema().get_field_names()]
                job.output(table, {q["id"]: columns}, jvm=jvm)
                streams[q["id"]] = columns
        return streams
