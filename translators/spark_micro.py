"""The PySpark translation of microbenchmark workloads (thesis chapter 4, Q1-Q7).

`translate_micro(MicroTranslation)` writes one program per workload (templates/pyspark_micro.py.j2):
the workload's query literals (translators/micro_literal.py) as data, and the wiring to the Spark
runtime's plan (spark_runtime/micro_plan.py): filters and table joins as DataFrame operators, every
other kind as a core (runtime_common/micro_cores/) on the driver or inside one
`transformWithStateInPandas` operator (run.cores). The translator decides each query's plan (`kind`: Q3 on Spark's window(),
J3 through JDBC, a keyed all-all pattern as a stream-stream interval join, a time window in real-time
mode as the JVM's paned plan); specs/TRANSLATION.md
says why each kind is planned the way it is.
"""

from __future__ import annotations

import json

from kit import __version__
from kit.errors import CepkitError
from kit.outputlog import INGEST_TS
from translators.micro_literal import query_literal
from translators.render import render
from translators.request import MicroTranslation

# The query kinds that run as a core of runtime_common/micro_cores/ in the stateful operator.
STATEFUL_KINDS = ("count_window", "time_window", "window_join", "pattern")
# A keyed all-all pattern planned as Spark's stream-stream interval self-join (run.patterns = "join").
JOIN_PATTERN = "join_pattern"
# A time window (Q3 or Q4) in real-time mode: the JVM's paned plan (cepkit.spark.WindowRealTime), since
# Spark's own aggregation in that mode re-emits a window's row at every event that changes it.
REALTIME_WINDOW = "realtime_time_window"
_SPARK_TYPES = {"int": "int", "long": "long", "double": "double"}
# Why real-time mode cannot run a kind (specs/TRANSLATION.md, "Real-time mode"): its plan needs an
# operator the mode's allow-list (RealTimeModeAllowlist, Spark 4.3) does not hold. Filters and the
# in-memory table join (a broadcast stream-static join) are admitted, and time windows (Q3, Q4) run
# as REALTIME_WINDOW.
_NOT_REAL_TIME = {
    "count_window": "runs on a Python core (runtime_common/micro_cores), and real-time mode allows no Python",
    "window_join": "runs on a Python core (runtime_common/micro_cores), and real-time mode allows no Python",
    "pattern": "runs on a Python core (runtime_common/micro_cores), and real-time mode allows no Python",
    "database_table_join": "looks its keys up in PostgreSQL from Python (mapInPandas), and real-time mode allows "
                           "no Python",
    "jdbc_table_join": "re-reads the table in every micro-batch, which a real-time batch (seconds long) does not do",
}


def _distinct(literals: list[dict]) -> set[str]:
    """The distinct queries among literals equal but for their ids (planned once, copied at the end)."""
    return {json.dumps({k: v for k, v in q.items() if k != "id"}, sort_keys=True, default=str) for q in literals}


def _branches(literals: list[dict]) -> int:
    """Branches of the plan over the source: one for all filters (spark_runtime/micro_plan.py plans
    distinct filters in one pass), one per other distinct query."""
    return (any(q["kind"] == "filter" for q in literals)
            + len(_distinct([q for q in literals if q["kind"] != "filter"])))


def real_time_refusal(q: dict) -> str | None:
    """Why query literal `q` cannot run in real-time mode (None: it can)."""
    kind = q["kind"]
    if kind == "table_join" and q["storage"] == "database":
        kind = "database_table_join"
    why = _NOT_REAL_TIME.get(kind)
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


def joinable_pattern(q: dict) -> bool:
    """Whether a pattern's answer is exactly an interval self-join's (specs/TRANSLATION.md): a key,
    and all-all consumption (every earlier candidate in the window pairs with the event; no
    candidate is ever consumed)."""
    return q["kind"] == "pattern" and bool(q.get("key")) and q["consumption"] == "all-all"


def _shuffles(literals: list[dict], cores: str) -> int:
    """How many shuffles over the source the plan has (native windows and join patterns one each,
    identical queries being planned once; the stateful operator one for all its queries)."""
    return len(_distinct([q for q in literals if q["kind"] in ("native_time_window", JOIN_PATTERN)])) + any(
        q["kind"] in STATEFUL_KINDS and not on_driver(q, cores) for q in literals)


def _legacy_plans(work: str) -> tuple[str, str, str]:
    """(cores, time_windows, patterns) of the plan family `work` in the plans before run.work."""
    return {"driver": ("driver", "core", "core"), "python": ("operator", "core", "core"),
            "operators": ("by-kind", "native", "join")}.get(work, ("by-kind", "core", "core"))


def translate_micro(req: MicroTranslation) -> str:
    w = req.workload
    cores, time_windows, patterns = _legacy_plans(req.work)
    literals = [query_literal(q) for q in w.queries]
    for q in literals:
        # Q3 on Spark's own window(); Q4 keeps the paned core (its plan is the point of Q4).
        if req.trigger == "realtime" and q["kind"] == "time_window":
            q["kind"] = REALTIME_WINDOW
        elif time_windows == "native" and q["kind"] == "time_window" and not q["paned"]:
            q["kind"] = "native_time_window"
        if req.database_join == "jdbc" and q["kind"] == "table_join" and q["storage"] == "database":
            q["kind"] = "jdbc_table_join"
        if patterns == "join" and req.trigger == "micro-batch" and joinable_pattern(q):
            q["kind"] = JOIN_PATTERN
    if _shuffles(literals, cores) > 1 and any(q["kind"] == JOIN_PATTERN for q in literals):
        # The join plan only where it is the source's one shuffle; beside others, the pattern core
        # (which shares the stateful operator with every other core) gives the same answer.
        for q in literals:
            if q["kind"] == JOIN_PATTERN:
                q["kind"] = "pattern"
    shuffles = _shuffles(literals, cores)
    if shuffles > 1:
        # Spark 4.3 plans the input partitions of each shuffle over the Python source from its own
        # thread, over one worker socket; two at once corrupt the stream (specs/TRANSLATION.md).
        raise CepkitError(f"workload {w.name}: run.work = \"operators\" allows one native window per "
                          f"workload and no stateful query beside it ({shuffles} shuffles over the source); "
                          f"use another plan family (run.work)")
    if req.trigger == "realtime":
        refused = [why for why in map(real_time_refusal, literals) if why]
        if not refused and _branches(literals) > 1:
            # The plan unions one branch per distinct query (all filters: one) over the one source, which
            # Spark 4.3 refuses in real-time mode (STREAMING_REAL_TIME_MODE.IDENTICAL_SOURCES_IN_UNION_NOT_SUPPORTED).
            refused = [f"its queries would be a union of {_branches(literals)} branches over one source (one for "
                       f"the filters, one per other distinct query), which real-time mode does not allow"]
        if refused:
            raise CepkitError(f"workload {w.name}: not runnable in Spark's real-time mode (run.trigger = "
                              f"\"realtime\"): {refused[0]}" + (f"; and {len(refused) - 1} more" if len(refused) > 1 else ""))
    for q in literals:
        if q["kind"] == "table_join" and q["storage"] == "memory" and req.table_path is None:
            raise CepkitError(f"query {q['id']}: joins table {q['table']} in memory, but no dataset table was given")
    return render("pyspark_micro.py.j2", workload=w.name, version=__version__, source_name=req.source_name,
                  source_sha256=req.source_sha256 or "-" * 16, queries=literals, plan_lines=plan_lines(literals, cores),
                  multi_stream=w.dataset.streams > 1,
                  table_path=str(req.table_path) if req.table_path else None,
                  output_fields=tuple(output_fields(literals)), cores=cores)


def on_driver(q: dict, cores: str) -> bool:
    """Whether a stateful query's core runs on the driver (spark_runtime/driver_cores.py): every
    core with run.cores = "driver"; with "by-kind", a whole-stream query and a keyed pattern with ALL
    on the first element (its chunked core costs a batch its own events, measured 13 times the
    operator's rate on Q7), but not a keyed pattern that consumes its candidates, whose keys run over
    buckets in the operator (specs/TRANSLATION.md, "Where a core runs")."""
    consuming_keyed = q["kind"] == "pattern" and bool(q.get("key")) and not q["consumption"].startswith("all-")
    return q["kind"] in STATEFUL_KINDS and (cores == "driver" or (cores == "by-kind" and not consuming_keyed))


def plan_lines(literals: list[dict], cores: str = "operator") -> list[str]:
    """How each query is planned, for the program's docstring (spark_runtime/micro_plan.py)."""
    groups = (("Plain DataFrame operators", ("filter", "native_time_window")),
              ("A stream-stream interval self-join (state in RocksDB)", (JOIN_PATTERN,)),
              ("The paned window in the JVM (cepkit.spark.WindowRealTime)", (REALTIME_WINDOW,)),
              ("Stream-static joins with the table", ("jdbc_table_join", "memory_table_join")),
              ("Per-batch key lookups in PostgreSQL (J3)", ("table_join",)),
              ("A core in the stateful operator", tuple(STATEFUL_KINDS)),
              ("A core run on the driver once per micro-batch", ("driver_core",)))
    kinds = [("memory_table_join" if q["kind"] == "table_join" and q["storage"] == "memory"
              else "driver_core" if on_driver(q, cores) else q["kind"]) for q in literals]
    out = []
    for title, group in groups:
        ids = [f"{q['id']} ({q['kind']})" for q, k in zip(literals, kinds) if k in group]
        if ids:
            out.append(f"{title}: {', '.join(ids)}.")
    return out
