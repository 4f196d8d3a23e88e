"""The per-phase table of a run: each phase's input rate, outputs and latency (specs/VALIDATION.md).

A two-hour standard run is five phases whose input rates differ severalfold (ramp-up, decline,
mi-rise, mi-fall, final-rise); one p99 over the measurement interval hides how the engine fared
in each. `phase_rows(profile, clocks, streams, input_per_second)` gives, per phase of the run's
rate profile:

- the input: the dataset's events whose simulated time falls in the phase and their mean rate over
  the phase's simulated length (from the reference engine's per-second tick counts, so it is what
  was offered, not what the engine took), beside the profile's nominal start and end rates;
- per output stream: the outputs placed in the phase (by their triggering event's inputTS, as
  everywhere in the validator) and their event-time p50 and p99, each with its sample count and
  95 % interval (validator.order_stats).

`phase_table_text(rows)` renders the rows as the plain-text table the CLI prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kit.profiles import RateProfile
from kit.workload import INPUT_TS
from validator.latency import LatencyStats, event_time_latency_ms, latency_stats, phase_index
from validator.order_stats import percentile_text
from validator.outputlog import Clocks


@dataclass(frozen=True)
class PhaseRow:
    """One phase: its place on the run's simulated time axis, its input and its outputs."""

    name: str
    start_ms: int
    end_ms: int
    measured: bool
    nominal_start_eps: float
    nominal_end_eps: float
    input_events: int | None            # None without the dataset's per-second counts
    latency: Mapping[str, LatencyStats]  # per stream: event-time latency of the phase's outputs

    def __post_init__(self) -> None:
        if self.end_ms <= self.start_ms:
            raise ValueError(f"phase {self.name}: end {self.end_ms} ms <= start {self.start_ms} ms")
        if self.input_events is not None and self.input_events < 0:
            raise ValueError(f"phase {self.name}: negative input count {self.input_events}")

    @property
    def input_rate_eps(self) -> float | None:
        """Mean offered rate over the phase's simulated length."""
        if self.input_events is None:
            return None
        return self.input_events / ((self.end_ms - self.start_ms) / 1000.0)

    def outputs(self, stream: str) -> int:
        return self.latency[stream].count

    def to_dict(self) -> dict:
        return {"name": self.name, "start_ms": self.start_ms, "end_ms": self.end_ms, "measured": self.measured,
                "nominal_start_eps": self.nominal_start_eps, "nominal_end_eps": self.nominal_end_eps,
                "input_events": self.input_events, "input_rate_eps": self.input_rate_eps,
                "streams": {name: stats.to_dict() for name, stats in self.latency.items()}}


def _input_counts(profile: RateProfile, input_per_second: pd.DataFrame | None) -> list[int | None]:
    """Events per phase from per-second counts (second k covers sim [k s, k+1 s)); a phase edge
    inside a second (the quick profile's phases are not whole seconds) splits that second's count
    in proportion, so the counts still add up to the dataset's."""
    if input_per_second is None or not len(input_per_second):
        return [None] * len(profile.phases)
    sec = input_per_second["second"].to_numpy(dtype=np.float64)
    cnt = input_per_second["count"].to_numpy(dtype=np.float64)
    starts = profile.phase_starts_ms() / 1000.0
    edges = np.append(starts, profile.duration_ms / 1000.0)
    out: list[int | None] = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        overlap = np.clip(np.minimum(sec + 1, hi) - np.maximum(sec, lo), 0.0, 1.0)
        out.append(int(round(float((cnt * overlap).sum()))))
    return out


def phase_rows(profile: RateProfile, clocks: Clocks | None, streams: Mapping[str, pd.DataFrame],
               input_per_second: pd.DataFrame | None = None) -> tuple[PhaseRow, ...]:
    """One row per phase of `profile` (module doc); without clocks (no engine log) no outputs."""
    doc = profile.to_dict()["phases"]
    inputs = _input_counts(profile, input_per_second)
    placed: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, df in streams.items():
        if clocks is None or not len(df):
            placed[name] = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64))
            continue
        ts = df[INPUT_TS].to_numpy(dtype=np.float64, na_value=np.nan)
        placed[name] = (phase_index(ts, profile, clocks), event_time_latency_ms(df))
    rows = []
    for k, p in enumerate(doc):
        latency = {}
        for name, (idx, lat) in placed.items():
            sel = lat[(idx == k) & ~np.isnan(lat)] if len(lat) else lat
            latency[name] = latency_stats(sel.astype(np.int64) if len(sel) else np.empty(0, dtype=np.int64))
        rows.append(PhaseRow(p["name"], int(p["start_ms"]), int(p["end_ms"]), bool(p["measured"]),
                             float(p["start_rate_eps"]), float(p["end_rate_eps"]), inputs[k], latency))
    return tuple(rows)


def _secs(ms: int) -> str:
    s = ms / 1000.0
    return f"{s:,.0f}" if s >= 100 else f"{s:,.1f}"


def phase_table_text(rows: Sequence[PhaseRow], streams: Sequence[str] | None = None) -> str:
    """The rows as a fixed-width text table: per stream outputs, p50 and p99 with n (the p99's
    interval in the compact wording of validator.order_stats)."""
    if not rows:
        return ""
    names = list(streams) if streams is not None else list(rows[0].latency)
    head = ["phase", "sim s", "input ev/s (nominal)"]
    for s in names:
        head += [f"{s} n", f"{s} p50 ms", f"{s} p99 ms"]
    body = []
    for r in rows:
        rate = "-" if r.input_rate_eps is None else f"{r.input_rate_eps:,.0f}"
        cells = [r.name + (" *" if r.measured else ""), f"{_secs(r.start_ms)}-{_secs(r.end_ms)}",
                 f"{rate} ({r.nominal_start_eps:,.0f}→{r.nominal_end_eps:,.0f})"]
        for s in names:
            st = r.latency[s]
            cells += [f"{st.count:,}", "-" if st.empty else f"{st.p50_ms:,}",
                      "-" if st.empty else percentile_text(st.percentile("p99"), "outputs", unit="", short=True)]
        body.append(cells)
    widths = [max(len(head[i]), *(len(b[i]) for b in body)) for i in range(len(head))]
    line = lambda cells: "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join(["per phase (* = measured; outputs placed by their triggering event's time):", line(head),
                      *(line(b) for b in body)])
