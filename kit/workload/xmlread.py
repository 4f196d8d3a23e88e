"""Reading spec files: XML syntax, then the XSD, then the typed model, each error one line.

`read_spec` returns a `StrategySet`, `Workload` or `Suite` depending on the root element. Errors
are `CepkitError`s of the form `file:line: what is wrong`; the line is that of the element the
problem is about (for a cross-check such as "query q2 reads an unknown stream", the query's
element, not the workload's).
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from lxml import etree

from kit.errors import CepkitError, at
from kit.inputs import read_input_bytes
from kit.workload.aux import PairsAux
from kit.workload.common import Comparison, SpecError, parse_number
from kit.workload.queries import (CountWindowAggregation, Filter, Pattern, PatternEvent, QuerySet, TableJoin,
                                  TimeWindowAggregation, TwoLevelAggregation, WindowJoin)
from kit.workload.query_base import Aggregate
from kit.workload.strategies import PairsStrategy, StrategySet, check_against_aux
from kit.workload.suite import Dataset, Load, Param, Suite, Workload
from kit.workload.xsd import ROOT_SCHEMAS, first_error

Spec = StrategySet | Workload | Suite


def _children(el: etree._Element, tag: str | None = None) -> list[etree._Element]:
    """Element children (comments and processing instructions skipped), optionally of one tag."""
    return [c for c in el if isinstance(c.tag, str) and (tag is None or c.tag == tag)]


def _names(el: etree._Element, attr: str) -> tuple[str, ...]:
    return tuple((el.get(attr) or "").split())


class _Reader:
    def __init__(self, source: str, aux: PairsAux | None):
        self.source = source
        self.aux = aux

    @contextlib.contextmanager
    def located(self, el: etree._Element, lines: dict[str, int] | None = None) -> Iterator[None]:
        """Turn a model `SpecError` into a located error: the line of `el`, or of the element `ref` names."""
        try:
            yield
        except SpecError as e:
            line = (lines or {}).get(e.ref, el.sourceline) if e.ref else el.sourceline
            raise at(self.source, line, e.message) from None

    # --- Pairs strategies ---------------------------------------------------------------------

    def strategies(self, root: etree._Element) -> StrategySet:
        items, lines = [], {}
        for el in _children(root, "PairsStrategy"):
            with self.located(el):
                s = PairsStrategy(alias=el.get("alias"), user=el.get("user"),
                                  available_funds=int(el.get("availableFunds")),
                                  symbol1=el.get("symbol1"), symbol2=el.get("symbol2"),
                                  period_length=int(el.get("periodLength")), num_periods=int(el.get("numPeriods")),
                                  bands_multiplier=float(el.get("bandsMultiplier")),
                                  stop_loss_perc=float(el.get("stopLossPerc")))
                if self.aux is not None:
                    check_against_aux(s, self.aux)
            items.append(s)
            lines.setdefault(s.alias, el.sourceline)
        with self.located(root, lines):
            return StrategySet(scale_factor=int(root.get("scaleFactor")), seed=int(root.get("seed")),
                               strategies=tuple(items))

    # --- workloads ----------------------------------------------------------------------------

    def suite(self, root: etree._Element) -> Suite:
        workloads, lines = [], {}
        for el in _children(root, "Workload"):
            w = self.workload(el)
            workloads.append(w)
            lines.setdefault(w.name, el.sourceline)
        with self.located(root, lines):
            return Suite(name=root.get("name"), quick=root.get("quick") in ("true", "1"),
                         workloads=tuple(workloads), description=root.get("description") or "")

    def workload(self, el: etree._Element) -> Workload:
        params = []
        for p in _children(el, "Param"):
            with self.located(p):
                params.append(Param(p.get("name"), p.get("value")))
        d = _children(el, "Dataset")[0]
        with self.located(d):
            dataset = Dataset(streams=int(d.get("streams")), attributes=int(d.get("attributes")),
                              max_id=int(d.get("maxId")), table_rows=int(d.get("tableRows")),
                              table_attributes=int(d.get("tableAttributes")), zipf_s=float(d.get("zipfS")),
                              seed=int(d.get("seed")))
        ld = _children(el, "Load")[0]
        with self.located(ld):
            load = Load(profile=ld.get("profile"), rate_eps=float(ld.get("rateEps")),
                        duration_ms=int(ld.get("durationMs")) if ld.get("durationMs") is not None else None)
        qs = _children(el, "QuerySet")[0]
        queries, lines = [], {}
        for q in _children(qs):
            with self.located(q):
                query = _QUERY_READERS[q.tag](self, q)
            queries.append(query)
            lines.setdefault(query.id, q.sourceline)
        with self.located(qs, lines):
            query_set = QuerySet(qs.get("sharing"), tuple(queries))
        with self.located(el, lines):
            return Workload(name=el.get("name"), experiment=el.get("experiment"), metrics=_names(el, "metrics"),
                            dataset=dataset, load=load, query_set=query_set, params=tuple(params),
                            description=el.get("description") or "")

    def wheres(self, el: etree._Element) -> tuple[Comparison, ...]:
        out = []
        for w in _children(el, "Where"):
            with self.located(w):
                out.append(Comparison(w.get("field"), w.get("op"), parse_number(w.get("value"))))
        return tuple(out)

    def aggregates(self, el: etree._Element) -> tuple[Aggregate, ...]:
        out = []
        for a in _children(el, "Aggregate"):
            with self.located(a):
                out.append(Aggregate(a.get("function"), a.get("field"), a.get("as")))
        return tuple(out)

    def filter(self, el):
        return Filter(id=el.get("id"), input=el.get("input"), select=_names(el, "select"), where=self.wheres(el))

    def count_window(self, el):
        return CountWindowAggregation(id=el.get("id"), input=el.get("input"), rows=int(el.get("rows")),
                                      slide=int(el.get("slide")), aggregates=self.aggregates(el),
                                      group_by=_names(el, "groupBy"))

    def time_window(self, el):
        cls = TwoLevelAggregation if el.tag == TwoLevelAggregation.KIND else TimeWindowAggregation
        return cls(id=el.get("id"), input=el.get("input"), range_ms=int(el.get("rangeMs")),
                   slide_ms=int(el.get("slideMs")), aggregates=self.aggregates(el), group_by=_names(el, "groupBy"))

    def window_join(self, el):
        return WindowJoin(id=el.get("id"), left=el.get("left"), right=el.get("right"), rows=int(el.get("rows")),
                          left_key=el.get("leftKey"), right_key=el.get("rightKey"), select=_names(el, "select"),
                          where=self.wheres(el))

    def table_join(self, el):
        return TableJoin(id=el.get("id"), input=el.get("input"), table=el.get("table"), storage=el.get("storage"),
                         stream_key=el.get("streamKey"), table_key=el.get("tableKey"),
                         select=_names(el, "select"), where=self.wheres(el))

    def pattern(self, el):
        events = []
        for ev in _children(el, "Event"):
            with self.located(ev):
                events.append(PatternEvent(ev.get("alias"), ev.get("stream"), self.wheres(ev)))
        return Pattern(id=el.get("id"), first=events[0], second=events[1], within_ms=int(el.get("withinMs")),
                       consumption=el.get("consumption"), select=_names(el, "select"), key=el.get("key"))


_QUERY_READERS = {
    Filter.KIND: _Reader.filter,
    CountWindowAggregation.KIND: _Reader.count_window,
    TimeWindowAggregation.KIND: _Reader.time_window,
    TwoLevelAggregation.KIND: _Reader.time_window,
    WindowJoin.KIND: _Reader.window_join,
    TableJoin.KIND: _Reader.table_join,
    Pattern.KIND: _Reader.pattern,
}
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=False, huge_tree=True)


def parse_spec(data: bytes, source: str, *, aux: PairsAux | None = None) -> Spec:
    """Parse spec text; `source` names it in errors. With `aux`, strategies must watch its pairs."""
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as e:
        msg = str(e.msg).split(", line ")[0]
        raise at(source, e.lineno, f"malformed XML: {msg}") from None
    if root.getroottree().docinfo.doctype:
        # Entities could pull in other files; a spec never needs a DTD.
        raise at(source, 1, "a DOCTYPE is not allowed in spec files")
    tag = root.tag if isinstance(root.tag, str) else ""
    if tag not in ROOT_SCHEMAS:
        raise at(source, root.sourceline,
                 f"unknown root element <{tag}> (expected {', '.join(f'<{t}>' for t in ROOT_SCHEMAS)})")
    # Specs carry no text, only elements and attributes; whitespace between an element's start and
    # end tag (Figure B.2 writes <PairsStrategy ...>\n</PairsStrategy>) must not make it invalid.
    for el in root.iter():
        if isinstance(el.tag, str) and el.text is not None and not el.text.strip():
            el.text = None
    err = first_error(root.getroottree(), ROOT_SCHEMAS[tag])
    if err is not None:
        raise at(source, err[0], err[1])
    reader = _Reader(source, aux)
    if tag == "Strategies":
        return reader.strategies(root)
    if tag == "Suite":
        return reader.suite(root)
    return reader.workload(root)


def read_spec(path: str | os.PathLike, *, aux: PairsAux | None = None) -> Spec:
    """Read any spec file (strategies, workload or suite)."""
    source = os.fspath(path)
    data = read_input_bytes(source, "spec", what="a spec file", missing="file not found")
    return parse_spec(data, source, aux=aux)


def _read_kind(path, cls, what: str, **kw):
    spec = read_spec(path, **kw)
    if not isinstance(spec, cls):
        raise CepkitError(f"{os.fspath(path)}: expected {what}, found a {type(spec).__name__} spec")
    return spec


def read_strategies(path: str | os.PathLike, *, aux: PairsAux | None = None) -> StrategySet:
    return _read_kind(path, StrategySet, "a <Strategies> file", aux=aux)


def read_suite(path: str | os.PathLike) -> Suite:
    return _read_kind(path, Suite, "a <Suite> file")


def read_workload(path: str | os.PathLike) -> Workload:
    return _read_kind(path, Workload, "a <Workload> file")
