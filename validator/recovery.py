"""Recovery from injected faults, measured on the output log (specs/VALIDATION.md, "Recovery").

For each fault the harness recorded (its kind and the wall-clock time of the kill):
- recovery time: from the kill to the first output (of any stream) that arrives after it;
- latency peak: the largest event-time latency (arrivalTS - inputTS) of the outputs that arrive
  from the kill until `SETTLE_MS` after that first output, against the p99 of the outputs that
  arrived in the `SETTLE_MS` before the kill (what the run looked like before).
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


@dataclass(frozen=True)
class Recovery:
    fault: str
    kind: str
    at_ms: int
    recovery_ms: int | None          # None: no output came after the kill
    peak_latency_ms: int | None
    before_p99_ms: int | None        # the p99 over the SETTLE_MS before the kill (None: no output then)
    outputs_in_window: int           # the outputs the peak is taken over

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line in words, for the command line and the report."""
        if self.recovery_ms is None:
            return f"fault {self.fault}: no output after the kill"
        before = "" if self.before_p99_ms is None else f" (p99 before it: {self.before_p99_ms:,} ms)"
        return (f"fault {self.fault}: recovery {self.recovery_ms:,} ms (kill to the first output after it); "
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
        window = after & (arrival <= first + SETTLE_MS)
        out.append(Recovery(f.fault, f.kind, f.at_ms, first - f.at_ms, int(latency[window].max()), before_p99,
                            int(window.sum())))
    return tuple(out)
