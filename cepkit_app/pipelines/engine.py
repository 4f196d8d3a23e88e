"""What `cepkit pairs` and `cepkit micro` share about running a generated program: the harness
run spec built from `[run]`, and the progress snapshot placed on the run's phases.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from harness.config import DriverConfig
from harness.engine_run import EngineRunSpec
from harness.run_finish import work_text
from harness.environments import engine_python
from kit.config import Config
from kit.engines import ENGINES
from kit.faults import parse_faults


def engine_run_spec(cfg: Config, program: Path, run_dir: Path, driver: DriverConfig, output_schemas: dict,
                    mean_eps: float | None, extra_conf: tuple[tuple[str, str], ...] = (),
                    env: tuple[tuple[str, str], ...] = (), say=None,
                    secret_env: tuple[tuple[str, str], ...] = ()) -> EngineRunSpec:
    """The harness run of a generated program with the `[run]` settings; q^b from the mean
    release rate (`RunConfig.backlog_limit_events`). The program runs in its engine's Python
    environment (made on first use, `say` hears about it: harness/environments.py)."""
    r = cfg.run
    return EngineRunSpec(
        engine=r.engine, python=engine_python(r.engine, say=say), program=program, run_dir=run_dir, driver=dataclasses.replace(driver, host=r.feed_bind), master=r.master,
        spark_conf=(("spark.driver.memory", r.driver_memory), *extra_conf,
                    *(tuple(item.split("=", 1)) for item in r.spark_conf)),     # the user's come last
        shuffle_partitions=r.shuffle_partitions, source_partitions=r.source_partitions,
        max_rows_per_batch=r.max_rows_per_batch,
        trigger_ms=r.trigger_ms, trigger=r.trigger, realtime_batch_ms=r.realtime_batch_ms, connectors=r.connectors, output_format=r.output_format, output_schemas=output_schemas,
        backlog_limit_events=r.backlog_limit_events(mean_eps), backlog_grace_s=r.backlog_grace_s,
        startup_timeout_s=r.startup_timeout_s, drain_timeout_s=r.drain_timeout_s, env=env, secret_env=secret_env,
        runtime_packages=ENGINES[r.engine].runtime_packages, advertised_host=r.advertised_host,
        checkpoint_url=r.checkpoint_url, launch=r.launch, faults=parse_faults(r.faults),
        max_restarts=r.max_restarts, worker_python=r.worker_python, fault_command=r.fault_command,
        cluster_credentials=r.cluster_credentials)


@dataclass(frozen=True)
class RunProgress:
    """A harness snapshot placed on the rate profile: its phase and the profile's length."""

    snapshot: object            # harness RunSnapshot
    phase: str
    duration_ms: int


def validates(result) -> bool:
    """Whether a run's output is validated: a completed run's, and a failed run's that put out an
    output log (an engine that died once too often, a drain that timed out): answers it never gave
    count as missing, so the verdict says how far it got. A run stopped as unsustainable is not: it
    was stopped on purpose, mid-stream (specs/ENGINE_RUN.md, "Supervision")."""
    if result.status == "completed":
        return True
    return result.status == "failed" and result.output_log is not None and Path(result.output_log).is_file()


def restart_line(restart: dict) -> str:
    """A death of the engine program (harness.supervision.Restart.to_dict()) in one line."""
    if restart.get("restarted_ms"):
        how = f"restarted from {restart['restored_from']}" if restart.get("restored_from") else "restarted"
    else:
        how = restart.get("outcome") or "not restarted"
    return f"engine program attempt {restart['attempt']} died: {restart['cause']}; {how}"


def plan_lines(result) -> tuple[str, ...]:
    """Where the run's events entered and its answers left the engine, and what bounded it
    (EngineRunResult `connectors` and `bound`, specs/ENGINE_RUN.md "What bounded a run")."""
    lines = []
    w = getattr(result, "work", None)
    if w:
        lines.append(work_text(w))
    c = result.connectors
    if c:
        lines.append(f"connectors: source {c.get('source')}, sink {c.get('sink')}"
                     + (f" ({c['why']})" if c.get("why") else ""))
    b = result.bound
    if b:
        lines.append(f"bound (as the harness saw the run): {b.get('label')}: {b.get('why')}")
    return tuple(lines)


def refused_line(result) -> str | None:
    """The connections a run's feed and sink refused for want of its secret (EngineRunResult
    `refused_connections`), in one line; None when none were: someone reached the run's ports
    who was not its engine, which a user should hear of (specs/ENGINE_RUN.md, "Who may connect")."""
    refused = {name: n for name, n in dict(result.refused_connections or {}).items() if n}
    if not refused:
        return None
    counts = ", ".join(f"{n} by the {name}" for name, n in refused.items())
    return (f"refused connections without the run's secret: {counts} "
            f"(each in {Path(result.run_dir) / 'logs' / 'harness.log'})")
