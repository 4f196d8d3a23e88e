"""The PySpark translation of microbenchmark workloads (thesis chapter 4, Q1-Q7).

`translate_micro(MicroTranslation)` writes one program per workload (templates/pyspark_micro.py.j2):
the workload's query literals (translators/micro_literal.py) as data, each query's plan (`PLANS`,
chosen here from the plan family run.work, `query_plan`), what the program reports of them (`WORK`),
and the wiring to the Spark runtime's plan (spark_runtime/micro_plan.py). specs/TRANSLATION.md
("Plan families", "The PySpark microbenchmark program") says why each kind is planned the way it is.
"""

from __future__ import annotations

import json

from kit import __version__
from kit.errors import CepkitError
from kit.outputlog import INGEST_TS
from translators.micro_literal import query_literal
from translators.render import render
from translators.request import MicroTranslation

# A query's plan on Spark (the program's PLANS; spark_runtime/micro_plan.py builds each):
FILTER = "filter"                    # where + select (all filters in one pass)
BROADCAST_JOIN = "broadcast_join"    # J2: a stream-static join with the table broadcast
LOOKUP_JOIN = "lookup_join"          # J3: per-batch key lookups in PostgreSQL from mapInPandas
JDBC_JOIN = "jdbc_join"              # J3, run.database_join = "jdbc": Spark's JDBC source, broadcast
SPARK_WINDOW = "spark_window"        # Q3 on Spark's window() (run.work = "operators")
INTERVAL_JOIN = "interval_join"      # a keyed all-all pattern as Spark's stream-stream interval join
JVM_WINDOW = "jvm_window"            # Q3/Q4: the paned windows in the JVM (cepkit.spark.WindowRealTime)
JVM_LOGIC = "jvm_logic"              # Q2, Q5/J1, Q7: cepkit.logic in transformWithState (cepkit.spark.LogicPlan)
PYTHON_CORE = "python_core"          # a core of runtime_common/micro_cores in transformWithStateInPandas
DRIVER_CORE = "driver_core"          # a core on Spark's driver once per micro-batch (run.work = "driver")
# The plans that shuffle the source's events (one shuffle each, but one for all JVM_LOGIC queries and
# one for all PYTHON_CORE queries, which share their operator).
SHUFFLING = (SPARK_WINDOW, INTERVAL_JOIN, JVM_WINDOW)
_SPARK_TYPES = {"int": "int", "long": "long", "double": "double"}
# Why real-time mode cannot run a plan (specs/TRANSLATION.md, "Spark's real-time mode"): it needs an
# operator the mode's allow-list (RealTimeModeAllowlist, Spark 4.3) does not hold.
_NOT_REAL_TIME = {
    PYTHON_CORE: "runs on a Python core in transformWithStateInPandas (run.work = \"python\"), and real-time mode "
                 "allows no Python (run.work = \"engine\" runs it in the JVM)",
    DRIVER_CORE: "runs on a Python core on Spark's driver (run.work = \"driver\"), and real-time mode allows no "
                 "Python nor foreachBatch (run.work = \"engine\" runs it in the JVM)",
    LOOKUP_JOIN: "looks its keys up in PostgreSQL from Python (mapInPandas), and real-time mode allows no Python",
    JDBC_JOIN: "re-reads the table in every micro-batch, which a real-time batch (seconds long) does not do",
}
# The Java logic of each kind JVM_LOGIC runs (runtime_common/java/cepkit/logic).
_JAVA_LOGIC = {"count_window": "CountWindowLogic", "window_join": "WindowJoinLogic", "pattern": "PatternLogic"}


def joinable_pattern(q: dict) -> bool:
    """Whether a pattern's answer is exactly an interval self-join's (specs/TRANSLATION.md): a key,
    and all-all consumption (every earlier candidate in the window pairs with the event; no
    candidate is ever consumed)."""
    return q["kind"] == "pattern" and bool(q.get("key")) and q["consumption"] == "all-all"


def query_plan(q: dict, work: str, trigger: str = "micro-batch", database_join: str = "lookup") -> str:
    """The plan of query literal `q` in plan family `work` (specs/TRANSLATION.md, "Plan families"):
    Spark's own operators where they say the query (filters, table joins; with "operators" also Q3's
    window() and a keyed all-all pattern's interval join, which real-time mode does not run), the
    Java logic in the JVM for the other stateful kinds ("engine", "operators", "jvm"), or the kit's
    Python cores ("python": in the executors; "driver": on the driver)."""
    kind = q["kind"]
    if kind == "filter":
        return FILTER
    if kind == "table_join":
        if q["storage"] == "memory":
            return BROADCAST_JOIN
        return JDBC_JOIN if database_join == "jdbc" else LOOKUP_JOIN
    if work == "python":
        return PYTHON_CORE
    if work == "driver":
        return DRIVER_CORE
    operators = work == "operators" and trigger == "micro-batch"
    if kind == "time_window":
        # Q4 keeps the paned plan in any family: its two levels are the point of Q4.
        return SPARK_WINDOW if operators and not q["paned"] else JVM_WINDOW
    if operators and joinable_pattern(q):
        return INTERVAL_JOIN
    return JVM_LOGIC


def plan_text(q: dict, plan: str) -> str:
    """One query's plan and where its per-event work runs, as the program reports it."""
    kind = q["kind"]
    if plan == FILTER:
        return "Spark where + select, every filter in one pass (engine operators)"
    if plan == BROADCAST_JOIN:
        return "Spark stream-static join, the table broadcast (engine operators)"
    if plan == JDBC_JOIN:
        return "Spark's JDBC source re-read per batch, a broadcast stream-static join (engine operators)"
    if plan == LOOKUP_JOIN:
        return "key lookups in PostgreSQL per task and batch in mapInPandas (kit Python in the executors)"
    if plan == SPARK_WINDOW:
        return "Spark window() with a watermark, append mode (engine operators)"
    if plan == INTERVAL_JOIN:
        return f"Spark stream-stream interval self-join on {q['key']} (engine operators)"
    whole = "one group: the whole stream"
    if plan == JVM_WINDOW:
        by = f"keyed by its groups' buckets ({', '.join(q['group_by'])})" if q["group_by"] else whole
        return f"Java paned windows (cepkit.spark.WindowRealTime) in transformWithState, {by} (engine user code, JVM)"
    keyed = kind == "pattern" and bool(q.get("key"))
    if plan == JVM_LOGIC:
        by = f"keyed by {q['key']}" if keyed else whole
        return f"Java {_JAVA_LOGIC[kind]} in transformWithState, {by} (engine user code, JVM)"
    if plan == PYTHON_CORE:
        by = f"keyed by {q['key']} over key buckets" if keyed else whole
        return f"Python core {kind} in transformWithStateInPandas, {by} (kit Python in the executors)"
    return f"Python core {kind} on Spark's driver once per micro-batch (kit Python on the driver)"


def _signature(q: dict) -> str:
    return json.dumps({k: v for k, v in q.items() if k != "id"}, sort_keys=True, default=str)


def _representatives(literals: list[dict]) -> dict[str, str]:
    """Each query's representative: the first query identical to it but for its id (planned once,
    its rows copied to the others' streams: spark_runtime/micro_plan.shared_queries)."""
    first: dict[str, str] = {}
    return {q["id"]: first.setdefault(_signature(q), q["id"]) for q in literals}


def branches(literals: list[dict], plans: dict[str, str]) -> int:
    """Branches of the plan over the source: one for all filters, one for all the Java logic's
    queries (one operator), one per other distinct query."""
    reps = {rep for qid, rep in _representatives(literals).items() if qid == rep}
    kinds = {plans[qid] for qid in reps}
    return ((FILTER in kinds) + (JVM_LOGIC in kinds) + (PYTHON_CORE in kinds) + (DRIVER_CORE in kinds)
            + sum(1 for qid in reps if plans[qid] not in (FILTER, JVM_LOGIC, PYTHON_CORE, DRIVER_CORE)))


def shuffles(literals: list[dict], plans: dict[str, str]) -> int:
    """Shuffles of the source's events per batch: one per distinct window or interval-join query,
    one for all JVM_LOGIC queries, one for all PYTHON_CORE queries (identical queries planned once)."""
    reps = [qid for qid, rep in _representatives(literals).items() if qid == rep]
    return (sum(1 for qid in reps if plans[qid] in SHUFFLING)
            + any(plans[qid] == JVM_LOGIC for qid in reps) + any(plans[qid] == PYTHON_CORE for qid in reps))


def real_time_refusal(q: dict, plan: str) -> str | None:
    """Why query literal `q` on `plan` cannot run in real-time mode (None: it can)."""
    why = _NOT_REAL_TIME.get(plan)
    return None if why is None else f"query {q['id']} ({q['kind']}) {why}"


def output_fields(literals: list[dict]) -> list[str]:
    """One row type for every query's output: `stream`, the union of their columns, ingestTS."""
    types: dict[str, str] = {}
    for q in literals:
        for name, logical in zip(q["fields"], q["types"]):
            if types.setdefault(name, logical) != logical:
                raise CepkitError(f"query {q['id']}: output column {name} is {logical} here but "
                                  f"{types[name]} in another query of the set; rename it (as=...)")
    types.setdefault(INGEST_TS, "long")
    return ["stream string"] + [f"{n} {_SPARK_TYPES[t]}" for n, t in types.items()]


def work_record(literals: list[dict], plans: dict[str, str], work: str) -> dict:
    """What the program reports in its `started` event (run.json's plan `work`): the plan family
    and, per query, its plan and where its work runs; an identical copy says whose rows it gets."""
    reps = _representatives(literals)
    queries = {}
    for q in literals:
        rep = reps[q["id"]]
        queries[q["id"]] = (plan_text(q, plans[q["id"]]) if rep == q["id"]
                            else f"computed once as {rep}, its rows copied")
    return {"family": work, "queries": queries}


def translate_micro(req: MicroTranslation) -> str:
    w = req.workload
    literals = [query_literal(q) for q in w.queries]
    plans = {q["id"]: query_plan(q, req.work, req.trigger, req.database_join) for q in literals}
    if req.trigger == "realtime":
        refused = [why for why in (real_time_refusal(q, plans[q["id"]]) for q in literals) if why]
        if not refused and branches(literals, plans) > 1:
            # The plan unions its branches over the one source, which Spark 4.3 refuses in real-time
            # mode (STREAMING_REAL_TIME_MODE.IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED).
            refused = [f"its queries would be a union of {branches(literals, plans)} branches over one source (one "
                       f"for the filters, one for the Java logic's queries, one per other distinct query), which "
                       f"real-time mode does not allow"]
        if refused:
            raise CepkitError(f"workload {w.name}: not runnable in Spark's real-time mode (run.trigger = "
                              f"\"realtime\"): {refused[0]}" + (f"; and {len(refused) - 1} more" if len(refused) > 1 else ""))
    for q in literals:
        if plans[q["id"]] == BROADCAST_JOIN and req.table_path is None:
            raise CepkitError(f"query {q['id']}: joins table {q['table']} in memory, but no dataset table was given")
    record = work_record(literals, plans, req.work)
    return render("pyspark_micro.py.j2", workload=w.name, version=__version__, source_name=req.source_name,
                  source_sha256=req.source_sha256 or "-" * 16, queries=literals, plans=plans, work=record,
                  plan_lines=[f"{qid}: {text}." for qid, text in record["queries"].items()],
                  multi_stream=w.dataset.streams > 1, shuffles=shuffles(literals, plans),
                  table_path=str(req.table_path) if req.table_path else None,
                  output_fields=tuple(output_fields(literals)))
