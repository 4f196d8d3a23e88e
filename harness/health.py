"""Long-run health of an engine run: does anything grow over the run? (`metrics/health.csv`)

A two-hour Pairs run is long enough for a slow leak to matter: in the harness process (the sink
and the monitor), in the driver (the feed), in the engine's JVMs or Python processes, in its state
or its checkpoint directory. `HealthSampler` writes one row every `HEALTH_INTERVAL_S` (5 s: a
two-hour run has ~1,440 rows) from the run's begin until it ends, flushed per row like the other
metrics (harness/resources.py, `CsvLog`), so a killed run keeps them:

- `ts_ms`: wall-clock epoch ms of the sample;
- `harness_rss_bytes`: resident set of this process (the sink, the monitor, the samplers);
- `driver_rss_bytes`: resident set of the driver (the feed process, harness/process.py);
- `jvm_rss_bytes`, `python_rss_bytes`: the engine's JVMs and its Python processes (the program and
  its Python workers), from the ResourceSampler's latest reading (at most 3 of its intervals old),
  so the process tree is walked once;
- `state_bytes`: the engine's state on disk. Spark: the checkpoint's `state/` subtree; Flink: the
  newest completed checkpoint (its `chk-N` directory, from the program's `checkpoint` events, else
  the newest on disk; the size the program reported when it is not on this machine);
- `checkpoint_bytes`, `checkpoint_files`: the whole checkpoint directory, bytes and regular files;
- `output_bytes`: the output log so far (`outputs/`): append-only, it grows by design;
- `sample_ms`: what taking the row cost (the directory walks dominate it).

A figure that cannot be had is left empty: no engine process (a program being restarted), a
checkpoint on storage this machine does not see (`run.checkpoint_url` on HDFS), a directory not
made yet. Sizes are apparent file sizes (`st_size`, as `du --apparent-size -b`), symbolic links
not followed, found by an `os.scandir` walk that skips whatever vanishes under it: the engines
delete old checkpoint files while it runs. The sampler keeps only its last row, so its memory does
not grow with the run. validator/health.py fits each column's growth per hour.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from harness.flink_restore import local_dir
from harness.resources import ResourceSampler, SamplingThread, now_ms

HEALTH_COLUMNS = ("ts_ms", "harness_rss_bytes", "driver_rss_bytes", "jvm_rss_bytes", "python_rss_bytes",
                  "state_bytes", "checkpoint_bytes", "checkpoint_files", "output_bytes", "sample_ms")
HEALTH_CSV = "health.csv"
# Seconds between rows. Read when a sampler is made (not imported by value), so a test can shorten it.
HEALTH_INTERVAL_S = 5.0
# A per-role RSS older than this many of the resource sampler's intervals is not the engine's now.
_STALE_INTERVALS = 3


def dir_usage(path: str | os.PathLike) -> tuple[int, int] | None:
    """(bytes, regular files) under `path`, or None when `path` is not a directory (yet, or any
    more). Entries that vanish, or turn into something else, while the walk passes are skipped:
    the figure is then somewhere between the directory's size before and after the change."""
    total = files = 0
    stack = [os.fspath(path)]
    root = True
    while stack:
        top = stack.pop()
        try:
            entries = os.scandir(top)
        except OSError:                 # gone, replaced by a file, unreadable
            if root:
                return None
            continue
        root = False
        with entries:
            while True:
                try:
                    entry = next(entries, None)
                except OSError:         # the directory went away mid-listing
                    break
                if entry is None:
                    break
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        size = entry.stat(follow_symlinks=False).st_size
                        total += size
                        files += 1
                except OSError:         # deleted between the listing and the stat
                    continue
    return total, files


def local_checkpoint(location: str) -> Path | None:
    """The run's checkpoint location as a local directory; None on storage this machine does not
    list (hdfs:, s3a:, ...)."""
    if "://" in location and not location.startswith("file:"):
        return None
    return local_dir(location)


class HealthSampler(SamplingThread):
    """Writes `health.csv` (the module doc) every `interval_s` from `start()` to `stop()`, in a
    thread of its own. `resources` is the run's ResourceSampler (its latest per-role RSS);
    `state` measures the engine's state (its runner's `state_gauge`); `checkpoint` and `outputs` are walked."""

    def __init__(self, csv_path: Path, *, outputs: Path, checkpoint: Path | None = None,
                 state: Callable[[], int | None] | None = None, driver_pid: int | None = None,
                 resources: ResourceSampler | None = None, interval_s: float | None = None):
        self.interval_s = HEALTH_INTERVAL_S if interval_s is None else float(interval_s)
        self.outputs, self.checkpoint = Path(outputs), checkpoint
        self._state = state
        self._resources = resources
        self._me = psutil.Process()
        self._driver = _process(driver_pid)
        super().__init__(csv_path, HEALTH_COLUMNS, "health-sampler", self._loop)
        self.last: dict | None = None
        self.max_sample_ms = 0

    @property
    def rows(self) -> int:
        return self._log.rows

    def _loop(self) -> None:
        next_at = time.monotonic()
        while True:
            self.sample()
            # On a fixed grid: a slow walk does not push every later row back.
            next_at += self.interval_s
            if self._stop.wait(max(0.0, next_at - time.monotonic())):
                return

    def sample(self) -> dict:
        """One row, written and returned."""
        t0 = time.perf_counter()
        ts = now_ms()
        row = {"ts_ms": ts, "harness_rss_bytes": _rss(self._me), "driver_rss_bytes": _rss(self._driver)}
        row.update(self._engine_rss(ts))
        row["state_bytes"] = self._state() if self._state is not None else None
        usage = dir_usage(self.checkpoint) if self.checkpoint is not None else None
        row["checkpoint_bytes"], row["checkpoint_files"] = usage if usage else (None, None)
        usage = dir_usage(self.outputs)
        row["output_bytes"] = usage[0] if usage else None
        row["sample_ms"] = round((time.perf_counter() - t0) * 1000.0, 1)
        self._log.write("" if row[c] is None else row[c] for c in HEALTH_COLUMNS)
        self.max_sample_ms = max(self.max_sample_ms, row["sample_ms"])
        self.last = row
        return row

    def _engine_rss(self, ts: int) -> dict:
        last = self._resources.last if self._resources is not None else None
        fresh = last is not None and ts - last["ts_ms"] <= _STALE_INTERVALS * 1000.0 * self._resources.interval_s
        return {"jvm_rss_bytes": last["jvm_rss_bytes"] if fresh else None,
                "python_rss_bytes": last["python_rss_bytes"] if fresh else None}


def _process(pid: int | None) -> psutil.Process | None:
    if pid is None:
        return None
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def _rss(proc: psutil.Process | None) -> int | None:
    if proc is None:
        return None
    try:
        return proc.memory_info().rss
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
