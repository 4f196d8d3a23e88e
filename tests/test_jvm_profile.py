"""benchmarks/jvm_profile.py without a JVM to record: the thread kinds, the self and inclusive
tables over samples, a recording's JSON read into samples (jfr's own JSON layout), and the
one-line errors."""

from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest

from tests.helpers import REPO


@pytest.fixture(scope="module")
def jp():
    spec = importlib.util.spec_from_file_location("jvm_profile", REPO / "benchmarks" / "jvm_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_thread_names_fold_into_kinds(jp):
    assert jp.thread_kind("Executor task launch worker for task 3.0 in stage 7.0 (TID 12)") == \
        jp.thread_kind("Executor task launch worker for task 0.0 in stage 1.0 (TID 4)")
    assert jp.thread_kind("stream execution thread for q [id = 5b1-x, runId = 9]") == "stream execution thread for q"


def test_self_and_inclusive_counts(jp):
    rows = [("task 1", ["a.B.put", "cepkit.spark.PairsBucket.flush", "cepkit.spark.X.hasNext"]),
            ("task 2", ["cepkit.spark.PairsBucket.process", "cepkit.spark.X.hasNext"]),
            ("task 3", ["a.B.put", "org.other.run"]),
            ("idle", [])]
    s = jp.summarize(rows, ("cepkit.",), top=10)
    assert s["samples"] == 4
    assert dict(s["self"]) == {"a.B.put": 2, "cepkit.spark.PairsBucket.process": 1}
    assert dict(s["inclusive"]) == {"cepkit.spark.X.hasNext": 2, "cepkit.spark.PairsBucket.flush": 1,
                                    "cepkit.spark.PairsBucket.process": 1}
    assert dict(s["threads"]) == {"task N": 3, "idle": 1}


def test_a_recording_is_read_from_jfr_json(jp, monkeypatch, tmp_path):
    """`jfr print --json` nests each frame's class under method.type.name."""
    recording = {"recording": {"events": [
        {"type": "jdk.ExecutionSample", "values": {
            "sampledThread": {"javaName": "Executor task launch worker for task 0.0"},
            "stackTrace": {"truncated": False, "frames": [
                {"method": {"type": {"name": "cepkit.spark.PairsBucket"}, "name": "flush"}, "lineNumber": 3},
                {"method": {"type": {"name": "java.lang.Thread"}, "name": "run"}, "lineNumber": 1}]}}},
        {"type": "jdk.ExecutionSample", "values": {"sampledThread": None, "stackTrace": None}}]}}

    def fake_run(cmd, **kwargs):
        assert cmd[:4] == ["jfr", "print", "--json", "--events"]
        return subprocess.CompletedProcess(cmd, 0, json.dumps(recording), "")

    monkeypatch.setattr(jp.subprocess, "run", fake_run)
    assert jp.samples(tmp_path / "x.jfr") == [
        ("Executor task launch worker for task 0.0", ["cepkit.spark.PairsBucket.flush", "java.lang.Thread.run"]),
        ("?", [])]


def test_bad_arguments_are_one_line_errors(jp, tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    assert jp.main(["--out", str(tmp_path / "taken")]) == 2
    assert jp.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("jvm_profile: error: ") and "exists" in err[0]
    assert "--out DIR is needed" in err[1]
