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

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from harness.engine_process import EngineProcess, last_error_line
from harness.jvm_archive import driver_java_options
from harness.process import DriverProcess
from harness.resources import BacklogLog, ResourceSampler, now_ms
from harness.run_spec import EngineRunResult, EngineRunSpec, RunSnapshot
from harness.runtime_archive import package_dir
from harness.sink import SinkServer
from harness.versions import machine, versions
from kit.errors import CepkitError
from kit.wire.feed_client import DriverClient

MONITOR_S = 1.0


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


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
        self.program: EngineProcess | None = None
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
        # The program and Spark's Python workers import the engine's runtime packages from where
        # this harness found them (an installed wheel, or an editable checkout).
        roots = [str(package_dir(name).parent) for name in spec.runtime_packages]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys((*roots, *filter(None, [env.get("PYTHONPATH")]))))
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
        self.program = EngineProcess(cmd, env, spec.run_dir, logs)
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
        return last_error_line(self.program.log_path)

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
                                f"{last_error_line(program.log_path)}")

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
