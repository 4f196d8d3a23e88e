"""A class-data-sharing (CDS) archive of Spark's JVM classes, so engine programs start faster.

On a 2-core machine an engine program spends most of its start-up loading and verifying Spark's
classes (the SparkSession alone took 10-11 s here). Java 17 can dump the classes one JVM loaded
into an archive (`-XX:ArchiveClassesAtExit`) and map it into later JVMs
(`-XX:SharedArchiveFile`), which roughly halves that. The archive changes nothing the query
computes; it is only a start-up cache.

The archive is built once per (Java, PySpark, interpreter) by `python -m harness.jvm_archive`
(scripts/setup.sh runs it) from a small priming job that touches what engine programs use: a
session, Arrow Python workers and a streaming aggregation with RocksDB state. A measured run never
builds it: `driver_java_options` only points at an archive that already exists, and the JVM
ignores an unusable one (`-Xshare:auto`). The path is recorded with the run's Spark settings.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"
# The JVM reports archive problems (a stale archive, signed jars it skips) on stdout, which the
# engine program's events share: keep those quiet; a missing archive only costs start-up time.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def cache_dir() -> Path:
    base = os.environ.get("CEPKIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cepkit")
    return Path(base)


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stderr.strip()


def pyspark_version(python: str) -> str:
    try:
        from importlib.metadata import version
        if Path(python).resolve() == Path(sys.executable).resolve():
            return version("pyspark")
        out = subprocess.run([python, "-c", "from importlib.metadata import version; print(version('pyspark'))"],
                             capture_output=True, text=True, timeout=60)
        return out.stdout.strip()
    except Exception:  # noqa: BLE001 - no PySpark: no archive
        return ""


def archive_path(python: str = sys.executable) -> Path | None:
    """Where the archive for this Java, PySpark and interpreter lives (None without Java/PySpark)."""
    java, pyspark = java_version(), pyspark_version(python)
    if not java or not pyspark:
        return None
    key = hashlib.sha256("\n".join((java, pyspark, str(Path(python).absolute()))).encode()).hexdigest()[:16]
    return cache_dir() / f"spark-{pyspark}-{key}.jsa"


def driver_java_options(spark_conf: tuple[tuple[str, str], ...], python: str = sys.executable
                        ) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """`spark_conf` with the archive added to the driver's Java options when one exists, and the
    archive's path (None when there is none). Options the user set are kept, after ours."""
    path = archive_path(python)
    if path is None or not path.is_file():
        return spark_conf, None
    return with_driver_java_options(spark_conf, f"-XX:SharedArchiveFile={path} -Xshare:auto {QUIET}"), str(path)


def with_driver_java_options(spark_conf: tuple[tuple[str, str], ...], ours: str) -> tuple[tuple[str, str], ...]:
    """`spark_conf` with `ours` before the driver's other Java options: the user's come after, so
    one of theirs wins."""
    conf = dict(spark_conf)
    conf[JAVA_OPTIONS_KEY] = f"{ours} {conf[JAVA_OPTIONS_KEY]}" if conf.get(JAVA_OPTIONS_KEY) else ours
    return tuple(conf.items())


PRIMING_JOB = r'''
import os, shutil, sys, tempfile, time
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").appName("cepkit-class-archive")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.streaming.stateStore.providerClass",
                 "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
         .config(sys.argv[1], sys.argv[2]).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.range(0, 100, 1, 2).mapInArrow(lambda it: it, "id long").toArrow()
seen = []
events = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
counts = events.withColumn("k", F.col("value") % 7).groupBy("k").agg(F.count("*").alias("n"), F.max("value"))
checkpoint = tempfile.mkdtemp(prefix="cepkit-cds-")
query = (counts.writeStream.outputMode("update").trigger(processingTime="200 milliseconds")
         .option("checkpointLocation", checkpoint)
         .foreachBatch(lambda df, i: seen.append(df.toArrow().num_rows)).start())
deadline = time.time() + 60
while len(seen) < 3 and time.time() < deadline:
    time.sleep(0.2)
query.stop()
spark.stop()
shutil.rmtree(checkpoint, ignore_errors=True)
'''


def build_archive(python: str = sys.executable, force: bool = False) -> Path | None:
    """Build the archive unless it exists; returns its path (None when Java or PySpark is missing).
    Written to a temporary name and renamed, so a concurrent or interrupted build leaves no
    half-written archive behind."""
    path = archive_path(python)
    if path is None:
        return None
    if path.is_file() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.remove(tmp)      # the JVM creates it at exit
    try:
        options = f"-XX:ArchiveClassesAtExit={tmp} {QUIET}"
        env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
        proc = subprocess.run([python, "-c", PRIMING_JOB, JAVA_OPTIONS_KEY, options], env=env,
                              capture_output=True, text=True, timeout=600)
        # The JVM writes the archive while it exits, after the Python process may have returned.
        deadline = time.monotonic() + 120
        last = -1
        while time.monotonic() < deadline:
            size = os.path.getsize(tmp) if os.path.exists(tmp) else -1
            if size > 0 and size == last and not _jvm_writing(tmp):
                break
            last = size
            time.sleep(1.0)
        if proc.returncode != 0 or not os.path.exists(tmp) or os.path.getsize(tmp) == 0:
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"the priming job did not leave an archive (exit {proc.returncode}): {tail[0]}")
        os.replace(tmp, path)
        return path
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _jvm_writing(path: str) -> bool:
    """True while some process still has `path` open (the exiting JVM dumping the archive)."""
    try:
        import psutil
    except ImportError:
        return False
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] != "java":
            continue
        try:
            if any(f.path == path for f in proc.open_files()):
                return True
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
    return False


def setup_step(build, argv: list[str] | None, what: str, without: str, detail=lambda path: "") -> int:
    """The setup script's entry for an optional cached JVM artifact (this archive, the quiet local
    file system jar): build it (`--force` rebuilds), say where it is, or warn what runs without it."""
    args = sys.argv[1:] if argv is None else argv
    started = time.monotonic()
    try:
        path = build(force="--force" in args)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"cepkit: warning: no {what} ({e}); {without}", file=sys.stderr)
        return 1
    if path is None:
        print(f"cepkit: warning: no Java or PySpark, so no {what}", file=sys.stderr)
        return 1
    print(f"{what}: {path} ({detail(path)}{time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    return setup_step(build_archive, argv, "JVM class archive", "engine programs start without one",
                      lambda path: f"{path.stat().st_size / 2**20:,.0f} MiB, ")


if __name__ == "__main__":
    raise SystemExit(main())
