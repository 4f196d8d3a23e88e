"""specs/SEMANTICS.md's consumption rule reproduces the four outputs of thesis section 4.2.2.

The rule is written here as code, straight from the page, and run on the thesis' input
A1 A2 B1 A3 B2; the page's table must list the same outputs.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers import REPO
from kit.workload import CONSUMPTION_POLICIES

# Section 4.2.2, items i-iv.
THESIS = {
    "all-all": "(A1,B1) (A2,B1) (A1,B2) (A2,B2) (A3,B2)",
    "all-one": "(A1,B1) (A1,B2)",
    "one-all": "(A1,B1) (A2,B1) (A3,B2)",
    "one-one": "(A1,B1) (A2,B2)",
}


def match(events, consumption, is_first, is_second, key=lambda e: None, within=None, ts=lambda e: 0):
    """SEMANTICS.md section 8, operationally: candidates, then ALL/ONE on each element."""
    first_policy, second_policy = consumption.split("-")
    candidates, out = [], []
    for y in events:
        if is_second(y):
            m = [x for x in candidates if key(x) == key(y) and (within is None or ts(y) - ts(x) < within)]
            chosen = m if second_policy == "all" else m[:1]
            out += [(x, y) for x in chosen]
            if first_policy == "one":
                candidates = [x for x in candidates if x not in chosen]
        if is_first(y):
            candidates.append(y)
    return out


@pytest.mark.parametrize("consumption", CONSUMPTION_POLICIES)
def test_rule_gives_the_thesis_outputs(consumption):
    events = ["A1", "A2", "B1", "A3", "B2"]
    pairs = match(events, consumption, lambda e: e[0] == "A", lambda e: e[0] == "B")
    assert " ".join(f"({x},{y})" for x, y in pairs) == THESIS[consumption]


def test_semantics_page_lists_the_same_outputs():
    text = (REPO / "specs" / "SEMANTICS.md").read_text()
    rows = dict(re.findall(r"^\s*\| `(\w+-\w+)` \([^)]*\) \| ([^|]+) \|", text, re.M))
    assert {k: v.strip() for k, v in rows.items()} == THESIS


def test_same_stream_pattern_never_matches_itself_and_consumes_per_element():
    # Q7-like: (id, A1, TS); first = any event, second = A1 > 50, same ID, within 10 ms.
    events = [(1, 60, 0), (1, 70, 1), (2, 80, 2), (1, 90, 20)]
    args = dict(is_first=lambda e: True, is_second=lambda e: e[1] > 50, key=lambda e: e[0],
                within=10, ts=lambda e: e[2])
    assert match(events, "all-all", **args) == [((1, 60, 0), (1, 70, 1))]   # (1,90,20) is too late for both
    # with one-one, the event consumed as a2 still starts a match as a1 later
    events = [(1, 10, 0), (1, 60, 1), (1, 70, 2)]
    assert match(events, "one-one", **args) == [((1, 10, 0), (1, 60, 1)), ((1, 60, 1), (1, 70, 2))]
