"""cepkit's Flink runtime jar (harness/flink_jar.py): the JVM feed source and sink compiled against the
jars PyFlink ships, with the one Java wire library's imports of Jackson and Arrow relocated to
Flink's shaded copies (harness/javac.py); named by Java, Flink and the sources; handed to the Flink
program in its environment (and recorded) when built, left out when not. The connectors themselves:
tests/flink_runtime/test_jvm_connectors.py and tests/cepkit_app/test_flink_jvm_e2e.py."""

from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from harness import flink_jar
from harness.config import DriverConfig
from harness.javac import relocate
from harness.run_spec import EngineRunSpec
from harness.runners import runner

ARGS = ["--driver", "127.0.0.1:1", "--sink", "127.0.0.1:2", "--checkpoint", "/tmp/ck"]


def test_relocation_rewrites_imports_of_the_moved_packages_only():
    text = ("package cepkit.wire;\n\nimport com.fasterxml.jackson.databind.JsonNode;\n"
            "import static org.apache.arrow.vector.types.Types.MinorType.INT;\nimport org.apache.arrowhead.X;\n"
            "import java.util.Map;\n// com.fasterxml.jackson in a comment stays\n"
            "String s = \"import com.fasterxml.jackson.core.X;\";\n")
    out = relocate(text, flink_jar.RELOCATIONS)
    assert "import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;" in out
    assert "import static org.apache.flink.api.python.shaded.org.apache.arrow.vector.types.Types.MinorType.INT;" in out
    assert "import org.apache.arrowhead.X;" in out and "import java.util.Map;" in out
    assert "// com.fasterxml.jackson in a comment stays" in out and '"import com.fasterxml.jackson.core.X;"' in out


def test_the_jar_is_named_by_java_flink_and_the_sources(tmp_path, monkeypatch):
    names = {p.name for p in flink_jar.sources()}
    assert {"FeedSource.java", "FeedReader.java", "FeedSplit.java", "HarnessSink.java", "FrameClient.java",
            "FeedClient.java"} <= names
    monkeypatch.setenv("CEPKIT_CACHE_DIR", str(tmp_path))
    path = flink_jar.jar_path()
    if path is None:
        pytest.skip("no Java or no Flink environment")
    assert path.parent == tmp_path and path.name.startswith("flink-runtime-2.")


def _spec(tmp_path: Path, python: str) -> EngineRunSpec:
    program = tmp_path / "program.py"
    program.write_text("")
    return EngineRunSpec(program=program, run_dir=tmp_path / "run" / "engine", driver=DriverConfig(tmp_path),
                         engine="flink", python=python, master="local[2]")


def test_the_program_gets_the_jar_in_its_environment_only_when_built(tmp_path, monkeypatch):
    monkeypatch.setenv("CEPKIT_CACHE_DIR", str(tmp_path / "cache"))
    spec = _spec(tmp_path, flink_jar.flink_python() or sys.executable)
    launch = runner("flink").launch(spec, ARGS, {})
    assert flink_jar.JAR_ENV not in launch.env and "runtime_jar" not in launch.applied
    jar = flink_jar.jar_path(spec.python)
    if jar is None:
        pytest.skip("no Java or no Flink environment")
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"not read by this test")
    launch = runner("flink").launch(spec, ARGS, {})
    assert launch.env[flink_jar.JAR_ENV] == str(jar) == launch.applied["runtime_jar"]
    assert f"{flink_jar.JAR_ENV}={jar}" in launch.script       # the by-hand script names it too


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac (a JDK), as scripts/setup.sh installs")
def test_the_jar_compiles_against_flinks_shaded_jackson_and_arrow():
    # The cache's jar (scripts/setup.sh built it; compiled here otherwise).
    if flink_jar.flink_python() is None:
        pytest.skip("no Flink environment")
    jar = flink_jar.build_jar()
    assert jar == flink_jar.jar_path() and flink_jar.build_jar() == jar        # built once
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        assert {"cepkit/flink/FeedSource.class", "cepkit/flink/FeedReader.class", "cepkit/flink/HarnessSink.class",
                "cepkit/flink/HarnessSink$Writer.class", "cepkit/wire/FrameClient.class"} <= names
        client = z.read("cepkit/wire/FrameClient.class")
        sink = z.read("cepkit/flink/HarnessSink$Writer.class")
    assert b"org/apache/flink/shaded/jackson2/com/fasterxml/jackson" in client and b"Lcom/fasterxml" not in client
    assert b"org/apache/flink/api/python/shaded/org/apache/arrow" in sink and b"Lorg/apache/arrow" not in sink
