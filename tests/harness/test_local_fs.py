"""The quiet local file system (harness/local_fs.py): compiled once into cepkit's cache, used only
for engine JVMs on this machine and never over the user's own file system; the compiled class
sets permissions like Hadoop's without a child process (tests/harness/test_engine_run.py checks a
real run uses it)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest

from harness.local_fs import CLASS_NAME, FS_KEY, build_jar, jar_path, local_fs_settings


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CEPKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_DIST_CLASSPATH", raising=False)
    return tmp_path / "cache"


def _fake_jar() -> str:
    path = jar_path(sys.executable)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not read by this test")
    return str(path)


def test_without_the_jar_nothing_changes(cache):
    conf = (("spark.sql.shuffle.partitions", "2"),)
    assert local_fs_settings(conf, "local[2]", sys.executable) == (conf, {}, None)


@pytest.mark.parametrize("master", ["local[2]", "local[*]", "spark://127.0.0.1:7077", "spark://localhost:7077"])
def test_engines_on_this_machine_get_it_appended_to_their_class_path(cache, master):
    jar = _fake_jar()
    conf, env, used = local_fs_settings((("spark.executor.extraClassPath", "/x.jar"),), master, sys.executable)
    conf = dict(conf)
    assert used == jar and conf[FS_KEY] == CLASS_NAME
    assert conf["spark.executor.extraClassPath"] == f"{jar}{os.pathsep}/x.jar"
    assert env == {"SPARK_DIST_CLASSPATH": jar}     # appended by Spark's launcher: the class archive still fits


def test_other_masters_and_a_users_own_file_system_are_left_alone(cache, monkeypatch):
    _fake_jar()
    for master in ("spark://10.0.0.5:7077", "yarn", "k8s://https://api:6443"):
        assert local_fs_settings((), master, sys.executable) == ((), {}, None)
    mine = ((FS_KEY, "org.example.MyFs"),)
    assert local_fs_settings(mine, "local[2]", sys.executable) == (mine, {}, None)
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", "/opt/hadoop/*")
    assert local_fs_settings((), "local[2]", sys.executable)[1]["SPARK_DIST_CLASSPATH"].startswith("/opt/hadoop/*")


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh installs")
def test_the_jar_compiles_and_sets_permissions_without_a_child_process(cache, tmp_path):
    jar = build_jar(sys.executable)
    assert jar == jar_path(sys.executable) and build_jar(sys.executable) == jar       # built once
    with zipfile.ZipFile(jar) as z:
        assert "cepkit/spark/QuietLocalFileSystem$Raw.class" in z.namelist()
    assert [p.name for p in cache.iterdir()] == [jar.name]      # no staging file left behind
    # Create a file through the class as Spark would, with a umask-like permission, in a JVM.
    target = tmp_path / "f.txt"
    probe = tmp_path / "Probe.java"
    probe.write_text(
        "import org.apache.hadoop.conf.Configuration; import org.apache.hadoop.fs.*;\n"
        "import org.apache.hadoop.fs.permission.FsPermission;\n"
        "public class Probe { public static void main(String[] a) throws Exception {\n"
        "  Configuration c = new Configuration(); c.set(\"fs.file.impl\", a[1]);\n"
        "  c.set(\"fs.file.impl.disable.cache\", \"true\");\n"
        "  FileSystem fs = FileSystem.get(new java.net.URI(\"file:///\"), c);\n"
        "  if (!fs.getClass().getName().equals(a[1])) throw new Error(fs.getClass().getName());\n"
        "  try (FSDataOutputStream out = fs.create(new Path(a[0]), true)) { out.writeBytes(\"x\"); }\n"
        "  fs.setPermission(new Path(a[0]), new FsPermission((short) 0640)); } }\n")
    import pyspark
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars", "*")
    cp = f"{jar}{os.pathsep}{jars}{os.pathsep}{tmp_path}"
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(tmp_path), str(probe)], check=True, timeout=120)
    java = shutil.which("java")
    # No `chmod` to be found: Hadoop's own class fails, the quiet one does not need it.
    env = {**os.environ, "PATH": str(tmp_path / "no-such-dir")}

    def create(path, cls):
        return subprocess.run([java, "-cp", cp, "Probe", str(path), cls], capture_output=True, text=True,
                              timeout=120, env=env)

    stock = create(tmp_path / "g.txt", "org.apache.hadoop.fs.LocalFileSystem")
    assert stock.returncode != 0 and "chmod" in stock.stderr
    proc = create(target, CLASS_NAME)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert target.read_text() == "x" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert (tmp_path / ".f.txt.crc").is_file()                  # still Hadoop's checksummed file system
