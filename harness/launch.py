"""How the harness starts an engine program, and the command line that does the same by hand.

The program is started as `python program.py ARGS` (the harness's own way: fastest start-up, the
JVM class archive applies) or through `spark-submit` (what a cluster user runs; the harness writes
it to `engine/spark-submit.sh` in every run). Both hand the program the same arguments: where the
feed and the sink are (the advertised host and the ports the harness got), the checkpoint
location, the plan settings, and the engine's runtime as a zip that Spark ships to its executors
(`--py-files`), so executors need no checkout of cepkit.

Neither way carries the run's secret (kit/wire/auth.py) in the command or the script: the harness
puts it in the program's environment (`CEPKIT_SECRET`), and a by-hand script reads it from there
or, for `launch = "external"`, from `engine/secret` (mode 0600), which the harness writes while
the run waits for the engine and removes when the run ends.
"""

from __future__ import annotations

import os
import shlex
import uuid
from pathlib import Path

from harness.run_spec import EngineRunSpec
from harness.runtime_archive import package_dir, write_runtime_archive
from kit.tls import CREDENTIALS_ENV
from kit.wire.auth import SECRET_ENV

RUNTIME_ZIP = "runtime.zip"
SUBMIT_SCRIPT = "spark-submit.sh"
# Beside the by-hand script, while an external launch waits: the run's secret (see the module doc).
SECRET_FILE = "secret"
# In the run directory while the engine runs: its JVMs' temporary files (see scratch_dir).
SCRATCH_DIR = "tmp"


def secret_file(spec: EngineRunSpec) -> Path:
    return spec.run_dir.absolute() / SECRET_FILE


def write_secret_file(path: Path, secret: str) -> Path:
    """The secret for an external launch's script: created 0600 (never wider, not even for a
    moment) and never over an existing file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return path


def secret_lines(path: Path) -> list[str]:
    """A by-hand script's lines that give the program the run's secret: `CEPKIT_SECRET` as the
    caller has it, else the file an external launch writes; neither (a feed without a secret):
    none, and the program connects without one."""
    quoted = shlex.quote(str(path))
    return ["# The run's secret: CEPKIT_SECRET if set, else the file the harness writes while an external",
            "# launch waits (specs/DRIVER.md, \"Who may connect\"). Never written into this script.",
            f"if [ -z \"${{{SECRET_ENV}:-}}\" ] && [ -r {quoted} ]; then",
            f"  {SECRET_ENV}=$(cat {quoted})",
            f"  export {SECRET_ENV}",
            "fi"]


def scratch_dir(spec: EngineRunSpec) -> Path | None:
    """Where the program's JVMs keep their temporary files (`java.io.tmpdir`): `tmp/` in the run
    directory, made here and removed when the run ends (harness/run_finish.py). A JVM removes its
    temporary files only when it exits cleanly, so a killed engine left them in /tmp for good:
    Flink's extracted planner and RPC jars (45 and 23 MB each time), Spark's `spark-*` and
    `blockmgr-*` directories. None for a run directory whose path holds whitespace, which neither
    engine's option string can carry (its JVMs keep /tmp), and for `launch = "external"`: the
    by-hand scripts leave the JVMs' temporary directory alone, as they may run on another machine."""
    path = (spec.run_dir / SCRATCH_DIR).absolute()
    if spec.launch != "harness" or any(c.isspace() for c in str(path)):
        return None
    path.mkdir(parents=True, exist_ok=True)
    return path


def checkpoint_location(spec: EngineRunSpec, run_dir: Path) -> str:
    """The query's checkpoint: in the run directory, or a fresh directory under
    `spec.checkpoint_url` (shared storage every node of a cluster sees)."""
    if not spec.checkpoint_url:
        return str(run_dir.absolute() / "checkpoint")     # the program runs in the run directory
    return f"{spec.checkpoint_url.rstrip('/')}/{run_dir.parent.name}-{run_dir.name}-{uuid.uuid4().hex[:8]}"


def runtime_zip(spec: EngineRunSpec) -> Path | None:
    """The runtime zip beside the program (written once; reused by a restart)."""
    if not spec.runtime_packages:
        return None
    path = spec.program.absolute().parent / RUNTIME_ZIP     # absolute: the program runs elsewhere
    if not path.exists():
        write_runtime_archive(spec.runtime_packages, path)
    return path


def program_args(spec: EngineRunSpec, driver_port: int, sink_port: int, checkpoint: str,
                 py_files: Path | None) -> list[str]:
    """The program's own arguments (spark_runtime/app.py): the same whoever starts it."""
    host = spec.advertised
    args = ["--driver", f"{host}:{driver_port}", "--sink", f"{host}:{sink_port}", "--checkpoint", checkpoint,
            "--shuffle-partitions", str(spec.shuffle_partitions), "--trigger-ms", str(spec.trigger_ms)]
    if spec.source_partitions:
        args += ["--source-partitions", str(spec.source_partitions)]
    if spec.max_rows_per_batch and spec.trigger == "micro-batch":
        args += ["--max-rows-per-batch", str(spec.max_rows_per_batch)]
    if spec.connectors != "jvm":
        args += ["--connectors", spec.connectors]
    if spec.trigger != "micro-batch":       # Spark's real-time mode (run_spec allows it on Spark only)
        args += ["--trigger", spec.trigger, "--realtime-batch-ms", str(spec.realtime_batch_ms)]
    if py_files is not None:
        args += ["--py-files", str(py_files)]
    return args


def engine_conf(spec: EngineRunSpec) -> tuple[tuple[str, str], ...]:
    """The run's Spark settings; with a cluster master also where the driver listens and the
    address its executors reach it at (the feed's rule), unless the run sets them itself."""
    conf = tuple(spec.spark_conf)
    if spec.master.startswith("local"):
        return conf
    given = {k for k, _ in conf}
    extra = (("spark.driver.host", spec.advertised), ("spark.driver.bindAddress", spec.driver.host))
    return tuple((k, v) for k, v in extra if k not in given) + conf


def python_command(spec: EngineRunSpec, args: list[str], conf) -> list[str]:
    cmd = [spec.python, str(spec.program.resolve()), *args, "--master", spec.master]
    for key, value in conf:
        cmd += ["--conf", f"{key}={value}"]
    return cmd


def spark_submit(python: str) -> str:
    """spark-submit beside the interpreter (a venv with pyspark), else pyspark's own copy."""
    beside = Path(python).parent / "spark-submit"
    return str(beside) if beside.exists() else str(package_dir("pyspark") / "bin" / "spark-submit")


def spark_submit_command(spec: EngineRunSpec, args: list[str], conf) -> list[str]:
    """The same program through spark-submit; the program takes spark-submit's master and conf."""
    py_files = args[args.index("--py-files") + 1] if "--py-files" in args else None
    cmd = [spark_submit(spec.python), "--master", spec.master, "--name", spec.program.stem,
           "--conf", f"spark.pyspark.python={spec.worker_python or spec.python}",
           "--conf", f"spark.pyspark.driver.python={spec.python}"]
    for key, value in conf:
        cmd += ["--conf", f"{key}={value}"]
    if py_files is not None:
        cmd += ["--py-files", py_files]
    return cmd + [str(spec.program.resolve()), *args]


def by_hand_script(head: list[str], exports: dict[str, str], command: list[str], secret_at: Path) -> str:
    """A run's engine by hand (every engine's runner writes one): comment lines `head`, `exports`
    (the run's secret never among them), the secret from the caller's environment or `secret_at`
    (secret_lines), then `command` with each option and its value on one line."""
    lines = ["#!/bin/sh", *head, "set -e"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(exports.items()) if k != SECRET_ENV]
    lines += secret_lines(secret_at)
    words, parts, i = [shlex.quote(c) for c in command], [], 0
    while i < len(words):
        takes_value = words[i].startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("-")
        parts.append(" ".join(words[i:i + 2]) if takes_value else words[i])
        i += 2 if takes_value else 1
    return "\n".join(lines + ["exec " + " \\\n  ".join(parts)]) + "\n"


def submit_script(cmd: list[str], env: dict[str, str], secret_at: Path) -> str:
    """engine/spark-submit.sh: the run's engine, by hand (while a harness feeds these ports). The
    runtime reaches the program and the executors through --py-files, so no PYTHONPATH is set."""
    return by_hand_script(["# This run's engine program through spark-submit (specs/ENGINE_RUN.md, \"By hand\"). Run it",
                           "# while a harness feeds and collects on the ports below, e.g. `cepkit pairs --launch "
                           "external`."], {k: v for k, v in env.items() if k != "PYTHONPATH"}, cmd, secret_at)


def program_env(spec: EngineRunSpec) -> dict[str, str]:
    """What the program needs in its environment beyond the harness's own: the interpreter for
    Spark's Python workers, the runtime packages on the path, the spec's extra variables."""
    roots = [str(package_dir(name).parent) for name in spec.runtime_packages]
    path = os.pathsep.join(dict.fromkeys((*roots, *filter(None, [os.environ.get("PYTHONPATH")]))))
    # PYSPARK_PYTHON is what the driver tells every executor to run its Python workers with.
    return {"PYSPARK_PYTHON": spec.worker_python or spec.python, "PYSPARK_DRIVER_PYTHON": spec.python,
            "PYTHONUNBUFFERED": "1",
            **({"PYTHONPATH": path} if path else {}),
            # An authenticated cluster's secret reaches the driver as its defaults file (harness/cluster_auth.py).
            **({"SPARK_CONF_DIR": spec.cluster_credentials} if spec.cluster_credentials and spec.engine == "spark"
               else {}),
            # A Flink cluster's: the directory whose SSL settings and client certificate the program uses.
            **({CREDENTIALS_ENV: spec.cluster_credentials} if spec.cluster_credentials and spec.engine == "flink"
               else {}),
            **dict(spec.env)}
