"""Comparing an engine's rows of one output stream with the expected rows (thesis B.5).

Rows are matched on key columns (exact equality) and, where several rows share a key, in order of
their compared fields: each side's rows with that key are sorted by the compared fields and the
k-th expected row pairs with the k-th engine row. The order in which an engine emits rows that
share a key carries no meaning (Spark's joins shuffle a batch's rows), so it must not decide. A
matched pair is *correct* when every compared field agrees (doubles within `Tolerance`, everything
else exactly, null equals null), else *wrong*; an expected row without a partner is *missing* and an
engine row without one is *undue* (Figure B.3). An undue row that is an exact copy (keys and
compared fields) of a matched engine row is listed as a *duplicate*: an answer the engine gave
twice; it counts as undue. Rows may come in any order and any number of times: the outcome is a
count, never an error. A stream passes only when there is nothing missing, undue or wrong. Incorrect answers are kept side by side, expected next to engine values (Figure
B.5), up to a display limit; the counts always cover every row.

Compared fields are the schema's fields minus the keys and minus `NOT_COMPARED`: `inputTS` is a
wall-clock stamp that differs from run to run, and the harness stamps are not part of the answer.

Everything is vectorized: keys are turned into one integer code per row by joint factorization of
both sides, so matching is a hash lookup on int64 and millions of rows take seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from kit.errors import CepkitError
from kit.outputlog import ARRIVAL_TS, BATCH_ID, INGEST_TS
from kit.records import INDICATOR, MARKET_ORDER, RecordSchema
from kit.workload import INPUT_TS

# Stamps of when things happened, not what the engine computed.
NOT_COMPARED = (INPUT_TS, ARRIVAL_TS, INGEST_TS, BATCH_ID)
PAIRS_KEYS = {
    INDICATOR.name: ("strategy", "inputTickTS"),
    MARKET_ORDER.name: ("strategy", "inputTickTS", "type", "symbol"),
}
MISSING, UNDUE, WRONG = "missing", "undue", "wrong"
DUPLICATE = "duplicate"          # listed outcome of an undue row that repeats a matched engine row
DEFAULT_LIST_LIMIT = 1000


@dataclass(frozen=True)
class Tolerance:
    """Doubles a (engine) and e (expected) agree when |a - e| <= abs + rel * |e|."""

    rel: float = 1e-9
    abs: float = 1e-9

    def __post_init__(self) -> None:
        for name in ("rel", "abs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise CepkitError(f"tolerance {name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict:
        return {"rel": self.rel, "abs": self.abs}


@dataclass(frozen=True)
class StreamComparison:
    """Outcome for one output stream (Figure B.3) and its incorrect answers (Figure B.5).

    `incorrect` lists at most `list_limit` rows, ordered by the first long key (the input tick
    time for Pairs), then expected-row order, with undue rows after in engine-row order. Its
    columns: `outcome` (missing, undue, wrong, or duplicate for an undue row that is an exact copy
    of a matched engine row; `duplicates` counts those, a part of `undue`), the keys, `differs` (the fields that disagree,
    comma-separated), and `expected.<field>` / `engine.<field>` for every compared field.
    """

    stream: str
    keys: tuple[str, ...]
    compared: tuple[str, ...]
    tolerance: Tolerance
    expected: int
    engine: int
    correct: int
    missing: int
    undue: int
    wrong: int
    mismatches_by_field: dict[str, int] = field(default_factory=dict)
    incorrect: pd.DataFrame = field(default_factory=pd.DataFrame)
    list_limit: int = DEFAULT_LIST_LIMIT
    duplicates: int = 0              # undue rows that repeat a matched engine row exactly

    def __post_init__(self) -> None:
        counts = (self.expected, self.engine, self.correct, self.missing, self.undue, self.wrong)
        if min(counts) < 0:
            raise CepkitError(f"stream {self.stream}: negative answer count {counts}")
        if self.correct + self.wrong + self.missing != self.expected \
                or self.correct + self.wrong + self.undue != self.engine:
            raise CepkitError(f"stream {self.stream}: answer counts do not add up {counts}")
        if not 0 <= self.duplicates <= self.undue:
            raise CepkitError(f"stream {self.stream}: {self.duplicates} duplicates among {self.undue} undue answers")
        if len(self.incorrect) > min(self.list_limit, self.incorrect_count):
            raise CepkitError(f"stream {self.stream}: more incorrect answers listed than counted")

    @property
    def passed(self) -> bool:
        return self.missing == 0 and self.undue == 0 and self.wrong == 0

    @property
    def verdict(self) -> str:
        return "PASSED" if self.passed else "FAILED"

    @property
    def incorrect_count(self) -> int:
        return self.missing + self.undue + self.wrong

    def to_dict(self) -> dict:
        return {"stream": self.stream, "verdict": self.verdict, "keys": list(self.keys),
                "compared": list(self.compared), "tolerance": self.tolerance.to_dict(),
                "expected": self.expected, "engine": self.engine, "correct": self.correct,
                "missing": self.missing, "undue": self.undue, "duplicates": self.duplicates, "wrong": self.wrong,
                "mismatches_by_field": dict(self.mismatches_by_field),
                "incorrect_listed": len(self.incorrect)}


def default_keys(schema: RecordSchema) -> tuple[str, ...]:
    """Pairs streams use PAIRS_KEYS; any other stream is keyed on its non-double compared fields."""
    if schema.name in PAIRS_KEYS:
        return PAIRS_KEYS[schema.name]
    return tuple(f.name for f in schema.fields if f.type != "double" and f.name not in NOT_COMPARED)


def compared_fields(schema: RecordSchema, keys: Sequence[str]) -> tuple[str, ...]:
    return tuple(n for n in schema.names if n not in keys and n not in NOT_COMPARED)


def all_passed(results: Sequence[StreamComparison]) -> bool:
    return bool(results) and all(r.passed for r in results)


def compare_stream(expected: pd.DataFrame, engine: pd.DataFrame, schema: RecordSchema,
                   keys: Sequence[str] | None = None, tolerance: Tolerance = Tolerance(),
                   list_limit: int = DEFAULT_LIST_LIMIT) -> StreamComparison:
    """Compare the rows of one stream; `keys` defaults to `default_keys(schema)`."""
    keys = tuple(default_keys(schema) if keys is None else keys)
    if list_limit < 0:
        raise CepkitError(f"list limit must be >= 0, got {list_limit}")
    for k in keys:
        if k not in schema.names:
            raise CepkitError(f"stream {schema.name}: key {k!r} is not a field (fields: {', '.join(schema.names)})")
        if k in NOT_COMPARED:
            raise CepkitError(f"stream {schema.name}: {k} is a wall-clock stamp and cannot be a key")
    fields = compared_fields(schema, keys)
    for side, df in (("expected", expected), ("engine", engine)):
        absent = [c for c in keys + fields if c not in df.columns]
        if absent:
            raise CepkitError(f"stream {schema.name}: the {side} rows have no column {absent[0]!r}")

    exp_key, eng_key = _row_keys(expected, engine, keys, _tie_break(expected, engine, schema, fields))
    # Unique per side by construction (key code, rank within the key), so a hash lookup pairs them.
    eng_pos_of = pd.Index(eng_key).get_indexer(exp_key)
    matched = eng_pos_of >= 0
    exp_idx = np.flatnonzero(matched)
    eng_idx = eng_pos_of[matched]

    differs = {}
    for f in fields:
        equal = _equal(expected[f].iloc[exp_idx], engine[f].iloc[eng_idx], schema.field(f).type, tolerance)
        differs[f] = ~equal
    wrong_mask = np.logical_or.reduce(list(differs.values())) if fields else np.zeros(len(exp_idx), bool)
    unmatched_eng = np.ones(len(engine), bool)
    unmatched_eng[eng_idx] = False

    n_wrong = int(wrong_mask.sum())
    n_missing = int(len(expected) - len(exp_idx))
    n_undue = int(unmatched_eng.sum())
    undue_pos = np.flatnonzero(unmatched_eng)
    duplicate = _repeats(engine, keys + fields, eng_idx, undue_pos)
    listing = _incorrect_rows(expected, engine, schema, keys, fields, exp_idx, eng_idx, wrong_mask, differs,
                              np.flatnonzero(~matched), undue_pos, list_limit, duplicate)
    return StreamComparison(
        stream=schema.name, keys=keys, compared=fields, tolerance=tolerance,
        expected=len(expected), engine=len(engine), correct=len(exp_idx) - n_wrong,
        missing=n_missing, undue=n_undue, wrong=n_wrong,
        mismatches_by_field={f: int(d.sum()) for f, d in differs.items() if d.any()},
        incorrect=listing, list_limit=list_limit, duplicates=int(duplicate.sum()))


# -- matching --------------------------------------------------------------------------------

def _joint_codes(a: pd.Series, b: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes for the values of a and b in one shared code space; null is code -1."""
    if _numeric(a) and _numeric(b):
        joint, _ = pd.factorize(pd.concat([a, b], ignore_index=True), use_na_sentinel=True)
        return joint[:len(a)], joint[len(a):]
    # Strings (often categorical): factorizing each side first keeps the joint step, on Python
    # objects, to the few distinct values.
    ca, ua = pd.factorize(a, use_na_sentinel=True)
    cb, ub = pd.factorize(b, use_na_sentinel=True)
    ua, ub = np.asarray(ua, dtype=object), np.asarray(ub, dtype=object)
    joint, _ = pd.factorize(np.concatenate([ua, ub]), use_na_sentinel=True)
    ja, jb = joint[:len(ua)], joint[len(ua):]
    return (np.where(ca >= 0, ja[np.maximum(ca, 0)] if len(ja) else -1, -1),
            np.where(cb >= 0, jb[np.maximum(cb, 0)] if len(jb) else -1, -1))


def _numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not isinstance(s.dtype, pd.CategoricalDtype)


def _tie_break(expected: pd.DataFrame, engine: pd.DataFrame, schema: RecordSchema,
               fields: Sequence[str]) -> list[np.ndarray]:
    """Sort columns over both sides (expected rows first) that order rows sharing a key: doubles
    and integers by value (NaN last), strings by a code shared by both sides, so equal rows sort
    alike."""
    columns = []
    for f in fields:
        if schema.field(f).type == "double":
            columns.append(np.concatenate([_floats(expected[f]), _floats(engine[f])]))
        elif _numeric(expected[f]) and _numeric(engine[f]):
            both = pd.concat([expected[f], engine[f]], ignore_index=True)
            columns.append(pd.factorize(both, sort=True, use_na_sentinel=True)[0])
        else:
            ca, cb = _joint_codes(expected[f].reset_index(drop=True), engine[f].reset_index(drop=True))
            columns.append(np.concatenate([ca, cb]))
    return columns


def _row_keys(expected: pd.DataFrame, engine: pd.DataFrame, keys: tuple[str, ...],
              tie_break: Sequence[np.ndarray] = ()) -> tuple[np.ndarray, np.ndarray]:
    """One int64 per row: (key code, rank of the row among its side's rows with that key, by
    `tie_break` then occurrence), jointly coded."""
    n = len(expected)
    code = np.zeros(n + len(engine), dtype=np.int64)
    for k in keys:
        ca, cb = _joint_codes(expected[k], engine[k])
        part = np.concatenate([ca, cb]).astype(np.int64) + 1  # null (-1) becomes a value of its own
        if k == keys[0]:
            code = part
        else:
            # Re-factorize after each column so the combined code stays below the row count.
            code = pd.factorize(code * (int(part.max(initial=0)) + 1) + part)[0].astype(np.int64)
    occ = np.concatenate([_occurrence(code[:n], [c[:n] for c in tie_break]),
                          _occurrence(code[n:], [c[n:] for c in tie_break])])
    width = int(occ.max(initial=0)) + 1
    full = code * width + occ
    return full[:n], full[n:]


def _occurrence(code: np.ndarray, tie_break: Sequence[np.ndarray] = ()) -> np.ndarray:
    """For each row, how many rows with the same code come before it when rows are ordered by the
    `tie_break` columns, then by position (0 for the first)."""
    if not len(code):
        return np.zeros(0, dtype=np.int64)
    # lexsort is stable and its last key is the primary one.
    order = np.lexsort((*reversed(tie_break), code)) if len(tie_break) else np.argsort(code, kind="stable")
    sorted_code = code[order]
    starts = np.flatnonzero(np.r_[True, sorted_code[1:] != sorted_code[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(code)]))
    occ = np.empty(len(code), dtype=np.int64)
    occ[order] = np.arange(len(code)) - group_start
    return occ


def _equal(a: pd.Series, b: pd.Series, logical: str, tol: Tolerance) -> np.ndarray:
    if logical == "double":
        x = _floats(a)
        y = _floats(b)
        with np.errstate(invalid="ignore"):
            close = np.abs(y - x) <= tol.abs + tol.rel * np.abs(x)
        # `x == y` covers equal infinities (inf - inf is NaN); NaN equals NaN by our rule.
        return close | (x == y) | (np.isnan(x) & np.isnan(y))
    ca, cb = _joint_codes(a.reset_index(drop=True), b.reset_index(drop=True))
    return ca == cb


def _floats(s: pd.Series) -> np.ndarray:
    try:
        return s.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        raise CepkitError(f"column {s.name!r} does not hold numbers") from None


def _repeats(engine: pd.DataFrame, columns: Sequence[str], matched: np.ndarray, undue: np.ndarray) -> np.ndarray:
    """For each undue engine row: is it an exact copy (every column in `columns` equal, null equal
    to null) of a matched engine row?"""
    if not len(undue) or not len(matched):
        return np.zeros(len(undue), dtype=bool)
    code = np.zeros(len(engine), dtype=np.int64)
    for c in columns:
        part = pd.factorize(engine[c].reset_index(drop=True), use_na_sentinel=False)[0].astype(np.int64)
        code = pd.factorize(code * (int(part.max(initial=0)) + 1) + part)[0].astype(np.int64)
    return np.isin(code[undue], code[matched])


# -- listing incorrect answers ---------------------------------------------------------------

def _incorrect_rows(expected, engine, schema, keys, fields, exp_idx, eng_idx, wrong_mask, differs,
                    missing_pos, undue_pos, limit, duplicate=None) -> pd.DataFrame:
    wrong_exp, wrong_eng = exp_idx[wrong_mask], eng_idx[wrong_mask]
    undue_kind = np.where(duplicate, 3, 1) if duplicate is not None else np.full(len(undue_pos), 1)
    outcome = np.concatenate([np.full(len(missing_pos), 0), undue_kind, np.full(len(wrong_exp), 2)])
    exp_pos = np.concatenate([missing_pos, np.full(len(undue_pos), -1), wrong_exp])
    eng_pos = np.concatenate([np.full(len(missing_pos), -1), undue_pos, wrong_eng])
    # Within a time, expected rows (missing, wrong) come in expected order, undue ones after them.
    position = np.where(exp_pos >= 0, exp_pos, len(expected) + eng_pos)
    time_key = next((k for k in keys if schema.field(k).type == "long"), None)
    if time_key is not None and len(outcome):
        t = np.concatenate([_as_float(expected[time_key], missing_pos), _as_float(engine[time_key], undue_pos),
                            _as_float(expected[time_key], wrong_exp)])
        order = np.lexsort((position, t))
    else:
        order = np.argsort(position, kind="stable")
    order = order[:limit]
    outcome, exp_pos, eng_pos = outcome[order], exp_pos[order], eng_pos[order]
    # Position of each listed wrong answer among all wrong answers, to look up which fields differ.
    listed_wrong = order[outcome == 2] - len(missing_pos) - len(undue_pos)
    flags = {f: differs[f][wrong_mask][listed_wrong] for f in fields}
    differ_text = np.full(len(order), "", dtype=object)
    differ_text[outcome == 2] = [", ".join(f for f in fields if flags[f][i]) for i in range(len(listed_wrong))]

    has_exp, has_eng = exp_pos >= 0, eng_pos >= 0
    cols: dict[str, object] = {"outcome": np.array([MISSING, UNDUE, WRONG, DUPLICATE], dtype=object)[outcome]}
    for k in keys:
        cols[k] = np.where(has_exp, _take(expected[k], exp_pos), _take(engine[k], eng_pos))
    cols["differs"] = differ_text
    for f in fields:
        cols[f"expected.{f}"] = np.where(has_exp, _take(expected[f], exp_pos), None)
        cols[f"engine.{f}"] = np.where(has_eng, _take(engine[f], eng_pos), None)
    return pd.DataFrame(cols)


def _as_float(s: pd.Series, pos: np.ndarray) -> np.ndarray:
    return s.iloc[pos].to_numpy(dtype=np.float64, na_value=np.nan)


def _take(s: pd.Series, pos: np.ndarray) -> np.ndarray:
    """Values at positions (any value where pos is -1, masked later), as plain Python objects."""
    if not len(s):
        return np.full(len(pos), None, dtype=object)
    vals = s.iloc[np.maximum(pos, 0)].astype(object).to_numpy()
    return np.where(pd.isna(vals), None, vals)
