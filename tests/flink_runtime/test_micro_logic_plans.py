"""The Flink Java plan of the micro queries (flink_runtime/java/cepkit/flink/MicroFlink.java: the kit's
Java logic in a KeyedProcessFunction) gives the reference's rows (validator.micro_reference) bit for
bit and, per triggering event, in its order, on the traces the Python cores are tested with
(tests/runtime_common: count windows, time windows (Q3, Q4), window joins, patterns under every
consumption policy, keyed and unkeyed, many events sharing a TS), run as jobs in Flink's local
mini-cluster with parallelism 2: the events in feed order from one source task, each query's
relevant events keyed by its key value (keyed patterns, over both subtasks) or as one key (the
whole stream), their answers as they are determined. A control feeds one trace's events from two
sources at once (two splits interleaved): the logic then refuses the TS that goes back, or answers
wrong, which is why the programs read one split for these plans. The end-to-end runs are
tests/cepkit_app/test_flink_micro_plans_e2e.py."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from harness.environments import checkout_root, engine_python
from harness.flink_jar import build_jar
from kit.workload import (Comparison, CountWindowAggregation, Pattern, TimeWindowAggregation, TwoLevelAggregation,
                          WindowJoin)
from translators.micro_literal import query_literal
from validator.micro_inputs import merge_order
from validator.micro_reference import expected_for_query

from tests.runtime_common.logic_trace import assert_bits
from tests.runtime_common.test_core_count_window import ALL_FUNCS, _random_stream
from tests.runtime_common.test_core_pattern import LAYOUTS, PAT_SELECT, POLICIES
from tests.runtime_common.test_core_time_window import _aggs, _stream
from tests.spark_runtime.two_streams import events_of, inputs

pytestmark = [pytest.mark.flink,
              pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh")]
RUNNER = checkout_root() / "tests" / "flink_runtime" / "micro_plan_runner.py"
# Offsets per block of a split: small, so the two splits' events interleave many times over a trace.
BLOCK = 7
TYPES = {"ID": "int", "TS": "long", "stream": "string", "offset": "long", "ingestTS": "long"}


def _cases() -> list[tuple[str, object, dict]]:
    """(name, query, streams) of every trace."""
    out = []
    s4 = inputs(4)[0]
    for policy in POLICIES:
        for key in ("ID", None):
            for layout in LAYOUTS:
                for within in (60, 10**6):
                    out.append((f"pattern-{policy}-{key}-{layout}-{within}",
                                Pattern("p", *LAYOUTS[layout], within, policy, PAT_SELECT, key), s4))
        # 120 events over 300 ms: many share a TS, across both streams.
        for key, ids in (("ID", 1), ("ID", 50), (None, 4)):
            streams = inputs(ids, seed=100, n=120, span_ms=300)[0]
            out.append((f"pattern-ties-{policy}-{key}-{ids}",
                        Pattern("p", *LAYOUTS["cross"], 25, policy, PAT_SELECT, key), streams))
    single = merge_order({"S1": _random_stream()})
    for rows, slide, group_by in ((5, 1, ("ID",)), (50, 7, ("ID",)), (60, 60, ()), (20, 3, ("A2",)),
                                  (151, 1, ("ID",)), (300, 300, ("ID",))):
        out.append((f"count-{rows}-{slide}-{'-'.join(group_by) or 'none'}",
                    CountWindowAggregation("q", "S1", rows, slide, ALL_FUNCS, group_by), single))
    ties = merge_order({"S1": _random_stream(seed=9, n=300, span_ms=200)})
    out.append(("count-ties", CountWindowAggregation("q", "S1", 40, 3, ALL_FUNCS[:4], ("ID",)), ties))
    for kind in (TimeWindowAggregation, TwoLevelAggregation):
        for range_ms, slide_ms, group_by in ((1000, 1000, ()), (5000, 500, ("ID",)), (2000, 250, ("ID", "A2"))):
            out.append((f"time-{kind.__name__[:3]}-{range_ms}-{slide_ms}-{'-'.join(group_by) or 'none'}",
                        kind("q", "S1", range_ms, slide_ms, _aggs(kind), group_by), merge_order({"S1": _stream(7)})))
    s20 = inputs(20)[0]
    where = (Comparison("S1.A1", "gt", 30), Comparison("S2.A2", "le", 70))
    for rows in (1, 4, 100):
        for w in ((), where):
            out.append((f"join-{rows}-{len(w)}", WindowJoin("j", "S1", "S2", rows, "ID", "ID",
                                                            ("S2.A2", "S1.ID", "S1.A1", "S2.TS", "S1.TS"), w), s20))
    out.append(("join-right-first", WindowJoin("j", "S2", "S1", 10, "ID", "ID", ("S1.ID", "S2.A1", "S1.TS")),
                inputs(3, seed=100, n=120, span_ms=300)[0]))
    return out


def _rows(streams: dict) -> tuple[list[str], list[str], list[list]]:
    ev = events_of(streams)
    ev["ingestTS"] = ev["offset"]           # rows name their triggering event by its ingestTS
    attrs = sorted((c for c in ev.columns if c[:1] == "A" and c[1:].isdigit()), key=lambda c: int(c[1:]))
    columns = ["ID", *attrs, "TS", "stream", "offset", "ingestTS"]
    types = [TYPES.get(c, "double") for c in columns]
    cast = [int if t in ("int", "long") else str if t == "string" else float for t in types]
    values = [[f(v) for f, v in zip(cast, row)] for row in ev[columns].itertuples(index=False)]
    return columns, types, values


def _run(cases: list[dict], **extra) -> dict:
    """The cases' rows, one job per 40 plans (micro_plan_runner.py)."""
    got = {}
    for start in range(0, len(cases), 40):
        spec = {"jar": str(build_jar()), "parallelism": 2, "block": BLOCK, "cases": cases[start:start + 40], **extra}
        proc = subprocess.run([engine_python("flink"), str(RUNNER)], input=json.dumps(spec), capture_output=True,
                              text=True, timeout=900, cwd=checkout_root(), env={"PYTHONPATH": str(checkout_root()),
                                                                                "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stderr[-4000:]
        got.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return got


@pytest.fixture(scope="module")
def results():
    cases, expected = [], {}
    for i, (name, query, streams) in enumerate(_cases()):
        q = {**query_literal(query), "id": f"c{i}"}        # one job holds many: each its own id (its uid)
        columns, types, values = _rows(streams)
        # The control: events of two splits interleaved (not an unkeyed pattern or a time window,
        # whose logic refuses a TS that goes back: that job would fail, with the other cases in it).
        control = name.startswith("count-") or (name.startswith("pattern-ties") and "-None-" not in name)
        for mode in ("ordered", "splits") if control else ("ordered",):
            cases.append({"name": f"{name}/{mode}", "query": {**q, "id": f"{q['id']}-{mode}"}, "columns": columns,
                          "types": types, "rows": values, "mode": mode})
        expected[name] = (query, q, expected_for_query(query, streams, None))
    return expected, _run(cases)


def _frame(rows: list[list], q: dict) -> pd.DataFrame:
    """A case's rows, by triggering event (each trigger's rows as emitted: one key, one subtask)."""
    names = [*q["fields"], "ingestTS"]
    frame = pd.DataFrame(rows, columns=["stream", *names]) if rows else pd.DataFrame(columns=["stream", *names])
    assert (frame["stream"].str.startswith(q["id"] + "-")).all()
    frame = frame.sort_values("ingestTS", kind="stable").reset_index(drop=True)
    return pd.DataFrame({n: np.asarray(frame[n], dtype=np.float64 if t == "double" else np.int64)
                         for n, t in zip(q["fields"], q["types"])})


def _near(q: dict) -> tuple[str, ...]:
    """The columns the logic computes another way than the reference, within the validator's
    tolerance and not always to the last bit (specs/SEMANTICS.md section 2): a count window's SUM and
    AVG (the reference sums in extended precision from prefix sums, the logic exactly:
    cepkit.logic.ExactSum), a time window's SUM, AVG and STDEV (from pane partials). Every other
    column is bit for bit."""
    near = ("SUM", "AVG", "STDEV") if q["kind"] == "time_window" else ("SUM", "AVG")
    return tuple(alias for fn, _, alias in q.get("aggregates", ()) if fn in near)


def test_every_trace_matches_the_reference_bit_for_bit(results):
    expected, got = results
    nonempty = 0
    for name, (query, q, exp) in expected.items():
        rows = _frame(got[f"{name}/ordered"], q)
        try:
            assert_bits(rows, exp.reset_index(drop=True), q, near=_near(q))
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
        nonempty += len(exp) > 0
    assert nonempty >= len(expected) - 3        # the traces exercise the queries


def test_two_splits_interleaved_go_wrong(results):
    """The control: events of two splits really reach the logic out of feed order, and the answers
    then differ from the reference's."""
    expected, got = results
    wrong = 0
    for name, (query, q, exp) in expected.items():
        if f"{name}/splits" in got:
            try:
                assert_bits(_frame(got[f"{name}/splits"], q), exp.reset_index(drop=True), q, near=_near(q))
            except AssertionError:
                wrong += 1
    assert wrong >= 8, wrong


@pytest.mark.postgres
def test_j3_s_jdbc_lookup_matches_the_reference(tmp_path):
    """J3 as a JDBC lookup in Flink's async I/O operator (cepkit.flink.MicroLookup), against a
    private PostgreSQL holding the table: every event's match and the conditions on both sides, keys
    the table lacks (IDs beyond its rows), a double key (an A field) compared as a number, rows
    bit for bit with the reference's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.postgres import PostgresServer
    from kit.workload import TableJoin
    from translators.micro_literal import query_literal as literal
    from flink_runtime.jdbc import jdbc_driver_jar, jdbc_target

    rng = np.random.default_rng(4)
    table = pd.DataFrame({"ID": np.arange(1, 41, dtype=np.int32), "T1": rng.uniform(0, 100, 40),
                          "T2": rng.uniform(0, 100, 40), "T3": rng.integers(1, 30, 40).astype(np.float64)})
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), tmp_path / "T.parquet")
    streams = inputs(60, seed=7, n=200, span_ms=3000)[0]
    streams = {n: df.assign(A3=np.floor(df["A1"].to_numpy() / 2)) for n, df in streams.items()}
    queries = [
        TableJoin("j", "S1", "T", "database", "ID", "ID", ("S1.ID", "S1.A1", "T.ID", "T.T1", "T.T2")),
        TableJoin("j", "S2", "T", "database", "ID", "ID", ("S2.ID", "S2.TS", "T.T2"),
                  (Comparison("S2.A1", "lt", 50.0), Comparison("T.T1", "ge", 20.0))),
        TableJoin("j", "S1", "T", "database", "A3", "ID", ("S1.A3", "T.T3", "S1.TS")),
    ]
    cases, expected = [], {}
    for i, query in enumerate(queries):
        q = {**literal(query), "id": f"j{i}-ordered"}
        columns, types, values = _rows(streams)
        cases.append({"name": f"j3-{i}/ordered", "query": q, "columns": columns, "types": types, "rows": values,
                      "mode": "ordered"})
        expected[f"j3-{i}"] = (q, expected_for_query(query, streams, table))
    with PostgresServer(tmp_path / "postgres") as pg:
        assert pg.load_table(tmp_path / "T.parquet") == 40
        url, props = jdbc_target(pg.dsn)
        got = _run(cases, jars=[jdbc_driver_jar()], jdbc={"url": url, "properties": props})
    for name, (q, exp) in expected.items():
        assert len(exp) > 20, name
        rows = _frame(got[f"{name}/ordered"], {**q, "id": f"j{name[3:]}"})
        try:
            assert_bits(rows, exp.reset_index(drop=True), q)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
