"""The Flink translation of microbenchmark workloads: Flink SQL where it says the query, the kit's Java
logic in Flink's keyed operators where not, the kit's Python cores on request.

`translate_micro(MicroTranslation)` writes one program per workload (templates/flink_micro.py.j2)
holding the queries' literals (translators/micro_literal.py), each query's plan ("sql", "jvm",
"python") in the plan family run.work, and, for each query planned as Flink SQL (which says it
with the exact meaning of specs/SEMANTICS.md), its SQL text. The Flink runtime
(flink_runtime/micro.py) runs the SQL over the feed's events as a table with event time, the
"jvm" queries as the Java logic (runtime_common/java/cepkit/logic) in a KeyedProcessFunction
(cepkit.flink.MicroFlink), and the "python" ones in a keyed Python function with the
engine-neutral cores of runtime_common (the same code the Spark plan runs). `flink_plan` decides,
and says why; the table of decisions is in specs/TRANSLATION.md ("Microbenchmarks on Flink").
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


# The plan families run.work names (specs/TRANSLATION.md, "Plan families"); "driver" is Spark's only.
FAMILIES = ("engine", "operators", "jvm", "python")
# A query's plans: Flink SQL, the kit's Java logic, the kit's Python logic (flink_runtime/micro.py).
PLANS = ("sql", "jvm", "python")
# Where each plan's per-event work runs, in words (the program's doc).
WHERE = {"sql": "Flink SQL, in Flink's own operators",
         "jvm": ("the kit's Java logic (cepkit.logic) as user code in a Flink KeyedProcessFunction (J3: a "
                 "JDBC lookup in Flink's async I/O operator)"),
         "python": "Python user code in a keyed PyFlink function (QueryFunction), one key per query"}


def flink_plan(q: dict, work: str = "engine") -> tuple[str, str]:
    """("sql" | "jvm" | "python", why) for a query literal in the plan family `work`."""
    kind = q["kind"]
    if work not in FAMILIES:
        raise CepkitError(f"run.work = {work!r}: Flink's plan families are {', '.join(FAMILIES)} "
                          "(\"driver\" is Spark's only)")
    if kind == "filter":
        return "sql", "a WHERE clause"
    if kind == "table_join":
        if q["storage"] == "memory":
            return "sql", "a join with the table loaded into Flink"
        if work == "python":
            return "python", "run.work = \"python\": one PostgreSQL query per range of events, in Python"
        return "jvm", ("Flink SQL's lookup join needs the JDBC connector, which PyFlink does not ship: Flink's "
                       "async I/O operator asks PostgreSQL through Debian's JDBC driver, one query per batch of "
                       "pending events")
    if kind not in ("time_window", "pattern", "count_window", "window_join"):
        raise CepkitError(f"query {q['id']}: no Flink translation for kind {kind}")
    if work == "python":
        return "python", f"run.work = \"python\": the kit's Python core ({kind})"
    if kind == "time_window":
        if work == "jvm":
            return "jvm", "run.work = \"jvm\": panes of the slide, the whole stream as one key"
        if any(f not in SQL_AGGREGATES for f, _, _ in q["aggregates"]):
            return "jvm", "Flink SQL has no MEDIAN aggregate: panes of the slide, the whole stream as one key"
        return "sql", "a HOP window table function (Flink slices it into panes of the slide itself)"
    if kind == "pattern":
        if not q.get("key"):
            return "jvm", "a pattern without a key: one sequence, the whole stream as one key"
        if work == "operators" and q["consumption"] == "all-all":
            return "sql", "an interval self-join: every earlier candidate within the window pairs with the event"
        if work == "jvm":
            return "jvm", "run.work = \"jvm\": keyed by the key's value, candidates in Flink keyed state"
        if q["consumption"] == "all-all":
            return "jvm", ("Flink SQL's interval self-join says it too (run.work = \"operators\"), but keeps both "
                           "sides' rows and sustains a quarter of the Java logic's rate on Q7 (results/throughput): "
                           "keyed by the key's value, candidates in Flink keyed state")
        if q["consumption"] == "one-all":
            why = ("MATCH_RECOGNIZE (A Z*? B, AFTER MATCH SKIP TO NEXT ROW) pairs the same events but answers "
                   "only once the watermark passes the trigger, which it never does at the run's last TS")
        else:
            why = "no MATCH_RECOGNIZE skip strategy consumes the second element's partner"
        return "jvm", (f"consumption {q['consumption']}: {why}; keyed by the key's value, candidates in Flink "
                       "keyed state")
    if kind == "count_window":
        return "jvm", ("the window counts the events of the whole stream and groups within it (OVER ROWS "
                       "windows count per partition): the whole stream as one key")
    return "jvm", ("count windows on each side (Flink's interval joins are bounded by time, not rows): the "
                   "whole stream as one key")


def plan_label(q: dict, plan: str) -> str:
    """A query's plan in a few words (the `started` event's `work`, run.json's plan)."""
    if plan == "sql":
        what = {"filter": "WHERE", "time_window": "HOP window", "table_join": "join with the table"}.get(q["kind"])
        if what is None:
            what = "interval self-join"
        return f"Flink SQL ({what})"
    if plan == "jvm" and q["kind"] == "table_join":
        return "Java JDBC lookup in Flink's async I/O operator"
    if plan == "jvm":
        how = f"keyed by {q['key']}" if q["kind"] == "pattern" and q.get("key") else "one key"
        return f"Java logic in a KeyedProcessFunction ({how})"
    if q["kind"] == "table_join":
        return "Python PostgreSQL lookup in a keyed PyFlink function"
    return "Python core in a keyed PyFlink function (one key per query)"


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
        if key and q["consumption"] == "all-all":
            conds = ([f"{a1}.`{key}` = {a2}.`{key}`", f"{a2}.rowtime >= {a1}.rowtime",
                      f"{a2}.rowtime < {a1}.rowtime + {_interval(q['within_ms'])}",
                      f"{a1}.`offset` < {a2}.`offset`"] + first + second)
            return (f"{head}, {', '.join(cols)}, {a2}.`TS` AS inputTS, {a2}.ingestTS AS ingestTS "
                    f"FROM {EVENTS} {a1}, {EVENTS} {a2} WHERE {' AND '.join(conds)}")
    raise CepkitError(f"query {qid}: kind {kind} has no SQL form")


def translate_micro(req: MicroTranslation) -> str:
    w = req.workload
    if req.work not in FAMILIES:
        raise CepkitError(f"workload {w.name}: run.work = {req.work!r} has no Flink plan (Flink's plan families: "
                          f"{', '.join(FAMILIES)})")
    literals = [query_literal(q) for q in w.queries]
    chosen = {q["id"]: flink_plan(q, req.work) for q in literals}
    for q in literals:
        if q["kind"] == "table_join" and q["storage"] == "memory" and req.table_path is None:
            raise CepkitError(f"query {q['id']}: joins table {q['table']} in memory, but no dataset table was given")
    plans = {qid: plan for qid, (plan, _) in chosen.items()}
    sql = {q["id"]: query_sql(q) for q in literals if plans[q["id"]] == "sql"}
    work = {"family": req.work, "queries": {q["id"]: plan_label(q, plans[q["id"]]) for q in literals}}
    lines = [f"Plan family run.work = \"{req.work}\" (specs/TRANSLATION.md, \"Plan families\"):"]
    lines += [f"- {plan}: {WHERE[plan]}." for plan in PLANS if plan in plans.values()]
    lines += [f"{q['id']} ({q['kind']}): {plan_label(q, plans[q['id']])}; {chosen[q['id']][1]}." for q in literals]
    # The events' way in and the answers' way out (flink_runtime/micro.py decides the same way).
    if all(p != "python" for p in plans.values()):
        lines.append("Events and answers: read and answered in the JVM (flink_runtime/jvm.py: the Java feed "
                     "source and sink, no Python on their way; run.connectors = \"python\" uses the Python "
                     "feed and emitter instead).")
    else:
        lines.append("Events and answers: through the Python feed and emitter (flink_runtime/feed.py, "
                     "emitter.py): the workload's Python queries read the feed's ranges in Python"
                     + (" (the Java queries read its events exploded into Rows, in feed order, and answer "
                        "from the JVM)." if "jvm" in plans.values() else "."))
    return render("flink_micro.py.j2", workload=w.name, version=__version__, source_name=req.source_name,
                  source_sha256=req.source_sha256 or "-" * 16, queries=literals, sql=sql, plan_lines=lines,
                  plans=plans, work=work, multi_stream=w.dataset.streams > 1,
                  table_path=str(req.table_path) if req.table_path else None)
