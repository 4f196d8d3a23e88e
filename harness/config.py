"""The driver's settings: one frozen dataclass that checks itself.

`DriverConfig` is what a `cepkit` command (or `python -m harness.driver`) hands to the driver. It
round-trips through a plain dict (`to_dict` / `from_dict`) so a parent process can pass it to a
driver subprocess as JSON. Units are in the names: `_ms` integer milliseconds, `_eps` events per
second, `_bytes` bytes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from kit.errors import CepkitError
from kit.outputlog import PACINGS

STAMPS = ("scheduled", "send")
# One minute covers every time-window slide of our suites (SEMANTICS.md section 1).
DEFAULT_ALIGN_MS = 60_000
DEFAULT_RETAIN_BYTES = 512 * 2**20


def _bad(name: str, message: str) -> CepkitError:
    return CepkitError(f"driver config: {name}: {message}")


@dataclass(frozen=True)
class DriverConfig:
    """How the driver plays one dataset.

    - `pacing="tickts"`: event i is due at `run_start + (ts_i - sim_start) / speed` (its simulated
      time, `tickTS` for ticks and `TS` for micro events); `pacing="rate"`: at `run_start + i /
      rate_eps` seconds, whatever its simulated time; `pacing="pull"`: as fast as the engine pulls:
      never more than `pull_window_events` released ahead of the highest offset read (send stamps
      only, since no due time exists).
    - `stamp="scheduled"`: `TS` is that due time (integer ms, floored); `"send"`: the wall-clock
      time at which the driver actually released it.
    - `start_wall_ms`: when the run starts (epoch ms). None: `lead_ms` after `begin()`, rounded up
      so that `run_start_wall_ms - sim_start_ms` is a multiple of `align_ms`. An explicit value must
      be aligned too.
    - `hold=True`: serve (schema, stats) but release nothing until `begin` is called or requested.
    - `retain_bytes`: memory for released events kept for re-reading; the oldest whole chunks are
      dropped beyond it, and reads of dropped offsets fail.
    - `keep_unread_events`: released events not yet pulled are never dropped while they are among
      the last `keep_unread_events` released (the harness sets twice q^b: an engine further behind
      is stopped as unsustainable, so it must not fail on an evicted read first).
    """

    dataset_dir: Path
    streams: tuple[str, ...] = ()          # empty: every stream of the dataset
    pacing: str = "tickts"
    speed: float = 1.0
    rate_eps: float | None = None
    stamp: str = "scheduled"
    host: str = "127.0.0.1"
    port: int = 0                          # 0: the OS picks a free port; `Driver.port` tells
    start_wall_ms: int | None = None
    lead_ms: int = 2_000
    align_ms: int = DEFAULT_ALIGN_MS
    hold: bool = False
    chunk_rows: int = 65_536
    prefetch_chunks: int = 4
    retain_bytes: int = DEFAULT_RETAIN_BYTES
    keep_unread_events: int = 0
    max_read_rows: int = 262_144           # cap on rows per read response
    pull_window_events: int = 65_536       # pull pacing: released but unread events at most
    # Check every file's sha256 (and CSV row count) against the manifest before playing; a caller
    # that verified the dataset in this command already (the pipelines) passes False.
    verify: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "dataset_dir", Path(self.dataset_dir))
        if isinstance(self.streams, str):
            object.__setattr__(self, "streams", tuple(s for s in self.streams.split(",") if s))
        object.__setattr__(self, "streams", tuple(self.streams))
        if len(set(self.streams)) != len(self.streams):
            raise _bad("streams", f"names repeat: {list(self.streams)}")
        if self.pacing not in PACINGS:
            raise _bad("pacing", f"must be one of {', '.join(PACINGS)}, got {self.pacing!r}")
        if self.stamp not in STAMPS:
            raise _bad("stamp", f"must be one of {', '.join(STAMPS)}, got {self.stamp!r}")
        if not (isinstance(self.speed, (int, float)) and self.speed > 0):
            raise _bad("speed", f"must be a positive number, got {self.speed!r}")
        if self.pacing == "rate":
            if not (isinstance(self.rate_eps, (int, float)) and self.rate_eps > 0):
                raise _bad("rate_eps", f"must be a positive number with pacing 'rate', got {self.rate_eps!r}")
        elif self.rate_eps is not None:
            raise _bad("rate_eps", "only applies with pacing 'rate'")
        if self.pacing == "pull" and self.stamp != "send":
            raise _bad("stamp", "pacing 'pull' has no scheduled times: use stamp 'send'")
        _int_at_least("port", self.port, 0)
        if self.port > 65535:
            raise _bad("port", f"must be at most 65535, got {self.port}")
        if self.start_wall_ms is not None:
            _int_at_least("start_wall_ms", self.start_wall_ms, 0)
        _int_at_least("lead_ms", self.lead_ms, 0)
        _int_at_least("align_ms", self.align_ms, 1)
        _int_at_least("chunk_rows", self.chunk_rows, 1)
        _int_at_least("prefetch_chunks", self.prefetch_chunks, 1)
        _int_at_least("retain_bytes", self.retain_bytes, 0)
        _int_at_least("keep_unread_events", self.keep_unread_events, 0)
        _int_at_least("max_read_rows", self.max_read_rows, 1)
        _int_at_least("pull_window_events", self.pull_window_events, 1)
        if not self.host:
            raise _bad("host", "must not be empty")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["dataset_dir"] = str(self.dataset_dir)
        d["streams"] = list(self.streams)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "DriverConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise _bad(unknown[0], "unknown setting")
        return cls(**d)


def _int_at_least(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _bad(name, f"must be an integer >= {low}, got {value!r}")
