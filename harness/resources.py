"""Sampling an engine run's resources and the driver's backlog into CSV files (metrics/).

- `ResourceSampler(root_pid, csv_path)`: a thread that once per interval sums CPU and resident
  memory over a process tree (the engine program, its JVM, Spark's Python workers), re-scanning
  the tree each time since children appear late. CPU is the tree's CPU time used since the last
  sample over the wall time, in percent of one core; a process first seen counts all its CPU
  time once, a process that exited between samples loses its last partial interval. RSS sums
  the processes' resident sets (shared pages of forked workers count once per process), except
  a child caught between its spawn and its exec: it still shares its parent's address space (a
  JVM starts a shell command that way), so it reports the parent's whole resident set, and counts
  nothing here (told by its virtual size being its parent's).
  Columns: `ts_ms,cpu_percent,rss_bytes,jvm_rss_bytes,python_rss_bytes` (validator/outputlog.py
  `read_resources` reads them), then the CPU of each part of the run (harness/bound.py): the
  engine's JVMs, the kit's code in the engine (the tree's Python processes), and the kit's own
  processes `kit_pids()` names (the feed, the harness with its sink), in percent of one core. Since
  `mark()` it also keeps each process's CPU, for the run's verdict (`parts`).
- `BacklogLog(csv_path)`: one `ts_ms,released,pulled,backlog` row per call, from the driver's
  stats, written by the run's monitor loop.

Every row is flushed as it is written, so a killed run keeps its metrics.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from harness.bound import PARTS

RESOURCE_COLUMNS = ("ts_ms", "cpu_percent", "rss_bytes", "jvm_rss_bytes", "python_rss_bytes")
PART_COLUMNS = tuple(f"{part}_cpu_percent" for part in PARTS)
BACKLOG_COLUMNS = ("ts_ms", "released", "pulled", "backlog")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class CsvLog:
    """A CSV file written a row at a time (header first), flushed after every row."""

    def __init__(self, path: Path, columns: tuple[str, ...]):
        self.path = Path(path)
        self.columns = columns
        self._fh = open(self.path, "x", encoding="utf-8")
        self._fh.write(",".join(columns) + "\n")
        self._fh.flush()
        self.rows = 0

    def write(self, values) -> None:
        self._fh.write(",".join(str(v) for v in values) + "\n")
        self._fh.flush()
        self.rows += 1

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


class SamplingThread:
    """A CSV log written by a thread of its own from `start()` to `stop()`: `loop` runs in it and
    returns once `_stop` is set; the samplers of this module and harness/health.py."""

    def __init__(self, csv_path: Path, columns: tuple[str, ...], name: str, loop: Callable[[], None]):
        self._log = CsvLog(csv_path, columns)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=loop, name=name, daemon=True)

    @property
    def csv_path(self) -> Path:
        return self._log.path

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._log.close()


class BacklogLog(CsvLog):
    def __init__(self, path: Path):
        super().__init__(path, BACKLOG_COLUMNS)

    def record(self, stats: dict, ts_ms: int | None = None) -> None:
        self.write((ts_ms if ts_ms is not None else now_ms(), stats["released"], stats["pulled"], stats["backlog"]))


def _kind(proc: psutil.Process) -> str:
    try:
        name = proc.name().lower()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "other"
    if name.startswith("java"):
        return "jvm"
    if name.startswith("python"):
        return "python"
    return "other"


def _label(proc: psutil.Process, kind: str, part: str) -> str:
    """What a process is, in a few words (the verdict names the busiest)."""
    if part in ("feed", "sink"):
        return {"feed": "the feed (harness driver process)", "sink": "the sink (harness process)"}[part]
    try:
        cmd = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        cmd = ""
    if kind == "jvm":
        for needle, name in (("CoarseGrainedExecutorBackend", "a Spark executor JVM"), ("SparkSubmit", "Spark's driver JVM"),
                             ("TaskManagerRunner", "a Flink TaskManager JVM"), ("flink", "Flink's JVM")):
            if needle in cmd:
                return name
        return "an engine JVM"
    if kind == "python":
        for needle, name in (("pyspark.daemon", "Spark's Python worker daemon"), ("pyspark.worker", "a Spark Python worker"),
                             ("beam", "a PyFlink Python worker"), ("pyflink", "a PyFlink Python worker")):
            if needle in cmd:
                return name
        return f"the engine program's Python (pid {proc.pid})"
    try:
        name = proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        name = "a process"          # gone since it was listed: a sample must not end the run
    return f"{name} (pid {proc.pid})"


def tree_rss(procs, vms_of: dict[int, int]):
    """(kind, rss) of each sampled process, given (parent pid, memory info, kind) and every
    sampled pid's virtual size: a non-JVM, non-Python child with its parent's virtual size is
    between spawn and exec, sharing the parent's pages, and counts 0 (module doc)."""
    for ppid, mem, kind in procs:
        shared = kind == "other" and vms_of.get(ppid) == mem.vms
        yield kind, 0 if shared else mem.rss


class ResourceSampler(SamplingThread):
    """Samples the tree under `root_pid` every `interval_s` until `stop()`, plus the trees of the
    pids `extra()` names (a cluster's executors on this machine). `retarget` moves it to another
    root (a restarted program, or one found after it started); with no root there is no row."""

    def __init__(self, root_pid: int | None, csv_path: Path, interval_s: float = 1.0,
                 extra: Callable[[], list[int]] | None = None, kit_pids: Callable[[], dict[int, str]] | None = None):
        self.root_pid = root_pid
        self._extra = extra
        self._kit_pids = kit_pids
        self.interval_s = interval_s
        super().__init__(csv_path, RESOURCE_COLUMNS + PART_COLUMNS, "resource-sampler", self._loop)
        # Since mark(): CPU seconds per process and its (part, label); wall seconds sampled.
        self._run_cpu_s: dict[int, float] = {}
        self._run_who: dict[int, tuple[str, str]] = {}
        self._run_wall_s = 0.0
        self._machine: list[float] = []
        self._procs: dict[int, psutil.Process] = {}
        self._cpu_s: dict[int, float] = {}
        self._last_t: float | None = None
        self.samples = 0
        self.peak_rss_bytes = 0
        self.last: dict | None = None
        self._cpu_sum = 0.0
        # Start-up (JVM, Spark session) is busy and not part of the measured run; mark() starts
        # the run's own CPU mean.
        self._marked = False
        self._run_samples = 0
        self._run_cpu_sum = 0.0

    def retarget(self, root_pid: int) -> None:
        self.root_pid = root_pid

    def mark(self) -> None:
        """From now on `run_mean_cpu_percent` averages the samples (the measured run begins)."""
        self._marked = True
        psutil.cpu_percent(interval=None)        # the machine's baseline for the next reading

    def parts(self) -> dict | None:
        """Since mark(): the mean CPU of each part and of each process (percent of one core), the
        machine's mean busy share of all its cores, and its cores (None before any marked sample)."""
        if self._run_wall_s <= 0:
            return None
        cpu = {part: 0.0 for part in PARTS}
        procs = []
        for pid, used in self._run_cpu_s.items():
            part, label = self._run_who[pid]
            cpu[part] += used
            procs.append({"pid": pid, "part": part, "label": label,
                          "cpu_percent": round(used / self._run_wall_s * 100.0, 1)})
        procs.sort(key=lambda p: -p["cpu_percent"])
        return {"cpu_percent": {k: round(v / self._run_wall_s * 100.0, 1) for k, v in cpu.items()},
                "processes": procs[:12], "cores": psutil.cpu_count() or 1,
                "machine_cpu_percent": round(sum(self._machine) / len(self._machine), 1) if self._machine else None,
                "seconds": round(self._run_wall_s, 1)}

    @property
    def mean_cpu_percent(self) -> float | None:
        """Over every sample, start-up included."""
        return self._cpu_sum / self.samples if self.samples else None

    @property
    def run_mean_cpu_percent(self) -> float | None:
        """Over the samples since mark() (None before any)."""
        return self._run_cpu_sum / self._run_samples if self._run_samples else None


    def _loop(self) -> None:
        # The first reading only sets the CPU baseline; rows start one interval later.
        self.sample(write=False)
        while not self._stop.wait(self.interval_s):
            self.sample()       # nothing while there is no root (a program restarting)

    def _tree(self) -> list[psutil.Process]:
        procs: list[psutil.Process] = []
        roots = ([self.root_pid] if self.root_pid is not None else []) + (self._extra() if self._extra else [])
        for pid in dict.fromkeys(roots):
            try:
                root = self._procs.get(pid) or psutil.Process(pid)
                procs += [root] + root.children(recursive=True)
            except psutil.NoSuchProcess:
                continue
        return self._known(procs)

    def _kit(self) -> list[psutil.Process]:
        procs = []
        for pid in (self._kit_pids() if self._kit_pids else {}):
            try:
                procs.append(self._procs.get(pid) or psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return self._known(procs)

    def _known(self, procs: list[psutil.Process]) -> list[psutil.Process]:
        out = []
        for p in procs:
            # Keep the Process objects: they remember the create time, so a reused pid is not mixed up.
            known = self._procs.get(p.pid)
            if known is not None and known.create_time() == p.create_time():
                out.append(known)
            else:
                self._procs[p.pid] = p
                self._cpu_s.pop(p.pid, None)
                out.append(p)
        return out

    def sample(self, write: bool = True) -> dict | None:
        """One reading of the tree (and a CSV row); None when the root process is gone."""
        t = time.monotonic()
        ts = now_ms()
        procs = self._tree()
        if not procs:
            return None
        kit_parts = self._kit_pids() if self._kit_pids else {}
        kit = [p for p in self._kit() if p.pid not in {q.pid for q in procs}]
        part_used = {part: 0.0 for part in PARTS}
        used_by: dict[int, tuple[float, str, psutil.Process]] = {}
        for p in kit:
            try:
                times = p.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            total = times.user + times.system
            delta = total - self._cpu_s.get(p.pid, total)       # a kit process first seen starts at 0
            self._cpu_s[p.pid] = total
            part = kit_parts.get(p.pid, "sink")
            part_used[part] += max(delta, 0.0)
            used_by[p.pid] = (max(delta, 0.0), part, p)
        cpu_used = 0.0
        rss = {"jvm": 0, "python": 0, "other": 0}
        alive = set()
        seen: list[tuple[int, object, str]] = []
        vms: dict[int, int] = {}
        for p in procs:
            try:
                with p.oneshot():
                    times = p.cpu_times()
                    mem = p.memory_info()
                    # Asked every time: a JVM first seen between fork and exec is still "python".
                    kind = _kind(p)
                    ppid = p.ppid()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            alive.add(p.pid)
            total = times.user + times.system
            delta = total - self._cpu_s.get(p.pid, 0.0)
            cpu_used += delta
            self._cpu_s[p.pid] = total
            part = "kit_in_engine" if kind == "python" else "engine"
            part_used[part] += max(delta, 0.0)
            used_by[p.pid] = (max(delta, 0.0), part, p)
            vms[p.pid] = mem.vms
            seen.append((ppid, mem, kind))
        for kind, mem_rss in tree_rss(seen, vms):
            rss[kind] += mem_rss
        alive |= {p.pid for p in kit}
        for pid in list(self._procs):
            if pid not in alive:
                self._procs.pop(pid, None)
                self._cpu_s.pop(pid, None)
        elapsed = t - self._last_t if self._last_t is not None else None
        self._last_t = t
        if not write or not elapsed:
            return {}
        cpu_percent = round(max(cpu_used, 0.0) / elapsed * 100.0, 1)
        total_rss = sum(rss.values())
        row = {"ts_ms": ts, "cpu_percent": cpu_percent, "rss_bytes": total_rss,
               "jvm_rss_bytes": rss["jvm"], "python_rss_bytes": rss["python"],
               **{f"{part}_cpu_percent": round(used / elapsed * 100.0, 1) for part, used in part_used.items()}}
        self._log.write(row[c] for c in RESOURCE_COLUMNS + PART_COLUMNS)
        if self._marked:
            self._run_wall_s += elapsed
            self._machine.append(psutil.cpu_percent(interval=None))
            for pid, (used, part, proc) in used_by.items():
                self._run_cpu_s[pid] = self._run_cpu_s.get(pid, 0.0) + used
                if pid not in self._run_who:
                    kind = "jvm" if part == "engine" and _kind(proc) == "jvm" else _kind(proc)
                    self._run_who[pid] = (part, _label(proc, kind, part))
        self.samples += 1
        self._cpu_sum += cpu_percent
        if self._marked:
            self._run_samples += 1
            self._run_cpu_sum += cpu_percent
        self.peak_rss_bytes = max(self.peak_rss_bytes, total_rss)
        self.last = row
        return row
