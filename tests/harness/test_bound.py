"""The run's verdict (harness/bound.py): what bounded a run, from its CPU per part and per process."""

from __future__ import annotations

import pytest

from harness.bound import Verdict, judge


def _procs(**cpu):
    return [{"pid": i, "part": part, "label": f"the {part}", "cpu_percent": v} for i, (part, v) in enumerate(cpu.items())]


def test_a_run_that_kept_up_was_bounded_by_nothing_but_says_what_was_busy():
    v = judge({"engine": 60, "feed": 90}, _procs(feed=90), cores=2, kept_up=True)
    assert (v.bound, v.part, v.label) == ("none", None, "kept up")
    assert "the feed was at 90 % of a core" in v.why


@pytest.mark.parametrize("part", ["feed", "sink", "kit_in_engine"])
def test_a_saturated_kit_process_bounds_the_run_whatever_the_machine_has_left(part):
    v = judge({"engine": 30, part: 97}, _procs(**{part: 97}), cores=8, kept_up=False)
    assert (v.bound, v.part) == ("kit", part)
    assert v.label == f"kit-bound ({part.replace('_', ' ')})" and "97 % of one core" in v.why


def test_a_saturated_machine_is_the_engines_when_its_jvms_used_most_of_it():
    v = judge({"engine": 150, "kit_in_engine": 20, "feed": 10}, _procs(engine=150, feed=10), cores=2, kept_up=False,
              machine_cpu_percent=95)
    assert v.bound == "engine" and "saturated (95 % of 2 cores)" in v.why
    v = judge({"engine": 40, "kit_in_engine": 80, "feed": 60}, _procs(kit_in_engine=80, feed=60), cores=2,
              kept_up=False, machine_cpu_percent=95)
    assert (v.bound, v.part) == ("kit", "kit_in_engine")


def test_a_machine_saturated_by_other_work_is_no_ones_figure():
    v = judge({"engine": 50, "kit_in_engine": 1, "feed": 15, "sink": 13}, _procs(feed=15), cores=2, kept_up=False,
              machine_cpu_percent=95)
    assert (v.bound, v.part, v.label) == ("other", None, "other load on the machine")
    assert "1.1 cores of it by work outside this run" in v.why and "alone" in v.why


def test_nothing_saturated_is_the_engines_own_limit():
    v = judge({"engine": 50, "feed": 20}, _procs(feed=20), cores=2, kept_up=False, machine_cpu_percent=40)
    assert (v.bound, v.label) == ("engine", "engine") and "no part of the kit was saturated" in v.why


def test_a_verdict_checks_itself():
    with pytest.raises(ValueError):
        Verdict("kit", None, "a kit bound without its part")
    with pytest.raises(ValueError):
        Verdict("engine", "feed", "an engine bound naming a kit part")
    assert Verdict("kit", "sink", "x").to_dict() == {"bound": "kit", "part": "sink", "why": "x",
                                                       "label": "kit-bound (sink)"}
