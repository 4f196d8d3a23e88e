"""Run one engine program against the driver and the sink: one benchmark run, one run directory.

`run_engine(EngineRunSpec(...))` starts the harness sink (in this process), the driver (its own
process, holding its events), and the engine program (a generated PySpark program, its own
process tree: Python, the JVM, Spark's Python workers). When the program prints `started` (its
query waits for data) the driver begins releasing. Once a second the monitor samples the driver
(backlog), the sink (outputs, latency) and the program's processes (CPU, memory), and calls
`on_progress`. The run ends when the program finishes by itself, fails, falls behind for longer
than the backlog limit allows (q^b: "unsustainable"), or does not catch up within
`drain_timeout_s` after the last event was released. Subprocesses never outlive `run_engine`,
whatever happens (exceptions and Ctrl-C included).

The harness process runs no JVM and imports no pyspark. specs/ENGINE_RUN.md describes the run
directory, the program contract and the end conditions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil
import pyarrow as pa

from kit.wire.feed_client import DriverClient
from harness.config import DriverConfig
from harness.jvm_archive import driver_java_options
from harness.process import DriverProcess
from harness.resources import BacklogLog, ResourceSampler, now_ms
from harness.sink import FORMATS, SinkServer
from harness.versions import machine, versions
from kit.errors import CepkitError
from kit.paths import REPO_ROOT
from kit.records import RecordSchema

STATUSES = ("completed", "unsustainable", "failed")
MONITOR_S = 1.0
# After SIGTERM the program waits up to 10 s for a batch boundary, then stops Spark.
TERM_WAIT_S = 40.0
# A normally finished program's JVM and workers exit on their own within this long.
TREE_EXIT_WAIT_S = 10.0


def _bad(name: str, message: str) -> CepkitError:
    return CepkitError(f"engine run: {name}: {message}")


@dataclass(frozen=True)
class EngineRunSpec:
    """One run of one engine program. `driver.hold` is forced on: the driver begins releasing
    once the program's query is up; and the driver keeps unread events up to twice q^b. `output_schemas` lists the output streams the run must
    deliver (an empty one still gets a file); values are pyarrow schemas or kit.records schemas.
    `backlog_limit_events` is q^b: the run stops as "unsustainable" once the driver's backlog has
    stayed above it for `backlog_grace_s`."""

    program: Path
    run_dir: Path
    driver: DriverConfig
    master: str = "local[*]"
    spark_conf: tuple[tuple[str, str], ...] = ()
    shuffle_partitions: int = 2
    trigger_ms: int = 0
    source_partitions: int = 1
    output_format: str = "parquet"
    output_schemas: Mapping[str, pa.Schema] | None = None
    roll_rows: int = 1_000_000
    backlog_limit_events: int | None = None
    backlog_grace_s: float = 5.0
    startup_timeout_s: float = 180.0
    drain_timeout_s: float = 120.0
    python: str = sys.executable
    env: tuple[tuple[str, str], ...] = ()      # extra environment of the program (e.g. CEPKIT_PG_DSN)
    jvm_class_archive: bool = True             # map harness/jvm_archive.py's archive when it exists

    def __post_init__(self) -> None:
        object.__setattr__(self, "program", Path(self.program))
        object.__setattr__(self, "run_dir", Path(self.run_dir))
        if not isinstance(self.driver, DriverConfig):
            raise _bad("driver", f"must be a DriverConfig, got {type(self.driver).__name__}")
        conf = self.spark_conf.items() if isinstance(self.spark_conf, Mapping) else self.spark_conf
        pairs = tuple((str(k), str(v)) for k, v in conf)
        object.__setattr__(self, "spark_conf", pairs)
        if self.output_format not in FORMATS:
            raise _bad("output_format", f"must be one of {', '.join(FORMATS)}, got {self.output_format!r}")
        if self.output_schemas is not None:
            schemas = {}
            for name, schema in dict(self.output_schemas).items():
                if isinstance(schema, RecordSchema):
                    schema = schema.arrow_schema()
                if not isinstance(schema, pa.Schema):
                    raise _bad(f"output_schemas.{name}", f"must be a pyarrow or kit.records schema, got {schema!r}")
                schemas[name] = schema
            object.__setattr__(self, "output_schemas", schemas)
        for name, low in (("shuffle_partitions", 1), ("trigger_ms", 0), ("source_partitions", 1), ("roll_rows", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise _bad(name, f"must be an integer >= {low}, got {value!r}")
        if self.backlog_limit_events is not None and (isinstance(self.backlog_limit_events, bool) or not isinstance(
                self.backlog_limit_events, int) or self.backlog_limit_events < 0):
            raise _bad("backlog_limit_events", f"must be an integer >= 0 or None, got {self.backlog_limit_events!r}")
        # Events the engine has not read stay in the driver up to twice q^b: a run that far behind
        # ends as unsustainable, not on a read of an evicted offset. Kept in the spec, so that
        # run.json shows the driver settings actually used.
        keep = max(self.driver.keep_unread_events, 2 * (self.backlog_limit_events or 0))
        object.__setattr__(self, "driver", dataclasses.replace(self.driver, hold=True, keep_unread_events=keep))
        for name in ("backlog_grace_s", "startup_timeout_s", "drain_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise _bad(name, f"must be a number >= 0, got {value!r}")
        if not self.master:
            raise _bad("master", "must not be empty")

    def to_dict(self) -> dict:
        return {"program": str(self.program), "run_dir": str(self.run_dir), "driver": self.driver.to_dict(),
                "master": self.master, "spark_conf": dict(self.spark_conf),
                "shuffle_partitions": self.shuffle_partitions, "trigger_ms": self.trigger_ms,
                "source_partitions": self.source_partitions, "output_format": self.output_format,
                "output_streams": list(self.output_schemas or {}), "roll_rows": self.roll_rows,
                "backlog_limit_events": self.backlog_limit_events, "backlog_grace_s": self.backlog_grace_s,
                "startup_timeout_s": self.startup_timeout_s, "drain_timeout_s": self.drain_timeout_s,
                "python": self.python, "env": dict(self.env), "jvm_class_archive": self.jvm_class_archive}


@dataclass(frozen=True)
class RunSnapshot:
    """What the monitor saw at one tick (passed to `on_progress` once a second)."""

    elapsed_s: float            # since the driver began (negative lead time excluded)
    sim_ms: int                 # simulated ms since the run start (wall ms for rate pacing); < 0 in the lead-in
    released: int
    pulled: int
    backlog: int
    total_events: int
    rate_eps: float             # events released per second over the last tick
    outputs: dict[str, int]     # rows per output stream so far
    latency_p99_ms: int | None  # event-time latency (arrivalTS - inputTS) so far
    cpu_percent: float | None   # the program's process tree, percent of one core
    rss_bytes: int | None


@dataclass(frozen=True)
class EngineRunResult:
    status: str                 # completed | unsustainable | failed
    message: str                # one line
    run_dir: Path
    output_log: Path | None     # run_dir/outputs/output-log.json, when written
    events_total: int | None
    events_released: int | None
    events_pulled: int | None
    outputs: dict[str, int]
    peak_rss_bytes: int | None          # the program's process tree, start-up included
    mean_cpu_percent: float | None      # percent of one core, from the driver's begin to the end
    latency_p50_ms: int | None
    latency_p99_ms: int | None
    duration_s: float
    # Spark's stateful operators over all batches: the largest sum of their state-store memory
    # (stateOperators.memoryUsedBytes) and of their state rows; None without stateful operators.
    peak_state_bytes: int | None = None
    peak_state_rows: int | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "completed"


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def _last_error_line(log: Path) -> str:
    """The most telling line at the end of the program's stderr, for a one-line message."""
    try:
        lines = [ln.rstrip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    # A traceback ends with "SomeError: message"; Java stack frames start with whitespace.
    for ln in reversed(lines[-200:]):
        if not ln[0].isspace() and ("Error" in ln or "Exception" in ln or "error" in ln):
            return ln.strip()[:300]
    return lines[-1].strip()[:300] if lines else "no output"


class _Program:
    """The engine program's process tree and its stdout events."""

    def __init__(self, cmd: list[str], env: dict, cwd: Path, logs: Path):
        self.log_path = logs / "engine.log"
        self._stderr = open(self.log_path, "w")
        self._jsonl = open(logs / "engine.stdout.jsonl", "w")
        self._other = logs / "engine.stdout.txt"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=cwd,
                                     text=True, bufsize=1, start_new_session=True)
        self.pid = self.proc.pid
        self.events: dict[str, dict] = {}
        self.progress: dict | None = None
        self.peak_state_bytes: int | None = None
        self.peak_state_rows: int | None = None
        self.started = threading.Event()
        self._known: dict[int, psutil.Process] = {}
        self._reader = threading.Thread(target=self._read, name="engine-stdout", daemon=True)
        self._reader.start()
        self.refresh_tree()

    def _read(self) -> None:
        other = None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                msg = None
            if isinstance(msg, dict) and "event" in msg:
                msg["harness_ts_ms"] = now_ms()
                self._jsonl.write(json.dumps(msg) + "\n")
                self._jsonl.flush()
                if msg["event"] == "progress":
                    self.progress = msg
                elif msg["event"] == "batch":
                    self._note_state(msg.get("state"))
                else:
                    self.events[msg["event"]] = msg
                if msg["event"] == "started":
                    self.started.set()
            else:
                # Something else on stdout (the JVM shares it): kept, apart from the JSON lines.
                other = other or open(self._other, "a")
                other.write(line)
                other.flush()
        if other:
            other.close()

    def _note_state(self, operators) -> None:
        if not isinstance(operators, list) or not operators:
            return
        total_bytes = sum(int(op.get("memoryUsedBytes") or 0) for op in operators if isinstance(op, dict))
        total_rows = sum(int(op.get("numRowsTotal") or 0) for op in operators if isinstance(op, dict))
        self.peak_state_bytes = max(self.peak_state_bytes or 0, total_bytes)
        self.peak_state_rows = max(self.peak_state_rows or 0, total_rows)

    def refresh_tree(self) -> None:
        """Remember the program's descendants: orphaned ones can still be found and ended."""
        try:
            root = psutil.Process(self.pid)
            for p in [root] + root.children(recursive=True):
                self._known.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def poll(self) -> int | None:
        return self.proc.poll()

    def alive_tree(self) -> list[psutil.Process]:
        out = []
        for p in self._known.values():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.NoSuchProcess:
                pass
        return out

    def terminate(self, wait_s: float = TERM_WAIT_S) -> None:
        """SIGTERM (the program stops its query between batches), then SIGKILL the whole tree."""
        self.refresh_tree()
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                pass
        self.reap()

    def reap(self, wait_s: float = TREE_EXIT_WAIT_S) -> None:
        """Make sure nothing of the tree is left: the root is waited for (or killed), its
        descendants get `wait_s` to exit by themselves (the JVM exits when the Python driver's
        pipe closes), then whatever remains is killed."""
        if self.proc.poll() is None:
            self.refresh_tree()
            self.proc.kill()
        self.proc.wait()
        if self._wait_tree(wait_s):
            return self._close()
        for p in self.alive_tree():
            if p.pid != self.pid:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
        try:
            os.killpg(self.pid, signal.SIGKILL)     # anything else still in the program's group
        except (ProcessLookupError, PermissionError):
            pass
        self._wait_tree(5.0)
        self._close()

    def _wait_tree(self, wait_s: float) -> bool:
        """Wait until no descendant runs (zombies count as gone: they are not ours to reap)."""
        deadline = time.monotonic() + wait_s
        while True:
            if not [p for p in self.alive_tree() if p.pid != self.pid]:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def _close(self) -> None:
        self._reader.join(timeout=5)
        self.proc.stdout.close()
        self._stderr.close()
        self._jsonl.close()


class _Run:
    def __init__(self, spec: EngineRunSpec, on_progress: Callable[[RunSnapshot], None] | None):
        self.spec = spec
        self.on_progress = on_progress
        self.dirs = {name: spec.run_dir / name for name in ("outputs", "metrics", "logs", "checkpoint")}
        self.t0 = time.monotonic()
        self.timings: dict[str, int | float | None] = {"harness_start_ms": now_ms()}
        self.sink: SinkServer | None = None
        self.driver: DriverProcess | None = None
        self.client: DriverClient | None = None
        self.program: _Program | None = None
        self.sampler: ResourceSampler | None = None
        self.backlog_log: BacklogLog | None = None
        self.clocks: dict | None = None
        self.last_stats: dict | None = None
        self.final_stats: dict | None = None
        self.status, self.message = "failed", "the run did not start"
        self.output_log: Path | None = None
        self.class_archive: str | None = None

    # ---- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        spec = self.spec
        for d in self.dirs.values():
            d.mkdir()
        logs = self.dirs["logs"]
        _write_json(spec.run_dir / "versions.json", versions(spec.python))
        _write_json(spec.run_dir / "machine.json", machine())
        _write_json(logs / "spec.json", spec.to_dict())
        self.sink = SinkServer(self.dirs["outputs"], spec.output_format, roll_rows=spec.roll_rows,
                               streams=spec.output_schemas)
        self.driver = DriverProcess(spec.driver, python=spec.python)
        self.client = self.driver.client()
        env = dict(os.environ)
        env.update(PYSPARK_PYTHON=spec.python, PYSPARK_DRIVER_PYTHON=spec.python, PYTHONUNBUFFERED="1")
        env.update(dict(spec.env))
        # The program imports harness.spark_app, and Spark's workers import the source module.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        cmd = [spec.python, str(spec.program.resolve()), "--driver", f"{self.driver.host}:{self.driver.port}",
               "--sink", f"{self.sink.host}:{self.sink.port}", "--checkpoint", str(self.dirs["checkpoint"]),
               "--master", spec.master, "--shuffle-partitions", str(spec.shuffle_partitions),
               "--trigger-ms", str(spec.trigger_ms), "--source-partitions", str(spec.source_partitions)]
        conf = spec.spark_conf
        if spec.jvm_class_archive:
            conf, self.class_archive = driver_java_options(conf, spec.python)
        for key, value in conf:
            cmd += ["--conf", f"{key}={value}"]
        _write_json(logs / "command.json", cmd)
        self.timings["program_start_ms"] = now_ms()
        self.program = _Program(cmd, env, spec.run_dir, logs)
        self.sampler = ResourceSampler(self.program.pid, self.dirs["metrics"] / "resources.csv").start()
        self.backlog_log = BacklogLog(self.dirs["metrics"] / "backlog.csv")

    def wait_started(self) -> bool:
        deadline = time.monotonic() + self.spec.startup_timeout_s
        while not self.program.started.wait(0.2):
            self.program.refresh_tree()
            if self.program.poll() is not None:
                self.program.started.wait(1.0)     # the line may still be in the pipe
                if self.program.started.is_set():
                    break
                self._end("failed", f"the engine program exited before it started (exit code "
                                    f"{self.program.poll()}): {self._program_error()}")
                return False
            if time.monotonic() > deadline:
                self._end("failed", f"the engine program did not start within {self.spec.startup_timeout_s:g} s "
                                    f"(see {self.program.log_path})")
                return False
        self.timings["engine_started_ms"] = self.program.events["started"]["harness_ts_ms"]
        self.timings["startup_s"] = round(time.monotonic() - self.t0, 3)
        return True

    def _program_error(self) -> str:
        failed = self.program.events.get("failed")
        if failed and failed.get("message"):
            return failed["message"]
        return _last_error_line(self.program.log_path)

    # ---- monitor -------------------------------------------------------------------------------

    def monitor(self) -> None:
        spec, client, program = self.spec, self.client, self.program
        client.begin()
        self.sampler.mark()
        self.clocks = client.info()["clocks"]
        self.timings["run_start_wall_ms"] = self.clocks["run_start_wall_ms"]
        begun = time.monotonic()
        over_since = finished_at = None
        prev = (time.monotonic(), 0)
        next_tick = time.monotonic()
        while True:
            rc = program.poll()
            if rc is not None:
                self._program_exited(rc)
                return
            now = time.monotonic()
            if now < next_tick:
                time.sleep(min(0.1, next_tick - now))
                continue
            next_tick = now + MONITOR_S
            program.refresh_tree()
            stats = self.last_stats = client.stats()
            self.backlog_log.record(stats)
            rate = (stats["released"] - prev[1]) / max(now - prev[0], 1e-6)
            prev = (now, stats["released"])
            self._report(stats, rate, now - begun)
            if stats.get("failed"):
                self._end("failed", f"driver: {stats['failed']}")
                return
            limit = spec.backlog_limit_events
            if limit is not None and stats["backlog"] > limit:
                over_since = over_since if over_since is not None else now
                if now - over_since >= spec.backlog_grace_s:
                    self._end("unsustainable", f"backlog {stats['backlog']} events > q^b = {limit} for "
                                               f"{now - over_since:.1f} s (>= {spec.backlog_grace_s:g} s)")
                    return
            else:
                over_since = None
            if stats["finished"]:
                if finished_at is None:
                    finished_at = now
                    self.timings["driver_finished_ms"] = now_ms()
                elif now - finished_at > spec.drain_timeout_s:
                    if stats["backlog"] > 0:
                        self._end("unsustainable", f"{stats['backlog']} events still not pulled "
                                                   f"{spec.drain_timeout_s:g} s after the last release")
                    else:
                        self._end("failed", f"the program pulled every event but did not finish within "
                                            f"{spec.drain_timeout_s:g} s after the last release")
                    return

    def _report(self, stats: dict, rate: float, elapsed_s: float) -> None:
        if self.on_progress is None:
            return
        sink = self.sink.stats()
        clocks = self.clocks
        run_ms = now_ms() - clocks["run_start_wall_ms"]     # negative during the lead-in
        sim_ms = int(run_ms * clocks["speed"]) if clocks.get("speed") else run_ms
        last = self.sampler.last or {}
        self.on_progress(RunSnapshot(
            elapsed_s=round(elapsed_s, 3), sim_ms=sim_ms, released=stats["released"], pulled=stats["pulled"],
            backlog=stats["backlog"], total_events=stats["total_events"], rate_eps=round(rate, 1),
            outputs=dict(sink["streams"]), latency_p99_ms=sink["latency"]["p99_ms"],
            cpu_percent=last.get("cpu_percent"), rss_bytes=last.get("rss_bytes")))

    def _program_exited(self, rc: int) -> None:
        program = self.program
        program.started.wait(0)
        program._reader.join(timeout=5)     # the last lines (finished / failed) are read
        events = program.events
        if rc == 0 and "finished" in events:
            self._end("completed", f"every event processed ({events['finished'].get('end_offset')} events, "
                                   f"{events['finished'].get('batches')} batches)")
        elif "failed" in events:
            self._end("failed", f"the engine program failed: {events['failed'].get('message')}")
        else:
            self._end("failed", f"the engine program exited with code {rc} before finishing: "
                                f"{_last_error_line(program.log_path)}")

    def _end(self, status: str, message: str) -> None:
        self.status, self.message = status, message
        self.timings["ended_ms"] = now_ms()

    # ---- stop ----------------------------------------------------------------------------------

    def cleanup(self) -> None:
        """Stop everything that was started, in order; never raises for a half-started run."""
        errors = []
        if self.program is not None:
            try:
                if self.program.poll() is None:
                    self.program.terminate()
                else:
                    self.program.reap()
            except Exception as e:  # noqa: BLE001 - keep cleaning up
                errors.append(f"program: {e}")
        if self.sampler is not None:
            self.sampler.stop()
        if self.backlog_log is not None:
            self.backlog_log.close()
        if self.driver is not None:
            try:
                if self.client is not None:
                    try:
                        self.last_stats = self.client.stats()
                    except CepkitError:
                        pass
                    self.client.close()
                self.final_stats = self.driver.stop() or self.last_stats
                _write_json(self.dirs["logs"] / "driver.json", self.final_stats)
            except Exception as e:  # noqa: BLE001
                errors.append(f"driver: {e}")
        if self.sink is not None:
            try:
                self.output_log = self.sink.finish(self.clocks)
            except Exception as e:  # noqa: BLE001
                errors.append(f"sink: {e}")
        if errors and self.status == "completed":
            self._end("failed", "cleanup failed: " + "; ".join(errors))

    def result(self) -> EngineRunResult:
        sink = self.sink.stats() if self.sink is not None else {"streams": {}, "latency": {}}
        stats = self.final_stats or self.last_stats or {}
        lat = sink["latency"]
        duration = round(time.monotonic() - self.t0, 3)
        self.timings["duration_s"] = duration
        return EngineRunResult(
            status=self.status, message=self.message, run_dir=self.spec.run_dir, output_log=self.output_log,
            events_total=stats.get("total_events"), events_released=stats.get("released"),
            events_pulled=stats.get("pulled"), outputs=dict(sink["streams"]),
            peak_rss_bytes=self.sampler.peak_rss_bytes if self.sampler and self.sampler.samples else None,
            mean_cpu_percent=_round(self.sampler.run_mean_cpu_percent if self.sampler else None),
            latency_p50_ms=lat.get("p50_ms"), latency_p99_ms=lat.get("p99_ms"), duration_s=duration,
            peak_state_bytes=self.program.peak_state_bytes if self.program else None,
            peak_state_rows=self.program.peak_state_rows if self.program else None)

    def write_run_json(self, result: EngineRunResult) -> None:
        stats = self.final_stats or self.last_stats or {}
        program = self.program
        record = {
            "kind": "cepkit.engine-run", "schema_version": 1,
            "status": result.status, "reason": result.message,
            "program": str(self.spec.program), "spec": self.spec.to_dict(),
            "timings": self.timings, "clocks": self.clocks, "jvm_class_archive": self.class_archive,
            "events": {"total": stats.get("total_events"), "released": stats.get("released"),
                       "pulled": stats.get("pulled"), "backlog_at_end": stats.get("backlog")},
            "outputs": result.outputs, "output_log": str(result.output_log) if result.output_log else None,
            "driver_lateness": stats.get("lateness"),
            "resources": {"peak_rss_bytes": result.peak_rss_bytes, "mean_cpu_percent": result.mean_cpu_percent,
                          "mean_cpu_percent_with_startup": _round(self.sampler.mean_cpu_percent if self.sampler
                                                                  else None),
                          "samples": self.sampler.samples if self.sampler else 0,
                          "peak_state_bytes": result.peak_state_bytes, "peak_state_rows": result.peak_state_rows},
            "latency": self.sink.stats()["latency"] if self.sink else None,
            "engine": {k: v for k, v in (program.events if program else {}).items()},
            "engine_exit_code": program.poll() if program else None,
        }
        _write_json(self.spec.run_dir / "run.json", record)


def run_engine(spec: EngineRunSpec, on_progress: Callable[[RunSnapshot], None] | None = None) -> EngineRunResult:
    """Run `spec.program` against the driver; returns how it went (see EngineRunResult).

    Engine failures (a crash, a failed query, no start in time) come back as status "failed" with
    a one-line message; a bad setting or dataset raises CepkitError (after cleaning up). The run
    directory must not exist.
    """
    if spec.run_dir.exists():
        raise CepkitError(f"{spec.run_dir}: already exists; a run never overwrites another")
    if not spec.program.is_file():
        raise CepkitError(f"{spec.program}: engine program not found")
    spec.run_dir.mkdir(parents=True)
    run = _Run(spec, on_progress)
    try:
        run.start()
        if run.wait_started():
            run.monitor()
    except KeyboardInterrupt:
        run._end("failed", "interrupted")
        raise           # after the cleanup below
    except CepkitError as e:
        run._end("failed", str(e))
        raise
    except Exception as e:
        run._end("failed", f"harness error: {type(e).__name__}: {e}")
        raise
    finally:
        run.cleanup()
        result = run.result()
        run.write_run_json(result)
    return result
