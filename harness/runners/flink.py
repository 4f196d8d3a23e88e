"""The Flink runner: the program under the Flink environment's interpreter (`.venv-flink`), which
starts PyFlink's gateway JVM with Flink's local mini-cluster inside it and Flink's Python workers
as its children: the program's process tree is the whole engine, so nothing else is sampled.
By hand: engine/flink-run.sh, the same command with its environment."""

from __future__ import annotations

import shlex

from harness.run_spec import EngineRunSpec
from harness.runners import Launch
from kit.errors import CepkitError

SCRIPT = "flink-run.sh"


def launch(spec: EngineRunSpec, args: list[str], env: dict[str, str]) -> Launch:
    if not spec.master.startswith("local"):
        raise CepkitError(f"run.master: the Flink engine runs Flink's local mini-cluster (local[N]), "
                          f"got {spec.master!r}")
    command = [spec.python, str(spec.program.resolve()), *args, "--master", spec.master]
    for key, value in spec.spark_conf:
        if not key.startswith("spark."):         # the run's Spark settings do not apply to Flink
            command += ["--conf", f"{key}={value}"]
    lines = ["#!/bin/sh",
             "# This run's Flink program, by hand (specs/ENGINES.md). Run it while a harness feeds and",
             "# collects on the ports below, e.g. `cepkit pairs --engine flink --launch external`.",
             "set -e"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    lines.append("exec " + " \\\n  ".join(shlex.quote(c) for c in command))
    # Flink's own log (the gateway JVM: JobManager, TaskManager) beside the program's, per run,
    # instead of one file inside the environment's pyflink package for every run.
    logs = {"FLINK_LOG_DIR": str((spec.run_dir / "logs").absolute())}
    return Launch(command, SCRIPT, "\n".join(lines) + "\n", logs, {})


def sampled_extra(spec: EngineRunSpec, started: dict) -> list[int]:
    return []
