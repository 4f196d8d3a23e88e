"""Recovery from injected faults, measured on the output log (specs/VALIDATION.md, "Recovery").

For each fault the harness recorded (its kind and the wall-clock time of the kill):
- recovery time: from the kill to the first output (of any stream) that arrives after it;
- back to normal: from the kill to the arrival of the last output the fault delayed, i.e. whose
  latency is above `delayed_threshold` of the p99 before the kill; the search ends at the first
  output not delayed that arrives more than `SETTLE_MS` after the last delayed one (a silence
  followed by delayed answers is still the outage). A fault that stops only part of the engine (a
  worker host cut off) leaves the rest answering at once, so its first output says little: the
  answers it held back arrive late, and this measure waits for them;
- latency peak: the largest event-time latency (arrivalTS - inputTS) of the outputs that arrive
  from the kill until `SETTLE_MS` after that first output, or until the last delayed one if later,
  against the p99 of the outputs that arrived in the `SETTLE_MS` before the kill (what the run
  looked like before).
The verdict on answers is unchanged: every answer is still compared with the reference, so a lost
or repeated answer after a restart shows as missing or undue.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from kit.outputlog import ARRIVAL_TS
from kit.workload import INPUT_TS

SETTLE_MS = 30_000
# An output is delayed by a fault when its latency exceeds twice the p99 before it, and by a second
# at least (so that a run of 20 ms answers does not call a 50 ms one delayed).
DELAY_FACTOR, DELAY_MIN_EXTRA_MS = 2.0, 1_000


def delayed_threshold(before_p99_ms: int | None) -> int:
    """The latency above which an output after a fault counts as delayed by it."""
    base = before_p99_ms or 0
    return int(max(DELAY_FACTOR * base, base + DELAY_MIN_EXTRA_MS))


@dataclass(frozen=True)
class Recovery:
    fault: str
    kind: str
    at_ms: int
    recovery_ms: int | None          # None: no output came after the kill
    peak_latency_ms: int | None
    before_p99_ms: int | None        # the p99 over the SETTLE_MS before the kill (None: no output then)
    outputs_in_window: int           # the outputs the peak is taken over
    # From the kill to the arrival of the last output it delayed (recovery_ms when none was).
    normal_ms: int | None = None
    delayed_outputs: int = 0         # outputs after the kill above delayed_threshold(before_p99_ms)

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line in words, for the command line and the report."""
        if self.recovery_ms is None:
            return f"fault {self.fault}: no output after the kill"
        before = "" if self.before_p99_ms is None else f" (p99 before it: {self.before_p99_ms:,} ms)"
        normal = "" if self.normal_ms is None or self.normal_ms == self.recovery_ms else \
            f", back to normal after {self.normal_ms:,} ms ({self.delayed_outputs:,} delayed outputs)"
        return (f"fault {self.fault}: recovery {self.recovery_ms:,} ms (kill to the first output after it){normal}; "
                f"latency peak {self.peak_latency_ms:,} ms over {self.outputs_in_window:,} outputs{before}")


def _stamps(streams) -> tuple[np.ndarray, np.ndarray]:
    """Every output's arrival and latency, all streams together."""
    frames = [df for df in streams if len(df)]
    if not frames:
        return np.array([], dtype=np.int64), np.array([], dtype=np.int64)
    arrival = np.concatenate([df[ARRIVAL_TS].to_numpy(np.int64) for df in frames])
    latency = np.concatenate([(df[ARRIVAL_TS] - df[INPUT_TS]).to_numpy(np.int64) for df in frames])
    return arrival, latency


def recoveries(faults, streams: list[pd.DataFrame]) -> tuple[Recovery, ...]:
    """One Recovery per fault (validator.outputlog.LoggedFault) over the output streams' rows."""
    arrival, latency = _stamps(streams)
    out = []
    for f in faults:
        after = arrival >= f.at_ms
        before = (arrival < f.at_ms) & (arrival >= f.at_ms - SETTLE_MS)
        before_p99 = int(np.percentile(latency[before], 99, method="inverted_cdf")) if before.any() else None
        if not after.any():
            out.append(Recovery(f.fault, f.kind, f.at_ms, None, None, before_p99, 0))
            continue
        first = int(arrival[after].min())
        last_delayed, delayed = _last_delayed(arrival[after], latency[after], first, delayed_threshold(before_p99))
        window = after & (arrival <= max(first + SETTLE_MS, last_delayed or first))
        normal = (last_delayed if last_delayed is not None else first) - f.at_ms
        out.append(Recovery(f.fault, f.kind, f.at_ms, first - f.at_ms, int(latency[window].max()), before_p99,
                            int(window.sum()), normal, delayed))
    return tuple(out)


def _last_delayed(arrival: np.ndarray, latency: np.ndarray, first: int, threshold: int) -> tuple[int | None, int]:
    """The arrival of the last output above `threshold` (None: none) among those after a fault, and
    how many there were, walking in arrival order until an output *not* delayed arrives more than
    SETTLE_MS after the last delayed one (or after the first output)."""
    order = np.argsort(arrival, kind="stable")
    t, delayed = arrival[order], latency[order] > threshold
    # The last delayed arrival at or before each output (the first output's before any).
    ref = np.maximum.accumulate(np.where(delayed, t, first))
    ends = ~delayed & (t > ref + SETTLE_MS)
    stop = int(np.argmax(ends)) if ends.any() else len(t)
    hit = t[:stop][delayed[:stop]]
    return (int(hit.max()), len(hit)) if len(hit) else (None, 0)
