"""The end of an engine run: everything started is stopped in order, the result is put together and
run.json records it (specs/ENGINE_RUN.md, "The run directory"). `finish_run` never raises for a
half-started run: whatever ran is cleaned up and recorded.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from harness.bound import judge
from harness.engine_process import TERM_WAIT_S
from harness.run_spec import EngineRunResult
from kit.errors import CepkitError
from kit.jsonfile import dumps_json

FEED_GONE_TERM_WAIT_S = 3.0     # SIGTERM, then the whole tree killed: the feed cannot serve a batch's end


def finish_run(run) -> EngineRunResult:
    """Clean up `run` (harness.engine_run's run in progress), then its result, written to run.json."""
    for record in run.faults.close():
        if run.on_event is not None:
            run.on_event(f"fault {record.fault}: {record.note}")
    _cleanup(run)
    result = _result(run)
    _write_run_json(run, result)
    return result


def write_json(path: Path, data) -> None:
    """A record of the run directory (run.json, driver.json, ...), by the kit's one JSON writer:
    a figure that is not a number (a mean over no samples) is null, which every reader takes."""
    path.write_text(dumps_json(data))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _cleanup(run) -> None:
    """Stop everything that was started, in order; never raises for a half-started run."""
    errors = []
    if run.health is not None:      # first: no row sees the engine being stopped
        run.health.stop()
    if run.program is not None:
        try:
            if run.program.poll() is None:
                # With the feed gone no batch can end, so a graceful stop would only wait it out.
                run.program.terminate(FEED_GONE_TERM_WAIT_S if run.feed_died else TERM_WAIT_S)
            else:
                run.program.reap()
        except Exception as e:  # noqa: BLE001 - keep cleaning up
            errors.append(f"program: {e}")
    if run.sampler is not None:
        run.sampler.stop()
    if run.scratch is not None and (run.program is None or run.program.poll() is not None):
        # What the engine's JVMs left (all of it, when one was killed): only temporary files.
        shutil.rmtree(run.scratch, ignore_errors=True)
    if run.backlog_log is not None:
        run.backlog_log.close()
    if run.driver is not None:
        try:
            if run.client is not None:
                if not run.feed_died:       # a dead feed answers nothing: asking waits out the reconnects (10 s)
                    try:
                        run.last_stats = run.client.stats()
                    except CepkitError:
                        pass
                run.client.close()
            run.final_stats = run.driver.stop() or run.last_stats
            write_json(run.dirs["logs"] / "driver.json", run.final_stats)
        except Exception as e:  # noqa: BLE001
            errors.append(f"driver: {e}")
    if run.sink is not None:
        try:
            run.output_log = run.sink.finish(run.clocks, faults=run.log_faults())
        except Exception as e:  # noqa: BLE001
            errors.append(f"sink: {e}")
    if run.secret_file is not None:
        # The secret of a run that is over opens nothing: its file goes, whatever happened.
        run.secret_file.unlink(missing_ok=True)
    if errors and run.status == "completed":
        run._end("failed", "cleanup failed: " + "; ".join(errors))

def _result(run) -> EngineRunResult:
    sink = run.sink.stats() if run.sink is not None else {"streams": {}, "latency": {}}
    stats = run.final_stats or run.last_stats or {}
    lat = sink["latency"]
    duration = round(time.monotonic() - run.t0, 3)
    run.timings["duration_s"] = duration
    return EngineRunResult(
        status=run.status, message=run.message, run_dir=run.spec.run_dir, output_log=run.output_log,
        events_total=stats.get("total_events"), events_released=stats.get("released"),
        events_pulled=stats.get("pulled"), outputs=dict(sink["streams"]),
        peak_rss_bytes=run.sampler.peak_rss_bytes if run.sampler and run.sampler.samples else None,
        mean_cpu_percent=_round(run.sampler.run_mean_cpu_percent if run.sampler else None),
        latency_p50_ms=lat.get("p50_ms"), latency_p99_ms=lat.get("p99_ms"), duration_s=duration,
        peak_state_bytes=run.program.peak_state_bytes if run.program else None,
        peak_state_rows=run.program.peak_state_rows if run.program else None,
        restarts=tuple(r.to_dict() for r in run.restarts),
        refused_connections={"feed": int(stats.get("refused_connections") or 0),
                             "sink": int(sink.get("refused_connections") or 0)},
        connectors=_connectors(run), work=_work(run), bound=_bound(run))


def work_text(work) -> str | None:
    """A run's plan family and each query's plan, in one line (None when the program said none)."""
    if not work:
        return None
    queries = work.get("queries") or {}
    text = f"plan family {work.get('family')}"
    return text + (": " + "; ".join(f"{q}: {p}" for q, p in queries.items()) if queries else "")


def plan_record(connectors, work=None) -> dict | None:
    """run.json's `plan`: its connectors and, in words, where events entered and answers left, and
    where the per-event work ran (its plan family and each query's plan)."""
    if not connectors and not work:
        return None
    out: dict = {}
    if connectors:
        text = f"source {connectors.get('source')}, sink {connectors.get('sink')}"
        if connectors.get("why"):
            text += f" ({connectors['why']})"
        out.update(text=text, connectors=dict(connectors))
    if work:
        out.update(work=dict(work), work_text=work_text(work))
    return out


def _work(run) -> dict | None:
    started = (run.program.events if run.program else {}).get("started") or {}
    found = started.get("work")
    if not isinstance(found, dict):
        return None
    queries = found.get("queries")
    return {"family": str(found.get("family")),
            "queries": {str(k): str(v) for k, v in queries.items()} if isinstance(queries, dict) else {}}


def _connectors(run) -> dict | None:
    started = (run.program.events if run.program else {}).get("started") or {}
    found = started.get("connectors")
    return dict(found) if isinstance(found, dict) else None


def _bound(run) -> dict | None:
    """The run's verdict (harness/bound.py) from the sampler's CPU per part since the run began."""
    parts = run.sampler.parts() if run.sampler is not None else None
    if parts is None:
        return None
    verdict = judge(parts["cpu_percent"], parts["processes"], parts["cores"], kept_up=run.status == "completed",
                    machine_cpu_percent=parts["machine_cpu_percent"])
    return {**verdict.to_dict(), **parts}

def _write_run_json(run, result: EngineRunResult) -> None:
    stats = run.final_stats or run.last_stats or {}
    program = run.program
    sink = run.sink.stats() if run.sink is not None else None     # once: it takes the sink's lock
    record = {
        "kind": "cepkit.engine-run", "schema_version": 1,
        "status": result.status, "reason": result.message,
        "program": str(run.spec.program), "spec": run.spec.to_dict(),
        "timings": run.timings, "clocks": run.clocks, "jvm_class_archive": run.class_archive,
        "local_fs_jar": run.local_fs_jar,
        "runtime_jar": run.runtime_jar,
        "events": {"total": stats.get("total_events"), "released": stats.get("released"),
                   "pulled": stats.get("pulled"), "backlog_at_end": stats.get("backlog")},
        "outputs": result.outputs, "output_log": str(result.output_log) if result.output_log else None,
        "driver_lateness": stats.get("lateness"),
        "resources": {"peak_rss_bytes": result.peak_rss_bytes, "mean_cpu_percent": result.mean_cpu_percent,
                      "mean_cpu_percent_with_startup": _round(run.sampler.mean_cpu_percent if run.sampler
                                                              else None),
                      "samples": run.sampler.samples if run.sampler else 0,
                      "peak_state_bytes": result.peak_state_bytes, "peak_state_rows": result.peak_state_rows},
        # metrics/health.csv (harness/health.py): how many rows, and what the slowest one cost.
        "health": {"rows": run.health.rows, "interval_s": run.health.interval_s,
                   "max_sample_ms": run.health.max_sample_ms} if run.health is not None else None,
        "latency": sink["latency"] if sink else None,
        # Re-sent batches the sink dropped by id, and a restored Flink job's replayed answers it
        # dropped by content (harness/replay_filter.py).
        "sink": {k: sink[k] for k in ("emits", "duplicates", "replayed_rows_dropped")} if sink else None,
        "engine": {k: v for k, v in (program.events if program else {}).items()},
        "engine_exit_code": program.poll() if program else None,
        "engine_attempts": program.attempt if program else None,
        "faults": [r.to_dict() for r in run.faults.records],
        "restarts": [r.to_dict() for r in run.restarts],
        "max_restarts": run.spec.max_restarts,
        # Connections the feed and the sink refused for want of the run's secret (logs/harness.log).
        "refused_connections": dict(result.refused_connections),
        # Where events entered and answers left the engine (the plan's connectors, as the program
        # said), and what bounded the run (harness/bound.py).
        "plan": plan_record(result.connectors, result.work),
        "bound": {"text": f"{result.bound['label']}: {result.bound['why']}", **result.bound} if result.bound else None,
    }
    write_json(run.spec.run_dir / "run.json", record)
