"""Writing specs as XML: the inverse of `xmlread`, so that read(write(x)) == x for every spec.

Attributes are written in a fixed order, numbers in the shortest form that reads back equal, one
element per line (a strategy is one line, so error line numbers point at one strategy). Files are
created exclusively: an existing file is never overwritten.
"""

from __future__ import annotations

import os
from pathlib import Path

from lxml import etree

from kit.atomic import atomic_write
from kit.workload.common import (SCHEMA_VERSION, STRATEGIES_KIND, SUITE_KIND, WORKLOAD_KIND, Comparison,
                                 format_number)
from kit.workload.queries import (CountWindowAggregation, Filter, Pattern, TableJoin, TimeWindowAggregation,
                                  TwoLevelAggregation, WindowJoin)
from kit.workload.query_base import Aggregate
from kit.workload.strategies import StrategySet
from kit.workload.suite import Suite, Workload


def _el(parent: etree._Element | None, tag: str, **attrs) -> etree._Element:
    """An element with the given attributes in order; None values are left out."""
    el = etree.Element(tag) if parent is None else etree.SubElement(parent, tag)
    for k, v in attrs.items():
        if v is not None:
            el.set(k.rstrip("_"), v)
    return el


def _num(v: int | float) -> str:
    return format_number(v)


def _list(names) -> str | None:
    return " ".join(names) if names else None


def strategies_element(spec: StrategySet) -> etree._Element:
    root = _el(None, "Strategies", kind=STRATEGIES_KIND, schema_version=str(SCHEMA_VERSION),
               scaleFactor=str(spec.scale_factor), seed=str(spec.seed))
    for s in spec.strategies:
        # Figure B.2's attribute order, then the owner.
        _el(root, "PairsStrategy", alias=s.alias, availableFunds=str(s.available_funds),
            symbol1=s.symbol1, symbol2=s.symbol2, periodLength=str(s.period_length),
            numPeriods=str(s.num_periods), bandsMultiplier=_num(s.bands_multiplier),
            stopLossPerc=_num(s.stop_loss_perc), user=s.user)
    return root


def _wheres(parent: etree._Element, wheres: tuple[Comparison, ...]) -> None:
    for c in wheres:
        _el(parent, "Where", field=c.field, op=c.op, value=_num(c.value))


def _aggregates(parent: etree._Element, aggs: tuple[Aggregate, ...]) -> None:
    for a in aggs:
        _el(parent, "Aggregate", function=a.function, field=a.field, as_=a.alias)


def _query(parent: etree._Element, q) -> None:
    if isinstance(q, Filter):
        el = _el(parent, q.KIND, id=q.id, input=q.input, select=_list(q.select))
        _wheres(el, q.where)
    elif isinstance(q, CountWindowAggregation):
        el = _el(parent, q.KIND, id=q.id, input=q.input, rows=str(q.rows), slide=str(q.slide),
                 groupBy=_list(q.group_by))
        _aggregates(el, q.aggregates)
    elif isinstance(q, (TimeWindowAggregation, TwoLevelAggregation)):
        el = _el(parent, q.KIND, id=q.id, input=q.input, rangeMs=str(q.range_ms), slideMs=str(q.slide_ms),
                 groupBy=_list(q.group_by))
        _aggregates(el, q.aggregates)
    elif isinstance(q, WindowJoin):
        el = _el(parent, q.KIND, id=q.id, left=q.left, right=q.right, rows=str(q.rows), leftKey=q.left_key,
                 rightKey=q.right_key, select=_list(q.select))
        _wheres(el, q.where)
    elif isinstance(q, TableJoin):
        el = _el(parent, q.KIND, id=q.id, input=q.input, table=q.table, storage=q.storage,
                 streamKey=q.stream_key, tableKey=q.table_key, select=_list(q.select))
        _wheres(el, q.where)
    elif isinstance(q, Pattern):
        el = _el(parent, q.KIND, id=q.id, withinMs=str(q.within_ms), consumption=q.consumption, key=q.key,
                 select=_list(q.select))
        for ev in (q.first, q.second):
            _wheres(_el(el, "Event", alias=ev.alias, stream=ev.stream), ev.where)
    else:
        raise TypeError(f"not a query: {q!r}")


def workload_element(w: Workload, parent: etree._Element | None = None) -> etree._Element:
    head = {} if parent is not None else {"kind": WORKLOAD_KIND, "schema_version": str(SCHEMA_VERSION)}
    el = _el(parent, "Workload", **head, name=w.name, experiment=w.experiment, metrics=_list(w.metrics),
             description=w.description or None)
    for p in w.params:
        _el(el, "Param", name=p.name, value=p.value)
    d = w.dataset
    _el(el, "Dataset", streams=str(d.streams), attributes=str(d.attributes), maxId=str(d.max_id),
        tableRows=str(d.table_rows), tableAttributes=str(d.table_attributes), zipfS=_num(float(d.zipf_s)),
        seed=str(d.seed))
    ld = w.load
    _el(el, "Load", profile=ld.profile, rateEps=_num(float(ld.rate_eps)),
        durationMs=None if ld.duration_ms is None else str(ld.duration_ms))
    qs = _el(el, "QuerySet", sharing=w.query_set.sharing)
    for q in w.query_set.queries:
        _query(qs, q)
    return el


def suite_element(suite: Suite) -> etree._Element:
    root = _el(None, "Suite", kind=SUITE_KIND, schema_version=str(SCHEMA_VERSION), name=suite.name,
               quick="true" if suite.quick else "false", description=suite.description or None)
    for w in suite.workloads:
        workload_element(w, root)
    return root


def to_xml(spec: StrategySet | Workload | Suite) -> bytes:
    if isinstance(spec, StrategySet):
        root = strategies_element(spec)
    elif isinstance(spec, Suite):
        root = suite_element(spec)
    elif isinstance(spec, Workload):
        root = workload_element(spec)
    else:
        raise TypeError(f"not a spec: {spec!r}")
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


def write_spec(spec: StrategySet | Workload | Suite, path: str | os.PathLike) -> Path:
    """Write `spec` to `path`, which must not exist yet (parent directories are created)."""
    return atomic_write(Path(path), to_xml(spec))
