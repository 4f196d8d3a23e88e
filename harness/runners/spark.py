"""The Spark runner: `python program.py ...` (the class archive and the quiet file system applied)
or, by hand, `spark-submit` (engine/spark-submit.sh); a cluster's executors are sampled too."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from harness.fault_injection import executor_jvms
from harness.health import dir_usage
from harness.jvm_archive import driver_java_options, with_driver_java_options
from harness.launch import (SUBMIT_SCRIPT, engine_conf, python_command, scratch_dir, secret_file, spark_submit_command,
                            submit_script)
from harness.local_fs import local_fs_settings
from harness.run_spec import EngineRunSpec
from harness.runtime_jar import runtime_jar_settings
from harness.runners import Launch


def launch(spec: EngineRunSpec, args: list[str], env: dict[str, str]) -> Launch:
    conf, applied, extra_env = engine_conf(spec), {}, {}
    submit_env = dict(env)
    if spec.launch == "external":
        # The script run by hand needs the runtime jar as much as the harness's launch does: the
        # default plans (the Java logic, Pairs' JVM plan) run its classes.
        jar_conf, jar_env, applied["runtime_jar"] = runtime_jar_settings(conf, {}, spec.master, spec.python)
        submit, submit_env = spark_submit_command(spec, args, jar_conf), {**env, **jar_env}
    else:
        submit = spark_submit_command(spec, args, conf)
    scratch = scratch_dir(spec)
    if scratch is not None:         # in local mode spark.local.dir follows java.io.tmpdir
        conf = with_driver_java_options(conf, f"-Djava.io.tmpdir={scratch}")
    if spec.jvm_class_archive:
        conf, applied["jvm_class_archive"] = driver_java_options(conf, spec.python)
    if spec.quiet_local_fs and spec.launch == "harness":
        conf, extra_env, applied["local_fs_jar"] = local_fs_settings(conf, spec.master, spec.python)
    # The jar whatever run.connectors says: the JVM plans (the Java logic, Pairs' JVM plan) need its
    # classes over the Python connectors too, and the program picks its connectors by --connectors.
    if spec.launch == "harness":
        conf, extra_env, applied["runtime_jar"] = runtime_jar_settings(conf, extra_env, spec.master, spec.python)
    if scratch is not None:         # the Python processes' temporary files too (the source's pause file)
        extra_env = {**extra_env, "TMPDIR": str(scratch)}
    command = python_command(spec, args, conf) if spec.launch == "harness" else submit
    return Launch(command, SUBMIT_SCRIPT, submit_script(submit, submit_env, secret_file(spec)), extra_env, applied,
                  scratch)


def sampled_extra(spec: EngineRunSpec, started: dict) -> list[int]:
    """The run's executor JVMs on this machine (a standalone cluster's), sampled with the program."""
    app_id = started.get("app_id")
    return [p.pid for p in executor_jvms(app_id)] if app_id and spec.master.startswith("spark://") else []


# The program's JVM (the driver): what kill-engine kills and supervision watches.
ENGINE_JVM = "org.apache.spark.deploy.SparkSubmit"


def replays_outputs(spec: EngineRunSpec) -> bool:
    """Answers the JVM writer sends (real-time mode; micro-batches with the JVM sink) come again,
    cut into other emits, when a batch or task is re-run: the sink's replay filter drops them by
    content (spark_runtime/realtime.py). Answers collected to the driver keep their batch id and
    carry no epoch, so the sink's batch ids catch those and the filter leaves them alone."""
    return spec.trigger == "realtime" or spec.connectors == "jvm"


def restart_args(checkpoint: str, attempt: int, heard_checkpoint: dict | None) -> tuple[list[str], str | None]:
    """A restarted Spark program's query recovers from the checkpoint directory by itself; its
    attempt tags a real-time query's sends (spark_runtime/realtime.py)."""
    return ["--attempt", str(attempt)], "the query's checkpoint"


def prepare_restart(spec: EngineRunSpec, started: dict) -> str | None:
    """Nothing to do: a Spark application ends with its driver, on a cluster too."""
    return None


def state_gauge(checkpoint: Path | None, heard: Callable[[], dict | None]) -> Callable[[], int | None]:
    """Spark's state on disk (metrics/health.csv `state_bytes`): the query checkpoint's `state/`
    subtree (every stateful operator's store: RocksDB changelogs, snapshots and SST files); None
    for a checkpoint this machine does not list."""
    def size() -> int | None:
        usage = dir_usage(checkpoint / "state") if checkpoint is not None else None
        return usage[0] if usage else None
    return size
