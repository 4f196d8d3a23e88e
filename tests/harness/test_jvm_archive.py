"""The JVM class archive only ever adds to the driver's Java options, and only when it exists
(harness/jvm_archive.py; tests/harness/test_engine_run.py checks a real run maps it)."""

from __future__ import annotations

import sys

import pytest

from harness.jvm_archive import JAVA_OPTIONS_KEY, archive_path, driver_java_options


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CEPKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_archive_is_keyed_by_java_pyspark_and_interpreter(cache):
    path = archive_path(sys.executable)
    assert path is not None and path.parent == cache
    assert path.name.startswith("spark-4.3.0-") and path.suffix == ".jsa"
    assert archive_path(sys.executable) == path
    # An interpreter without PySpark (here: none at all) gets no archive.
    assert archive_path(str(cache / "elsewhere" / "python")) is None


def test_without_an_archive_the_settings_are_untouched(cache):
    conf = (("spark.sql.shuffle.partitions", "2"),)
    assert driver_java_options(conf, sys.executable) == (conf, None)


def test_an_existing_archive_is_mapped_and_the_users_java_options_are_kept(cache):
    path = archive_path(sys.executable)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not read by this test")
    conf, used = driver_java_options((), sys.executable)
    assert used == str(path)
    assert dict(conf)[JAVA_OPTIONS_KEY].startswith(f"-XX:SharedArchiveFile={path} -Xshare:auto")
    user = ((JAVA_OPTIONS_KEY, "-Dcepkit.test=1"), ("spark.sql.shuffle.partitions", "4"))
    conf, _ = driver_java_options(user, sys.executable)
    options = dict(conf)[JAVA_OPTIONS_KEY]
    assert options.startswith("-XX:SharedArchiveFile=") and options.endswith(" -Dcepkit.test=1")
    assert dict(conf)["spark.sql.shuffle.partitions"] == "4"
