"""Supervision without an engine: deaths explained, the engine JVM watched, the checkpoint a
restarted Flink program restores (harness/supervision.py, harness/flink_restore.py, the runners)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

import psutil
import pytest

from harness.flink_restore import local_dir, newest_checkpoint
from harness.runners import runner
from harness.supervision import JvmWatch, death_cause, exit_text
from kit.engines import ENGINE_NAMES


def test_exit_texts_and_causes():
    assert exit_text(1) == "exit code 1" and exit_text(-9) == "killed by SIGKILL" and exit_text(None) == "still running"
    cause = death_cause(1, {"failed": {"message": "Py4JNetworkError: Answer from Java side is empty"}},
                        (4242, "java"), "ignored")
    assert cause == ("its engine JVM (java, pid 4242) vanished; the program ended (exit code 1); it reported: "
                     "Py4JNetworkError: Answer from Java side is empty")
    assert death_cause(0, {"stopped": {}}, None, "") == \
        "the program ended (exit code 0); it was stopped by a signal from outside the harness"
    assert death_cause(-9, {}, None, "java.lang.OutOfMemoryError: Java heap space") == \
        "the program ended (killed by SIGKILL); its log ends: java.lang.OutOfMemoryError: Java heap space"


def test_a_jvm_that_ran_out_of_memory_is_named_not_the_connection_its_death_refused(tmp_path):
    """Seen on Q7 at 800 K ev/s: the driver JVM's heap ran out, and the program's last word was
    py4j's "Connection refused"; the cause names the JVM's error, of the current attempt only."""
    from harness.engine_process import RESTART_MARK, fatal_jvm_error

    log = tmp_path / "engine.log"
    log.write_text("26/11/29 INFO starting\n"
                   'Exception in thread "Thread-3" java.lang.OutOfMemoryError: Java heap space\n'
                   "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n"
                   "ConnectionRefusedError: [Errno 111] Connection refused\n")
    assert fatal_jvm_error(log) == "java.lang.OutOfMemoryError: Java heap space"
    cause = death_cause(1, {"failed": {"message": "[Errno 111] Connection refused"}}, (7, "java"), "x",
                        fatal_jvm_error(log))
    assert cause.startswith("the engine JVM failed: java.lang.OutOfMemoryError: Java heap space; its engine JVM")
    # A restarted attempt's log starts after the mark: the first attempt's error is not its own.
    with open(log, "a") as f:
        f.write(f"\n{RESTART_MARK} (attempt 2) ====\nConnectionRefusedError: [Errno 111] Connection refused\n")
    assert fatal_jvm_error(log) is None and fatal_jvm_error(tmp_path / "missing.log") is None


def test_the_jvm_watch_sees_a_vanished_jvm():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        watch = JvmWatch()
        assert watch.gone() is None
        watch.see(psutil.Process(proc.pid))
        assert watch.gone() is None and watch.pid == proc.pid
        proc.kill()
        proc.wait()
        assert watch.gone() == (proc.pid, watch.name)
    finally:
        proc.kill()


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_every_runner_names_its_engine_jvm_and_its_restart(engine, tmp_path):
    r = runner(engine)
    assert r.ENGINE_JVM.startswith("org.apache.") and isinstance(r.replays_outputs(_spec(tmp_path, engine)), bool)
    args, restored = r.restart_args(str(tmp_path / "checkpoint"), 2, None)
    assert isinstance(args, list) and (restored is None or isinstance(restored, str))
    # Nothing to clean up after a program on a local master (its engine died with it).
    assert r.prepare_restart(_spec(tmp_path, engine), {"query_id": "x", "rest_url": "http://127.0.0.1:1"}) is None


def test_spark_filters_replays_where_the_jvm_writer_sends(tmp_path):
    """A re-run micro-batch collected to the driver keeps its batch id; answers the JVM writer sends
    (real-time mode, micro-batches with the JVM connectors) come again in other emits after a
    re-run, so the sink must drop them by content."""
    spark = runner("spark")
    spec = _spec(tmp_path, "spark")
    assert spark.replays_outputs(spec)                   # the default connectors: the JVM writer
    python = dataclasses.replace(spec, connectors="python")
    assert not spark.replays_outputs(python)
    assert spark.replays_outputs(dataclasses.replace(python, trigger="realtime"))
    assert spark.restart_args(str(tmp_path), 3, None) == (["--attempt", "3"], "the query's checkpoint")


def test_a_real_time_batch_ends_at_its_start_plus_its_trigger_execution():
    from spark_runtime.watch import _ended_ms

    start_ms = 1_795_881_600_123                    # 2026-11-28T16:00:00.123Z
    assert _ended_ms({"timestamp": "2026-11-28T16:00:00.123Z", "durationMs": {"triggerExecution": 5004}}) \
        == start_ms + 5004
    assert _ended_ms({"timestamp": "2026-11-28T16:00:00.123Z", "durationMs": {}}) is None
    assert _ended_ms({}) is None


def _spec(tmp_path, engine):
    from harness.config import DriverConfig
    from harness.run_spec import EngineRunSpec

    program = tmp_path / "program.py"
    program.write_text("")
    return EngineRunSpec(program=program, run_dir=tmp_path / "run", driver=DriverConfig(tmp_path), engine=engine,
                         master="local[2]")


def _checkpoint(root, job, n, complete=True):
    chk = root / job / f"chk-{n}"
    chk.mkdir(parents=True)
    if complete:
        (chk / "_metadata").write_bytes(b"x")
        time.sleep(0.01)
    return chk


def test_a_restarted_flink_program_restores_the_newest_complete_checkpoint(tmp_path):
    root = tmp_path / "checkpoint"
    assert newest_checkpoint(root, None) == (None, None)
    assert runner("flink").restart_args(str(root), 2, None) == (["--attempt", "2"], None)
    _checkpoint(root, "job1", 3)
    newest = _checkpoint(root, "job1", 4)
    _checkpoint(root, "job1", 5, complete=False)             # triggered, never completed
    (root / "job1" / "shared").mkdir()
    assert newest_checkpoint(root, None) == (newest, None)
    heard = {"path": str(_checkpoint(root, "job2", 1)), "trigger_ts_ms": 123}
    assert newest_checkpoint(root, heard) == (root / "job2" / "chk-1", 123)
    # A heard-of checkpoint that is gone: the newest on disk.
    assert newest_checkpoint(root, {"path": str(tmp_path / "gone"), "trigger_ts_ms": 1})[0] == root / "job2" / "chk-1"
    args, restored = runner("flink").restart_args("file://" + str(root), 3, heard)
    assert args == ["--attempt", "3", "--restore", heard["path"]] and restored == heard["path"]
    assert local_dir("file:///a/b") == local_dir("/a/b")
