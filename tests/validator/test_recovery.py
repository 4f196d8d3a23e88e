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
                   (kill + 9_000 + SETTLE_MS, kill - 90_000)])      # after the window: not counted
    (r,) = recoveries([LoggedFault("kill-engine@40s", "kill-engine", kill)], [before, after])
    assert (r.recovery_ms, r.peak_latency_ms, r.before_p99_ms, r.outputs_in_window) == (8_000, 10_000, 300, 3)
    assert r.line().startswith("fault kill-engine@40s: recovery 8,000 ms (kill to the first output after it); "
                               "latency peak 10,000 ms over 3 outputs")


def test_a_fault_with_no_output_after_it_says_so():
    (r,) = recoveries([LoggedFault("kill-executor@9s", "kill-executor", 50)], [_rows([(10, 5)]), _rows([])])
    assert (r.recovery_ms, r.peak_latency_ms, r.before_p99_ms) == (None, None, 5)
    assert r.line() == "fault kill-executor@9s: no output after the kill"
    assert recoveries([], [_rows([(10, 5)])]) == ()
