"""Run one engine program against the driver and the sink: one benchmark run, one run directory.

`run_engine(EngineRunSpec(...))` starts the harness sink (in this process), the driver (its own
process, holding its events), and the engine program (a generated PySpark program, its own
process tree: Python, the JVM, Spark's Python workers). When the program prints `started` (its
query waits for data) the driver begins releasing. Once a second the monitor samples the driver
(backlog), the sink (outputs, latency) and the program's processes (CPU, memory), and calls
`on_progress`; from the run's begin a health sampler (harness/health.py) writes every 5 s what
could grow over a long run: the harness's, the driver's and the engine's memory, the engine's
state, checkpoint and output sizes. A program that dies (for any reason) is restarted from its
checkpoint up to `max_restarts` times (harness/supervision.py). The run ends when the program
finishes by itself, dies once too often, falls behind for longer than the backlog limit allows (q^b: "unsustainable"),
or does not catch up within `drain_timeout_s` after the last event was released. Subprocesses never outlive `run_engine`,
whatever happens (exceptions and Ctrl-C included).

The harness process runs no JVM and imports no pyspark. specs/ENGINE_RUN.md describes the run
directory, the program contract and the end conditions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from harness.engine_process import EngineProcess, fatal_jvm_error, last_error_line
from harness.fault_injection import FaultInjector, engine_jvm, find_program
from harness.health import HEALTH_CSV, HealthSampler, local_checkpoint
from harness.launch import checkpoint_location, program_args, program_env, runtime_zip, secret_file, write_secret_file
from harness.runners import runner
from harness.process import DriverProcess
from harness.run_finish import finish_run, write_json
from harness.resources import BacklogLog, ResourceSampler, now_ms
from harness.run_spec import EngineRunResult, EngineRunSpec, RunSnapshot
from harness.server import log_to
from harness.sink import SinkServer
from harness.supervision import EXIT_AFTER_DEATH_S, JvmWatch, Restart, death_cause, exit_text
from kit.faults import DEATH, HOST_FAULTS
from harness.versions import machine, versions
from kit.atomic import atomic_write
from kit.errors import CepkitError
from kit.wire.auth import SECRET_ENV, new_secret
from kit.wire.feed_client import DriverClient

MONITOR_S = 1.0
# An engine started outside the harness prints nothing the harness reads: the run is over once
# every event was pulled and no output has come for this long.
EXTERNAL_QUIET_S = 10.0


class _Quiet:
    """How long the sink has received no row."""

    def __init__(self):
        self.rows, self.since = -1, 0.0

    def for_s(self, sink_stats: dict, now: float) -> float:
        rows = sum(sink_stats["streams"].values())
        if rows != self.rows:
            self.rows, self.since = rows, now
        return now - self.since


def _connect_host(bind: str) -> str:
    return "127.0.0.1" if bind in ("0.0.0.0", "") else "::1" if bind == "::" else bind


class _Run:
    def __init__(self, spec: EngineRunSpec, on_progress: Callable[[RunSnapshot], None] | None,
                 on_event: Callable[[str], None] | None = None):
        self.spec = spec
        self.on_progress = on_progress
        self.on_event = on_event
        self.engine = runner(spec.engine)
        self.faults = FaultInjector(spec.faults, self.engine.ENGINE_JVM, spec.fault_command, spec.run_dir / "logs")
        self.restarts: list[Restart] = []
        self.ever_started = False      # whether any attempt reported `started`
        self.jvm = JvmWatch()
        self.jvm_gone_at: float | None = None
        self.checkpoint_at = ""                   # the program's --checkpoint
        self.heard_checkpoint: dict | None = None  # the newest `checkpoint` event (Flink)
        self.command: list[str] = []
        self.env: dict[str, str] = {}
        self.dirs = {name: spec.run_dir / name for name in ("outputs", "metrics", "logs", "checkpoint")}
        self.t0 = time.monotonic()
        self.timings: dict[str, int | float | None] = {"harness_start_ms": now_ms()}
        self.sink: SinkServer | None = None
        self.driver: DriverProcess | None = None
        self.client: DriverClient | None = None
        self.program: EngineProcess | None = None
        self.sampler: ResourceSampler | None = None
        self.health: HealthSampler | None = None      # metrics/health.csv, from the run's begin
        self.backlog_log: BacklogLog | None = None
        self.clocks: dict | None = None
        self.last_stats: dict | None = None
        self.final_stats: dict | None = None
        self.status, self.message = "failed", "the run did not start"
        # The feed died: a batch waits on reads that cannot come, so the program is not given
        # time to stop between batches (harness/run_finish.py).
        self.feed_died = False
        self.output_log: Path | None = None
        self.class_archive: str | None = None
        self.local_fs_jar: str | None = None
        self.runtime_jar: str | None = None
        self.script: Path | None = None
        self.scratch: Path | None = None       # the JVMs' temporary files (harness/launch.py scratch_dir)
        # Who may connect to the feed and the sink (specs/DRIVER.md): only in the servers, the
        # clients and the program's environment; never in a file but `engine/secret` (external).
        self.secret = new_secret()
        self.secret_file: Path | None = None

    # ---- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        spec = self.spec
        for d in self.dirs.values():
            d.mkdir()
        logs = self.dirs["logs"]
        write_json(spec.run_dir / "versions.json", versions(spec.python))
        write_json(spec.run_dir / "machine.json", machine())
        write_json(logs / "spec.json", spec.to_dict())
        self.sink = SinkServer(self.dirs["outputs"], spec.output_format, host=spec.driver.host,
                               roll_rows=spec.roll_rows, streams=spec.output_schemas,
                               replay_filter=self.engine.replays_outputs(spec), secret=self.secret,
                               on_refused=log_to(logs / "harness.log"))
        # The feed runs in cepkit's own environment, not the engine's.
        self.driver = DriverProcess(spec.driver, secret=self.secret, log=logs / "harness.log")
        self.client = self.driver.client(host=_connect_host(spec.driver.host))
        self.checkpoint_at = checkpoint_location(spec, spec.run_dir)
        args = program_args(spec, self.driver.port, self.sink.port, self.checkpoint_at, runtime_zip(spec))
        self.env = program_env(spec)
        launch = self.engine.launch(spec, args, self.env)
        if spec.launch == "external":      # before the script: whoever sees the script finds it
            self.secret_file = write_secret_file(secret_file(spec), self.secret)
        script = spec.run_dir / launch.script_name
        atomic_write(script, launch.script)
        script.chmod(0o755)
        self.script = script
        self.class_archive = launch.applied.get("jvm_class_archive")
        self.local_fs_jar = launch.applied.get("local_fs_jar")
        self.runtime_jar = launch.applied.get("runtime_jar")
        self.scratch = launch.scratch
        self.env = {**self.env, **launch.env}
        self.command = launch.command
        write_json(logs / "command.json", self.command)
        self.timings["program_start_ms"] = now_ms()
        # The kit's own processes are sampled apart from the engine's (harness/bound.py): the feed,
        # and this process, which hosts the sink.
        kit_pids = {self.driver.proc.pid: "feed", os.getpid(): "sink"}
        self.sampler = ResourceSampler(None, self.dirs["metrics"] / "resources.csv", extra=self._executors,
                                       kit_pids=lambda: kit_pids)
        checkpoint = local_checkpoint(self.checkpoint_at)
        self.health = HealthSampler(self.dirs["metrics"] / HEALTH_CSV, outputs=self.dirs["outputs"],
                                    checkpoint=checkpoint, driver_pid=self.driver.proc.pid, resources=self.sampler,
                                    state=self.engine.state_gauge(checkpoint, lambda: self.heard_checkpoint))
        if spec.launch == "harness":
            self._launch(attempt=1)
        elif self.on_event is not None:
            self.on_event(f"waiting for the engine: run {self.script} (the harness feeds on port {self.driver.port}, "
                          f"collects on port {self.sink.port})")
        self.sampler.start()
        self.backlog_log = BacklogLog(self.dirs["metrics"] / "backlog.csv")

    def _launch(self, attempt: int, extra_args: list[str] = ()) -> None:
        # The secrets never in self.env: that is in the script.
        env = {**os.environ, **self.env, **dict(self.spec.secret_env), SECRET_ENV: self.secret}
        self.program = EngineProcess([*self.command, *extra_args], env, self.spec.run_dir,
                                     self.dirs["logs"], attempt, on_event=self._heard)
        self.jvm = JvmWatch()
        self.jvm_gone_at = None
        self.sampler.retarget(self.program.pid)

    def _heard(self, msg: dict) -> None:
        """An event line of the program (its reader thread): completed checkpoints reach the sink."""
        if msg.get("event") == "checkpoint" and isinstance(msg.get("trigger_ts_ms"), int):
            self.heard_checkpoint = msg
            self.sink.checkpoint_completed(msg["trigger_ts_ms"])

    def _executors(self) -> list[int]:
        """The run's executor JVMs on this machine (a cluster's), sampled with the program."""
        return self.engine.sampled_extra(self.spec, self._started_event()) if self.program else []

    def _started_event(self) -> dict:
        return self.program.events.get("started", {}) if self.program else {}

    def wait_started(self) -> bool:
        if self.spec.launch == "external":
            return self._wait_external()
        if not self._wait_program_started():
            return False
        self.timings["engine_started_ms"] = self.program.events["started"]["harness_ts_ms"]
        self.timings["startup_s"] = round(time.monotonic() - self.t0, 3)
        return True

    def _wait_program_started(self) -> bool:
        """Until the program reports `started`. One that dies first (killed while it started, as
        Flink's JVM during the job's submission) is a death like any other: restarted, up to
        run.max_restarts (specs/ENGINE_RUN.md, "Supervision")."""
        deadline = time.monotonic() + self.spec.startup_timeout_s
        while not self.program.started.wait(0.2):
            self.program.refresh_tree()
            if self.program.poll() is not None:
                self.program.started.wait(1.0)     # the line may still be in the pipe
                if self.program.started.is_set():
                    break
                return self._restart(self.program.poll())
            if time.monotonic() > deadline:
                self._end("failed", f"the engine program did not start within {self.spec.startup_timeout_s:g} s "
                                    f"(see {self.program.log_path})")
                return False
        self.ever_started = True
        return True

    def _wait_external(self) -> bool:
        """An engine started by someone else is up once its source asks the driver for offsets."""
        deadline = time.monotonic() + self.spec.startup_timeout_s
        while self.client.stats()["offset_requests"] == 0:
            if time.monotonic() > deadline:
                self._end("failed", f"no engine asked the feed for events within {self.spec.startup_timeout_s:g} s "
                                    f"(run {self.script})")
                return False
            time.sleep(0.2)
        self.ever_started = True
        self.timings["engine_started_ms"] = now_ms()
        self.timings["startup_s"] = round(time.monotonic() - self.t0, 3)
        found = find_program(self.spec.program)
        if found is not None:                 # on this machine: its CPU and memory are sampled too
            self.sampler.retarget(found)
        return True

    def _program_error(self) -> str:
        fatal = fatal_jvm_error(self.program.log_path)
        if fatal:
            return f"the engine JVM failed: {fatal}"
        failed = self.program.events.get("failed")
        if failed and failed.get("message"):
            return failed["message"]
        return last_error_line(self.program.log_path)

    # ---- monitor -------------------------------------------------------------------------------

    def monitor(self) -> None:
        spec, client = self.spec, self.client
        client.begin()
        self.sampler.mark()
        self.health.start()     # long-run health is the run's own: start-up is not sampled
        self.clocks = client.info()["clocks"]
        self.timings["run_start_wall_ms"] = self.clocks["run_start_wall_ms"]
        begun = time.monotonic()
        over_since = finished_at = None
        quiet = _Quiet()
        prev = (time.monotonic(), 0)
        next_tick = time.monotonic()
        while True:
            if self.driver.proc.poll() is not None:     # before the program's exit: the feed is the cause
                self._end_feed_died()
                return
            if self.program is not None:
                rc = self.program.poll()
                if rc is not None and not (rc == 0 and "finished" in self.program.events):
                    if not self._restart(rc):      # a death: restarted, or the run ends here
                        return
                    over_since = None
                    continue
                if rc is not None:
                    self._program_exited(rc)
                    return
                self._watch_jvm()
            now = time.monotonic()
            if now < next_tick:
                time.sleep(min(0.1, next_tick - now))
                continue
            next_tick = now + MONITOR_S
            if not self._inject(now - begun):
                return
            if self.program is not None:
                self.program.refresh_tree()
            stats = self.last_stats = client.stats()
            self.backlog_log.record(stats)
            rate = (stats["released"] - prev[1]) / max(now - prev[0], 1e-6)
            prev = (now, stats["released"])
            self._report(stats, rate, now - begun)
            if stats.get("failed"):
                self._end("failed", f"driver: {stats['failed']}")
                return
            limit = spec.backlog_limit_events
            if limit is not None and stats["backlog"] > limit and self.jvm_gone_at is None:
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
                if self.program is None and stats["backlog"] == 0 and quiet.for_s(self.sink.stats(), now) >= \
                        EXTERNAL_QUIET_S:
                    self._end("completed", f"every event pulled ({stats['total_events']} events) and no output for "
                                           f"{EXTERNAL_QUIET_S:g} s (an engine started outside the harness)")
                    return
                if now - finished_at > spec.drain_timeout_s:
                    if stats["backlog"] > 0:
                        self._end("unsustainable", f"{stats['backlog']} events still not pulled "
                                                   f"{spec.drain_timeout_s:g} s after the last release")
                    else:
                        self._end("failed", f"the program pulled every event but did not finish within "
                                            f"{spec.drain_timeout_s:g} s after the last release")
                    return

    def _inject(self, elapsed_s: float) -> bool:
        """Inject the faults now due. False when a fault could not be injected (the run ends: its
        figures would be wrong)."""
        for fault in self.faults.due(elapsed_s):
            record = self.faults.inject(fault, self.program.alive_tree() if self.program else [],
                                        self._started_event().get("app_id"))
            if record.at_ms is None:
                self._end("failed", f"fault {fault.text}: {record.note}")
                return False
            if self.on_event is not None:
                done = "started" if fault.kind in HOST_FAULTS else "killed"
                self.on_event(f"fault {fault.text}: {done} {record.target} (pid {record.pid})")
        return True

    def _watch_jvm(self) -> None:
        """Notice the engine JVM vanishing under a living program; end a program that outlives its
        JVM by EXIT_AFTER_DEATH_S (its death is then handled like any other)."""
        if self.jvm.pid is None:
            self.program.refresh_tree()
            self.jvm.see(engine_jvm(self.program.alive_tree(), self.engine.ENGINE_JVM))
            return
        if self.jvm_gone_at is None:
            if self.jvm.gone() is not None:
                self.jvm_gone_at = time.monotonic()
        elif time.monotonic() - self.jvm_gone_at > EXIT_AFTER_DEATH_S and self.program.poll() is None:
            self.program.terminate(wait_s=5.0)

    def _death(self, rc: int) -> Restart:
        """The program's death, recorded with its cause; an injected kill counts as its cause."""
        program = self.program
        program._reader.join(timeout=5)     # its last lines (failed / stopped) are read
        gone = self.jvm.gone()
        kill = next((r for r in reversed(self.faults.records) if r.kind == "kill-engine" and r.at_ms is not None
                     and r.restarted_ms is None), None)
        error = last_error_line(program.log_path)
        cause = death_cause(rc, program.events, gone, error, fatal_jvm_error(program.log_path))
        if kill is not None:
            cause = f"{kill.fault} (injected: SIGKILL of {kill.target}, pid {kill.pid}); {cause}"
        if kill is not None:
            died_ms = kill.at_ms
        elif self.jvm_gone_at is not None:      # seen vanishing before the program ended
            died_ms = now_ms() - int(1000 * (time.monotonic() - self.jvm_gone_at))
        else:
            died_ms = now_ms()
        return Restart(program.attempt, died_ms, cause, rc, error, kill.fault if kill else None)

    def _restart(self, rc: int) -> bool:
        """The program died: record it and start it again from its checkpoint, unless it has died
        `max_restarts` times already (then the run ends failed; its output is still validated)."""
        death = self._death(rc)
        self.restarts.append(death)
        self.program.reap()
        if self.on_event is not None:
            self.on_event(f"engine program attempt {death.attempt} died: {death.cause}")
        refused = self.sink.refused_output     # the sink starts before any program does
        if refused is not None:         # the same program would send the same output again
            death.outcome = "not restarted: the sink refused its output"
            self._end("failed", f"the engine program's output was refused by the sink: {refused}")
            return False
        if self.driver.proc.poll() is not None:
            death.outcome = "not restarted: the feed is gone"
            self._end_feed_died()
            return False
        if len(self.restarts) > self.spec.max_restarts:
            death.outcome = f"not restarted: run.max_restarts = {self.spec.max_restarts} used up"
            if not self.ever_started and len(self.restarts) == 1:
                self._end("failed", f"the engine program exited before it started ({exit_text(rc)}): "
                                    f"{self._program_error()}")
            else:
                self._end("failed", f"the engine program died {len(self.restarts)} times, more than "
                                    f"run.max_restarts = {self.spec.max_restarts} allows; last: {death.cause}")
            return False
        note = self.engine.prepare_restart(self.spec, self.program.events.get("started", {}))
        if note and self.on_event is not None:
            self.on_event(note)
        attempt = self.program.attempt + 1
        extra, restored = self.engine.restart_args(self.checkpoint_at, attempt, self.heard_checkpoint)
        death.restored_from = restored
        self._launch(attempt, extra)
        if self.on_event is not None:
            self.on_event(f"restarting the engine program from {restored or 'its checkpoint'} (attempt {attempt})")
        if not self._wait_program_started():
            death.outcome = "the restarted program did not start"
            return False
        death.restarted_ms = self.program.events["started"]["harness_ts_ms"]
        death.outcome = "restarted"
        for record in self.faults.records:
            if record.fault == death.fault and record.restarted_ms is None:
                record.restarted_ms = death.restarted_ms
        return True

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
            done = events["finished"]
            batches = f", {done['batches']} batches" if done.get("batches") is not None else ""
            self._end("completed", f"every event processed ({done.get('end_offset')} events{batches})")
        elif fatal := fatal_jvm_error(program.log_path):
            self._end("failed", f"the engine program failed: the engine JVM failed: {fatal}")
        elif "failed" in events:
            self._end("failed", f"the engine program failed: {events['failed'].get('message')}")
        else:
            self._end("failed", f"the engine program exited with code {rc} before finishing: "
                                f"{last_error_line(program.log_path)}")

    def log_faults(self) -> list[dict]:
        """The output log's faults: every injected one, and every death the harness did not cause
        (kind `engine-died`), so the validator measures the recovery from each."""
        out = self.faults.log_entries()
        run_start = self.clocks["run_start_wall_ms"] if self.clocks else None
        for r in self.restarts:
            if r.fault is None:
                at = f"@{(r.died_ms - run_start) / 1000:.0f}s" if run_start is not None else ""
                out.append({"fault": f"{DEATH}{at}", "kind": DEATH, "at_ms": r.died_ms})
        return sorted(out, key=lambda e: e["at_ms"])

    def _end(self, status: str, message: str) -> None:
        self.status, self.message = status, message
        self.timings["ended_ms"] = now_ms()

    def _end_feed_died(self) -> None:
        self._end("failed", f"the feed (driver process) died (exit code {self.driver.proc.poll()}); "
                            "outputs so far are kept")
        self.feed_died = True

    # ---- stop ----------------------------------------------------------------------------------


def run_engine(spec: EngineRunSpec, on_progress: Callable[[RunSnapshot], None] | None = None,
               on_event: Callable[[str], None] | None = None) -> EngineRunResult:
    """Run `spec.program` against the driver; returns how it went (see EngineRunResult).
    `on_event` hears the moments a user should know of (waiting for an external engine, faults,
    restarts), one line each.

    Engine failures (a crash, a failed query, no start in time) come back as status "failed" with
    a one-line message; a bad setting or dataset raises CepkitError (after cleaning up). The run
    directory must not exist.
    """
    if spec.run_dir.exists():
        raise CepkitError(f"{spec.run_dir}: already exists; a run never overwrites another")
    if not spec.program.is_file():
        raise CepkitError(f"{spec.program}: engine program not found")
    spec.run_dir.mkdir(parents=True)
    run = _Run(spec, on_progress, on_event)
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
        result = finish_run(run)
    if result.status == "failed" and not run.ever_started:
        # Nothing ran, so there is nothing to validate: the command could not do its job (exit 2,
        # specs/EXIT_CODES.md), not a FAILED verdict. run.json is written all the same.
        raise EngineNeverStarted(f"{spec.run_dir}: the engine never started: {result.message}")
    return result


class EngineNeverStarted(CepkitError):
    """No attempt of the engine program reported `started` (run.json says how each ended)."""
