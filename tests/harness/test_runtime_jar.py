"""cepkit's Spark runtime jar (harness/runtime_jar.py): compiled once from spark_runtime/java/ with
the feed source registered under its short name, put on the class path of engines on this machine
after the quiet file system's jar, never for engines elsewhere (tests/cepkit_app/
test_realtime_e2e.py runs it against the real harness)."""

from __future__ import annotations

import os
import shutil
import sys
import zipfile

import pytest

from harness import local_fs
from harness.runtime_jar import SERVICES, build_jar, jar_path, runtime_jar_settings, sources


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CEPKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_DIST_CLASSPATH", raising=False)
    return tmp_path / "cache"


def _fake(path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not read by this test")
    return str(path)


def test_without_the_jar_nothing_changes(cache):
    conf = (("spark.sql.shuffle.partitions", "2"),)
    assert runtime_jar_settings(conf, {}, "local[2]", sys.executable) == (conf, {}, None)


def test_it_follows_the_quiet_file_systems_jar_on_the_class_path(cache):
    fs = _fake(local_fs.jar_path(sys.executable))
    jar = _fake(jar_path(sys.executable))
    conf, env, _ = local_fs.local_fs_settings((("spark.executor.extraClassPath", "/x.jar"),), "local[2]",
                                              sys.executable)
    conf, env, used = runtime_jar_settings(conf, env, "local[2]", sys.executable)
    assert used == jar
    assert dict(conf)["spark.executor.extraClassPath"] == os.pathsep.join((jar, fs, "/x.jar"))
    assert env == {"SPARK_DIST_CLASSPATH": os.pathsep.join((fs, jar))}
    for master in ("spark://10.0.0.5:7077", "yarn"):
        # Executors on other hosts fetch it from the driver (spark.jars); the driver has it on its class path.
        conf, env, used = runtime_jar_settings((("spark.jars", "/a.jar"),), {}, master, sys.executable)
        assert used == jar
        assert dict(conf) == {"spark.jars": f"/a.jar,{jar}"}
        assert env == {"SPARK_DIST_CLASSPATH": jar}


def test_the_jar_is_named_by_its_sources(cache):
    assert {p.name for p in sources()} >= {"FeedSource.java", "FeedReaders.java", "SinkWriter.java"}
    assert jar_path(sys.executable).name.startswith("spark-runtime-")


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh installs")
def test_the_jar_compiles_with_the_source_registered():
    # The cache's jar (scripts/setup.sh built it; compiled here otherwise): compiling takes a while.
    jar = build_jar(sys.executable)
    assert jar == jar_path(sys.executable) and build_jar(sys.executable) == jar       # built once
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        assert {"cepkit/spark/FeedSource.class", "cepkit/spark/SinkWriter.class",
                "cepkit/spark/FeedReaders$RealTimeReader.class", "cepkit/spark/PairsRealTime.class"} <= names
        (service,) = SERVICES
        assert z.read(service) == b"cepkit.spark.FeedSource\n"
    assert not list(jar.parent.glob(f"{jar.stem}.*.tmp"))      # no staging file left behind
