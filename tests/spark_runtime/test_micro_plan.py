"""The planning rules of spark_runtime/micro_plan.py that need no Spark session: which queries are
computed once for a set of identical ones."""

from __future__ import annotations

from kit.shipped import suite_path
from kit.workload import read_suite
from spark_runtime.micro_plan import shared_queries
from translators.micro_literal import query_literal


def _literals(suite: str, workload: str):
    (w,) = [w for w in read_suite(suite_path(suite, quick=True)).workloads if w.name == workload]
    return [query_literal(q) for q in w.queries]


def test_identical_queries_are_planned_once_and_fanned_out_to_every_id():
    qs = _literals("scalability", "scalability-identical-n64")
    assert shared_queries(qs) == {"q01": [q["id"] for q in qs]} and len(qs) == 64


def test_queries_that_differ_in_anything_but_their_id_are_planned_apart():
    qs = _literals("scalability", "scalability-similar-n4")
    assert shared_queries(qs) == {q["id"]: [q["id"]] for q in qs}
    one = _literals("count-windows", "count-windows-window-sliding-r50-sum")[0]
    other = dict(one, id="q2b", rows=51)
    same = dict(one, id="q2c")
    assert shared_queries([one, other, same]) == {"q2": ["q2", "q2c"], "q2b": ["q2b"]}


def test_the_stateful_operator_gets_only_the_columns_its_cores_name():
    from spark_runtime.micro_plan import needed_columns
    cols = ["ID", "A1", "A2", "A3", "TS", "stream", "offset", "ingestTS"]
    (q2,) = _literals("count-windows", "count-windows-window-sliding-r50-sum")
    assert needed_columns(cols, [q2]) == ["ID", "A1", "TS", "offset", "ingestTS"]
    (j1,) = _literals("joins", "joins-j1-window-size-s100")
    assert needed_columns(cols, [j1]) == ["ID", "A1", "A2", "TS", "stream", "offset", "ingestTS"]
    assert needed_columns(cols, [q2, j1]) == needed_columns(cols, [j1])
