"""The Flink translation of microbenchmark workloads: Flink SQL where it says the query, Python where not.

`translate_micro(MicroTranslation)` writes one program per workload (templates/flink_micro.py.j2)
holding the queries' literals (translators/micro_literal.py) and, for each query Flink SQL can
express with the exact meaning of specs/SEMANTICS.md, its SQL text; the Flink runtime
(flink_runtime/micro.py) runs the SQL over the feed's events as a table with event time, and the
other queries in a keyed Python function, one key per query, with the engine-neutral cores of
runtime_common (the same code the Spark plan runs). `flink_plan` decides, and says why; the table
of decisions is in specs/TRANSLATION.md ("Flink").
"""

from __future__ import annotations

from kit import __version__
from kit.errors import CepkitError
from translators.micro_literal import query_literal
from translators.render import render
from translators.request import MicroTranslation

SQL_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "=", "ne": "<>"}
SQL_AGGREGATES = {"SUM": "SUM", "AVG": "AVG", "MAX": "MAX", "MIN": "MIN", "STDEV": "STDDEV_POP", "COUNT": "COUNT"}
EVENTS = "events"           # the view of every event; one view per stream is named after it (S1, S2, ...)
TABLE = "T"                 # the join table, in memory (J2)


def flink_plan(q: dict) -> tuple[str, str]:
    """("sql" | "python", why) for a query literal."""
    kind = q["kind"]
    if kind == "filter":
        return "sql", "a WHERE clause"
    if kind == "time_window":
        if any(f not in SQL_AGGREGATES for f, _, _ in q["aggregates"]):
            return "python", "Flink SQL has no MEDIAN aggregate"
        return "sql", "a HOP window table function (Flink slices it into panes of the slide itself)"
    if kind == "table_join":
        if q["storage"] == "memory":
            return "sql", "a join with the table loaded into Flink"
        return "python", ("Flink SQL's lookup join needs the JDBC connector, which PyFlink does not ship: "
                          "one PostgreSQL query per range of events instead")
    if kind == "pattern":
        if not q.get("key"):
            return "python", "a pattern without a key would run in one task either way"
        if q["consumption"] == "all-all":
            return "sql", "an interval self-join: every earlier candidate within the window pairs with the event"
        if q["consumption"] == "one-all":
            return "sql", ("MATCH_RECOGNIZE (A Z*? B) with AFTER MATCH SKIP TO NEXT ROW: each candidate pairs "
                           "with the first event that completes it")
        return "python", (f"consumption {q['consumption']}: no MATCH_RECOGNIZE skip strategy consumes the "
                          "second element's partner")
    if kind == "count_window":
        return "python", ("the window counts the events of the whole stream and groups within it; "
                          "OVER ROWS windows count per partition")
    if kind == "window_join":
        return "python", "count windows on each side; Flink's interval joins are bounded by time, not rows"
    raise CepkitError(f"query {q['id']}: no Flink translation for kind {kind}")


def _value(v: float) -> str:
    return repr(float(v)) if v != int(v) else str(int(v))


def _cond(where, column) -> list[str]:
    return [f"{column(f)} {SQL_OPS[op]} {_value(v)}" for f, op, v in where]


def _interval(ms: int) -> str:
    """A day-time interval literal of `ms`. Not `INTERVAL 's.fff' SECOND`: SECOND's default leading
    precision is 2 digits, so 100 s and longer fail validation, and Flink's planner refuses a
    SECOND(p) wide enough for a day (measured: SECOND(5, 3) -> "DAY_INTERVAL_TYPES precision is
    not supported"). DAY TO SECOND(3) spans 99 days to the millisecond."""
    if not 0 <= ms < 100 * 86_400_000:
        raise CepkitError(f"interval of {ms} ms: Flink SQL takes 0 to 99 days")
    days, rest = divmod(int(ms), 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"INTERVAL '{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}' DAY TO SECOND(3)"


def _where(conds: list[str]) -> str:
    return f" WHERE {' AND '.join(conds)}" if conds else ""


def query_sql(q: dict) -> str:
    """The Flink SQL of a query whose plan is "sql": rows with `stream` (the query id), the
    query's fields in order and, where the triggering event is a row of the query, its
    `ingestTS`. Field names are quoted (`offset` is a keyword)."""
    kind, qid = q["kind"], q["id"]
    head = f"SELECT '{qid}' AS `stream`"
    if kind == "filter":
        cols = [f"`{s}` AS `{f}`" for s, f in zip(q["select"], q["fields"])]
        return (f"{head}, {', '.join(cols)}, `TS` AS inputTS, ingestTS FROM {q['inputs'][0]}"
                + _where(_cond(q["where"], lambda f: f"`{f}`")))
    if kind == "time_window":
        groups = [f"`{g}`" for g in q["group_by"]]
        aggs = [f"CAST({SQL_AGGREGATES[fn]}({'`' + field + '`' if field else '*'}) AS "
                f"{'BIGINT' if fn == 'COUNT' else 'DOUBLE'}) AS `{alias}`" for fn, field, alias in q["aggregates"]]
        # The closing event is not a row of the window: inputTS is the window's end, the earliest
        # TS a closing event can have (specs/TRANSLATION.md).
        return (f"{head}, {', '.join(groups + aggs)}, window_end AS windowEnd, window_end AS inputTS "
                f"FROM TABLE(HOP(TABLE {q['inputs'][0]}, DESCRIPTOR(rowtime), {_interval(q['slide_ms'])}, "
                f"{_interval(q['range_ms'])})) GROUP BY {', '.join(['window_start', 'window_end'] + groups)}")
    if kind == "table_join":
        def column(name: str) -> str:
            side, _, field = name.partition(".")
            return f"t.`{field}`" if side == q["table"] else f"s.`{field or side}`"

        cols = [f"{column(s)} AS `{f}`" for s, f in zip(q["select"], q["fields"])]
        conds = [f"s.`{q['stream_key']}` = t.`{q['table_key']}`"] + _cond(q["where"], column)
        return (f"{head}, {', '.join(cols)}, s.`TS` AS inputTS, s.ingestTS AS ingestTS "
                f"FROM {q['input']} s JOIN {TABLE} t ON {' AND '.join(conds)}")
    if kind == "pattern":
        a1, a2 = q["first"]["alias"], q["second"]["alias"]

        def column(name: str) -> str:
            alias, _, field = name.partition(".")
            return f"{alias}.`{field}`"

        cols = [f"{column(s)} AS `{f}`" for s, f in zip(q["select"], q["fields"])]
        first = _cond(q["first"]["where"], lambda f: f"{a1}.`{f}`") + [f"{a1}.`stream` = '{q['first']['stream']}'"]
        second = _cond(q["second"]["where"], lambda f: f"{a2}.`{f}`") + [f"{a2}.`stream` = '{q['second']['stream']}'"]
        key = q["key"]
        if q["consumption"] == "all-all":
            conds = ([f"{a1}.`{key}` = {a2}.`{key}`", f"{a2}.rowtime >= {a1}.rowtime",
                      f"{a2}.rowtime < {a1}.rowtime + {_interval(q['within_ms'])}",
                      f"{a1}.`offset` < {a2}.`offset`"] + first + second)
            return (f"{head}, {', '.join(cols)}, {a2}.`TS` AS inputTS, {a2}.ingestTS AS ingestTS "
                    f"FROM {EVENTS} {a1}, {EVENTS} {a2} WHERE {' AND '.join(conds)}")
        measures = ", ".join(cols + [f"{a2}.`TS` AS inputTS", f"{a2}.ingestTS AS ingestTS"])
        return (f"{head}, {', '.join('`' + f + '`' for f in q['fields'][:-1])}, inputTS, ingestTS "
                f"FROM {EVENTS} MATCH_RECOGNIZE (PARTITION BY `{key}` ORDER BY rowtime, `offset` "
                f"MEASURES {measures} ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
                f"PATTERN ({a1} z*? {a2}) WITHIN {_interval(q['within_ms'])} "
                f"DEFINE {a1} AS {' AND '.join(first)}, {a2} AS {' AND '.join(second)})")
    raise CepkitError(f"query {qid}: kind {kind} has no SQL form")


def translate_micro(req: MicroTranslation) -> str:
    w = req.workload
    literals = [query_literal(q) for q in w.queries]
    plans = {q["id"]: flink_plan(q) for q in literals}
    for q in literals:
        if q["kind"] == "table_join" and q["storage"] == "memory" and req.table_path is None:
            raise CepkitError(f"query {q['id']}: joins table {q['table']} in memory, but no dataset table was given")
    sql = {q["id"]: query_sql(q) for q in literals if plans[q["id"]][0] == "sql"}
    lines = [f"{q['id']} ({q['kind']}): {'Flink SQL' if plans[q['id']][0] == 'sql' else 'Python'}, "
             f"{plans[q['id']][1]}." for q in literals]
    # The events' way in and the answers' way out (flink_runtime/micro.py decides the same way).
    if len(sql) == len(literals):
        lines.append("Events and answers: read and answered in the JVM (flink_runtime/jvm.py: the Java feed "
                     "source and sink, no Python on their way; run.connectors = \"python\" uses the Python "
                     "feed and emitter instead).")
    else:
        lines.append("Events and answers: through the Python feed and emitter (flink_runtime/feed.py, "
                     "emitter.py): the workload's Python queries read the feed's ranges in Python.")
    return render("flink_micro.py.j2", workload=w.name, version=__version__, source_name=req.source_name,
                  source_sha256=req.source_sha256 or "-" * 16, queries=literals, sql=sql, plan_lines=lines,
                  multi_stream=w.dataset.streams > 1,
                  table_path=str(req.table_path) if req.table_path else None)
