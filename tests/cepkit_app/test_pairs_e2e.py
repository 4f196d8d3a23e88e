"""Pairs end to end on a real engine: quick SF=1 data replayed into the generated program at 4x real
time (the tests' short profile, tests/data/configs/short-pairs.toml: ~30 s of load, every output of
the two-minute quick run), every output checked by the validator. Parametrized over the translator
registry, so a new engine is tested by these tests without new test code. The default plan (keyed,
its work in the JVM) on Spark is the default test run's Pairs smoke; the other Spark runs are `e2e`,
Flink's `flink`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from kit.workload import StrategySet, load_aux, read_strategies, write_spec
from querygen.output import write_strategies
from tests.helpers import SHORT_PAIRS, check_secret_kept, cepkit_command, engine_params, java_below, started


def _cepkit(*args, cwd, secret: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*cepkit_command(secret), *args], capture_output=True, text=True, cwd=cwd, timeout=900)


def _three_strategies(quick_pairs, tmp_path):
    """The three strategies with the shortest count windows (so they trade in two minutes)."""
    full = tmp_path / "all.xml"
    write_strategies(load_aux(quick_pairs / "pairs-aux.json"), 42, full)
    spec = read_strategies(full)
    short = sorted(spec.strategies, key=lambda s: (s.period_length * s.num_periods, s.alias))[:3]
    small = tmp_path / "small.xml"
    write_spec(StrategySet(spec.scale_factor, spec.seed, tuple(short)), small)
    return small


def _check_passed(run_dir, proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["verdict"] == "PASSED"
    streams = {s["stream"]: s for s in summary["streams"]}
    for name in ("Indicator", "MarketOrder"):
        assert streams[name]["missing"] == 0 and streams[name]["undue"] == 0 and streams[name]["wrong"] == 0
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["status"] == "completed"
    return streams


@pytest.mark.parametrize("engine", engine_params(default_run="smoke"))
def test_quick_sf1_keyed_plan_passes_and_spreads_a_batch_over_keys_and_tasks(engine, tmp_path):
    """The default plan (keyed, run.work = "engine": its work in the JVM): PASSED on every engine,
    its program running in the engine's own environment, no tick or answer through Python; and the
    strategy work is spread: on Spark, its own records show each micro-batch's work in the JVM
    transformWithState over several state keys and tasks (the state store holds a clock, a books
    and symbol records per key for more than one key, and every stateful stage ran tasks that each
    read shuffled rows); on Flink, outputs came from more than one bucket key (the sink's batch ids
    say which)."""
    run_dir, events = tmp_path / "run", tmp_path / "events"
    events.mkdir()
    conf = ["spark.eventLog.enabled=true", f"spark.eventLog.dir={events}", "spark.eventLog.compress=false"]
    secret = "5ec2e7" * 5 + "ab"
    proc = _cepkit("pairs", "-c", str(SHORT_PAIRS), "--engine", engine, "--set",
                   f"run.spark_conf={json.dumps(conf)}", "--out", str(run_dir), cwd=tmp_path, secret=secret)
    streams = _check_passed(run_dir, proc)
    check_secret_kept(run_dir / "engine", secret, run_dir, events)     # Spark's event log too: plans, options
    assert secret not in proc.stdout + proc.stderr
    assert streams["Indicator"]["expected"] > 50 and streams["MarketOrder"]["expected"] > 0
    assert "pscore:" in proc.stderr and "report:" in proc.stderr
    assert 'PLAN = "keyed"' in (run_dir / "program.py").read_text()
    for name in ("resources.csv", "backlog.csv"):      # sampled about once a second through the ~30 s run
        assert len((run_dir / "engine" / "metrics" / name).read_text().splitlines()) > 20
    started = json.loads((run_dir / "engine" / "run.json").read_text())["engine"]["started"]
    versions = json.loads((run_dir / "engine" / "versions.json").read_text())
    # The default (JVM) plan: every tick through the engine's operators, none through Python.
    assert started["work"]["family"] == "engine" and started["work"]["queries"]["pairs"].startswith("JVM plan")
    assert started["connectors"] == {"source": "jvm", "sink": "jvm", "why": None}
    if engine == "flink":
        assert started["engine"] == "flink" and started["parallelism"] >= 2
        assert versions["python_executable"].endswith(".venv-flink/bin/python") and versions["apache-flink"]
        assert (run_dir / "engine" / "flink-run.sh").is_file()
        import pyarrow.parquet as pq

        (log,) = (run_dir / "engine" / "logs").glob("flink-*.log")
        tasks = set(re.findall(r"Task +\[\] - (.+?) \(\d+/\d+\)#\d+ \([^)]*\) switched from INITIALIZING to RUNNING",
                               log.read_text()))
        assert tasks == {"Source: cepkit feed (JVM) -> cepkit pairs partials (JVM)",
                         "cepkit pairs buckets (JVM) -> cepkit sink (JVM): Indicator, MarketOrder: Writer"}, tasks
        ids = pq.read_table(run_dir / "engine" / "outputs" / "Indicator-00001.parquet").column("batchId").to_pylist()
        assert len({i % 2 for i in ids}) == 2      # batch id = flush * 2 + subtask: both bucket subtasks answered
        return
    # Where the start-up went, each part timed (the program's `started` event, specs/ENGINE_RUN.md).
    assert set(started["startup_ms"]) == {"session", "build", "warm_up", "query_start"}
    assert all(ms > 0 for ms in started["startup_ms"].values())
    stdout = (run_dir / "engine" / "logs" / "engine.stdout.jsonl").read_text().splitlines()
    batches = [b for b in map(json.loads, stdout) if b.get("event") == "batch" and (b.get("events") or 0) > 0]
    # How many batches ~30 s of load makes depends on the machine's speed (0.5 s batches gave > 50,
    # 0.8-1 s batches on a slower 2-core machine 39-43): enough to see the spread, not a speed figure.
    assert len(batches) > 20
    state = batches[-1]["state"]
    assert [op["operatorName"] for op in state] == ["transformWithStateExec"]      # the JVM processor
    assert state[0]["numRowsTotal"] >= 2 * 3        # clock, books and >= 1 symbol record for each of >= 2 keys
    # Every stage that read shuffled rows (the stateful operator's) ran >= 2 tasks, each with rows.
    tasks: dict[int, list[int]] = {}
    logs = [f for f in events.rglob("*") if f.is_file() and f.name.startswith("events_")]   # rolled parts
    assert logs
    for line in "\n".join(f.read_text() for f in sorted(logs)).splitlines():
        e = json.loads(line)
        if e.get("Event") == "SparkListenerTaskEnd" and e.get("Task Metrics"):
            read = e["Task Metrics"]["Shuffle Read Metrics"]["Total Records Read"]
            tasks.setdefault(e["Stage ID"], []).append(read)
    stateful = [reads for reads in tasks.values() if sum(reads) > 0]
    assert len(stateful) > 20           # a stateful stage per batch (see above)
    assert all(len(reads) >= 2 and min(reads) > 0 for reads in stateful)


@pytest.mark.parametrize("engine", engine_params("spark"))
def test_per_strategy_plan_passes_validation_on_a_smaller_set(engine, tmp_path, quick_pairs):
    """The three strategies with the shortest count windows (so they trade in two minutes of tick
    time), one pipeline each."""
    small = _three_strategies(quick_pairs, tmp_path)
    run_dir = tmp_path / "run"
    proc = _cepkit("pairs", "-c", str(SHORT_PAIRS), "--set", f"run.engine={engine!r}", "--plan", "per-strategy",
                   "--data", str(quick_pairs), "--strategies", str(small), "--out", str(run_dir), cwd=tmp_path)
    streams = _check_passed(run_dir, proc)
    assert streams["Indicator"]["expected"] > 10
    program = (run_dir / "program.py").read_text()
    assert 'PLAN = "per-strategy"' in program and program.count('"st_') >= 3


@pytest.mark.parametrize("engine", engine_params())
def test_a_killed_engine_is_restarted_from_its_checkpoint_and_loses_no_answer(engine, tmp_path):
    """Two deaths in one short run, each restarted from the checkpoint: the harness's fault
    (SIGKILL of the engine's JVM 12 s into the replay) and then, once the second attempt has
    started, a SIGKILL from outside the harness (the JVM found by process tree, as an
    operator or the OOM killer would pick it; harness/supervision.py). Each time the feed serves
    again from the committed offset and the sink drops what it already holds (Spark's re-run
    batches by id, a restored Flink job's replayed answers by content): every answer comes once,
    and both recoveries are measured."""
    run_dir = tmp_path / "run"
    # A relative --out, as the default runs/... is: the program runs in its run directory.
    proc = subprocess.Popen([*cepkit_command(), "pairs", "-c", str(SHORT_PAIRS), "--set", f"run.engine={engine!r}",
                             "--fault", "kill-engine@12s", "--out", "run"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # Right after the second start: its restart took about as long as the ~30 s replay, so
        # the restored program has only the backlog left, which it clears in a few seconds.
        started(run_dir, times=2)
        time.sleep(1)
        victim = java_below(proc.pid)
        victim.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=900)
    finally:
        proc.kill()
    _check_passed(run_dir, subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    (fault,) = run["faults"]
    assert fault["kind"] == "kill-engine" and fault["at_ms"] and fault["restarted_ms"] > fault["at_ms"]
    assert run["engine_attempts"] == 3
    injected, outside = run["restarts"]
    assert injected["fault"] == "kill-engine@12s" and injected["outcome"] == "restarted"
    assert outside["fault"] is None and outside["outcome"] == "restarted"
    assert f"pid {victim.pid}) vanished" in outside["cause"]
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    recoveries = {r["kind"]: r for r in summary["faults"]}      # the outside death measured like a fault
    assert set(recoveries) == {"kill-engine", "engine-died"}
    assert 0 < recoveries["kill-engine"]["recovery_ms"] < 120_000 and recoveries["kill-engine"]["peak_latency_ms"] > 0
    # The second attempt may have put out every answer left before it died (Flink clears the
    # backlog in about a second): then no output came after the second death, and none is late.
    died = recoveries["engine-died"]
    assert died["recovery_ms"] is None or 0 < died["recovery_ms"] < 120_000
    assert died["at_ms"] == outside["died_ms"]
    assert "fault kill-engine@12s: recovery" in err
    assert "engine program attempt 2 died" in err and "fault engine-died@" in err
    assert (run_dir / "runtime.zip").is_file()
    if engine == "spark":
        assert (run_dir / "engine" / "spark-submit.sh").is_file()
        assert (run_dir / "engine" / "checkpoint" / "offsets").is_dir()
    else:       # restored from a completed checkpoint the program reported
        assert all("/chk-" in r["restored_from"] for r in run["restarts"])
        assert (run_dir / "engine" / "flink-run.sh").is_file()
    # The JVM plan's state (Spark's state store; Flink's partials operator state and buckets' keyed
    # state) came back each time.
    assert run["plan"]["work"]["queries"]["pairs"].startswith("JVM plan")


@pytest.mark.spark
@pytest.mark.e2e
def test_the_python_plan_on_spark_passes(tmp_path):
    """run.work = "python": Spark's opt-in Pairs plan (the Python source's partition transform makes
    the partial rows, transformWithStateInPandas runs the buckets) still PASSES, and the run says
    which plan ran."""
    run_dir = tmp_path / "run"
    proc = _cepkit("pairs", "-c", str(SHORT_PAIRS), "--engine", "spark", "--set", "run.work='python'",
                   "--out", str(run_dir), cwd=tmp_path)
    _check_passed(run_dir, proc)
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["plan"]["work"]["family"] == "python"
    assert run["plan"]["work"]["queries"]["pairs"].startswith("Python plan")
    assert run["plan"]["connectors"]["source"] == "python"
    assert 'WORK = "python"' in (run_dir / "program.py").read_text()


@pytest.mark.flink
@pytest.mark.slow
def test_the_python_plan_on_flink_passes(tmp_path):
    """run.work = "python": Flink's opt-in Pairs plan (the kit's Python puller makes the partial rows,
    PyFlink keyed functions run the buckets) still PASSES, and the run says which plan ran."""
    run_dir = tmp_path / "run"
    proc = _cepkit("pairs", "-c", str(SHORT_PAIRS), "--engine", "flink", "--set", "run.work='python'",
                   "--out", str(run_dir), cwd=tmp_path)
    _check_passed(run_dir, proc)
    run = json.loads((run_dir / "engine" / "run.json").read_text())
    assert run["plan"]["work"]["family"] == "python"
    assert run["plan"]["work"]["queries"]["pairs"].startswith("Python plan")
    assert run["plan"]["connectors"]["source"] == "python"
    assert 'WORK = "python"' in (run_dir / "program.py").read_text()


@pytest.mark.flink
def test_both_engines_answer_the_same_inputs_side_by_side(tmp_path, quick_pairs):
    """`cepkit pairs --engine spark,flink`: each engine runs the same dataset and strategies (three),
    each PASSED, and one report puts them side by side."""
    small = _three_strategies(quick_pairs, tmp_path)
    parent = tmp_path / "both"
    proc = _cepkit("pairs", "-c", str(SHORT_PAIRS), "--engine", "spark,flink",
                   "--data", str(quick_pairs), "--strategies", str(small), "--out", str(parent), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for engine in ("spark", "flink"):
        _check_passed(parent / engine, proc)
        assert f'engine = "{engine}"' in (parent / engine / "config.toml").read_text()
    assert (parent / "spark" / "strategies.xml").read_text() == (parent / "flink" / "strategies.xml").read_text()
    page = (parent / "compare" / "compare.html").read_text()
    assert "spark" in page and "flink" in page and "side by side:" in proc.stderr
    compared = json.loads((parent / "compare" / "compare.json").read_text())
    assert compared["kind"] == "cepkit.compare"
