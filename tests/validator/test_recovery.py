"""Recovery from injected faults, on hand-made output streams (validator/recovery.py)."""

from __future__ import annotations

import pandas as pd

from validator.outputlog import LoggedFault
from validator.recovery import SETTLE_MS, recoveries


def _rows(pairs):
    """(arrivalTS, inputTS) pairs as an output stream."""
    return pd.DataFrame({"arrivalTS": [a for a, _ in pairs], "inputTS": [i for _, i in pairs]})


def test_recovery_is_kill_to_first_output_and_the_peak_covers_the_settling_window():
    kill = 100_000
    before = _rows([(kill - 5_000, kill - 5_100), (kill - 1_000, kill - 1_300)])        # 100 and 300 ms
    after = _rows([(kill + 8_000, kill - 2_000),            # the first output: 8 s later, 10 s latency
                   (kill + 9_000, kill + 1_000),            # 8 s latency
                   (kill + 8_000 + SETTLE_MS, kill + 8_000 + SETTLE_MS - 50),   # still in the window: 50 ms
                   # an output on time more than SETTLE_MS after the last delayed one ends the search
                   (kill + 9_001 + SETTLE_MS, kill + 9_001 + SETTLE_MS - 50),
                   (kill + 9_002 + SETTLE_MS, kill - 90_000)])      # after the window: not counted
    (r,) = recoveries([LoggedFault("kill-engine@40s", "kill-engine", kill)], [before, after])
    assert (r.recovery_ms, r.peak_latency_ms, r.before_p99_ms, r.outputs_in_window) == (8_000, 10_000, 300, 3)
    assert (r.normal_ms, r.delayed_outputs) == (9_000, 2)       # delayed: above max(2 x 300, 300 + 1000) ms
    assert r.line().startswith("fault kill-engine@40s: recovery 8,000 ms (kill to the first output after it), "
                               "back to normal after 9,000 ms (2 delayed outputs); "
                               "latency peak 10,000 ms over 3 outputs")


def test_a_partial_outage_is_back_to_normal_when_the_answers_it_held_back_arrive():
    # A worker host cut off for 20 s: the other host answers on at 50 ms; the cut-off host's answers
    # arrive after the link is mended, 25 s late. The first output says 0.5 s; back to normal 26 s.
    cut = 1_000_000
    before = _rows([(cut - t, cut - t - 50) for t in range(1_000, 30_000, 1_000)])
    healthy = _rows([(cut + t, cut + t - 50) for t in range(500, 60_000, 1_000)])
    held = _rows([(cut + 25_000 + t, cut + t) for t in range(0, 1_001, 250)])
    (r,) = recoveries([LoggedFault("cut-link@40s", "cut-link", cut)], [before, healthy, held])
    assert (r.recovery_ms, r.normal_ms, r.delayed_outputs) == (500, 26_000, 5)
    assert r.peak_latency_ms == 25_000 and r.before_p99_ms == 50
    assert "back to normal after 26,000 ms (5 delayed outputs)" in r.line()


def test_back_to_normal_follows_its_rule_on_random_streams():
    import numpy as np

    from validator.recovery import _last_delayed

    def by_rule(arrival, latency, first, threshold):
        # The rule in words: walk the outputs in arrival order, noting each delayed one; stop at the
        # first on time that arrives SETTLE_MS after the last delayed one (or the first output).
        last, count = None, 0
        for t, lat in sorted(zip(arrival.tolist(), latency.tolist()), key=lambda x: x[0]):
            if lat > threshold:
                last, count = t, count + 1
            elif t > (first if last is None else last) + SETTLE_MS:
                break
        return last, count

    rng = np.random.default_rng(7)
    for _ in range(2_000):
        n = int(rng.integers(1, 40))
        arrival, latency = rng.integers(0, 200_000, n), rng.integers(0, 3_000, n)
        first = int(arrival.min())
        assert _last_delayed(arrival, latency, first, 1_500) == by_rule(arrival, latency, first, 1_500)


def test_a_fault_with_no_output_after_it_says_so():
    (r,) = recoveries([LoggedFault("kill-executor@9s", "kill-executor", 50)], [_rows([(10, 5)]), _rows([])])
    assert (r.recovery_ms, r.peak_latency_ms, r.before_p99_ms) == (None, None, 5)
    assert r.line() == "fault kill-executor@9s: no output after the kill"
    assert recoveries([], [_rows([(10, 5)])]) == ()
