"""Data flows one way between cepkit's packages; this test keeps it so.

    kit  <-  datagen, querygen, validator, translators  <-  harness  <-  cepkit_app
    kit (records, outputlog, errors, wire)  <-  runtime_common  <-  spark_runtime, flink_runtime
                                                                 <-  generated engine programs

kit is the floor and imports none of our packages. The engine runtimes and the programs that import
them run inside the engine (and on its executors, in the engine's own Python environment), so they
may use only runtime_common and kit's records, output-log names, errors and wire of ours, besides
the engine's own libraries (kit.engines `libraries`); runtime_common only what every engine has.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from kit.config import PLANS
from kit.engines import ENGINES
from kit.shipped import SUITE_NAMES, suite_path
from kit.workload import PairsStrategy, StrategySet, read_suite
from tests.helpers import REPO

OURS = {"kit", "datagen", "querygen", "translators", "harness", "validator", "runtime_common", "spark_runtime",
        "flink_runtime", "cepkit_app"}
ALLOWED = {
    "kit": {"kit"},
    "datagen": {"kit", "datagen"},
    "querygen": {"kit", "querygen"},
    "validator": {"kit", "validator"},
    "translators": {"kit", "translators"},
    "runtime_common": {"kit", "runtime_common"},
    "spark_runtime": {"kit", "runtime_common", "spark_runtime"},
    "flink_runtime": {"kit", "runtime_common", "flink_runtime"},
    "harness": {"kit", "translators", "harness"},
    "cepkit_app": OURS,
}
# What of kit an engine's runtime may import: the modules that ship to its workers.
RUNTIME_KIT = {"kit", "kit.errors", "kit.outputlog", "kit.records", "kit.tls", "kit.wire", "kit.wire.auth", "kit.wire.connection",
               "kit.wire.feed_client", "kit.wire.protocol", "kit.wire.sink_client"}
# Besides our own: the libraries every engine's environment has (runtime_common may use only these).
COMMON_LIBRARIES = set.intersection(*(set(e.libraries) for e in ENGINES.values()))


def _modules(path: Path) -> set[str]:
    """Every absolute import of a file, as dotted module names (`from a.b import c`: a.b)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def _imports(path: Path) -> set[str]:
    return {m.split(".")[0] for m in _modules(path)} & OURS


def violations(root: Path) -> list[str]:
    out = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            bad = _imports(path) - allowed
            if bad:
                out.append(f"{path.relative_to(root)} imports {sorted(bad)}")
    return out


def test_packages_import_only_downstream():
    assert set(ALLOWED) == {p.name for p in REPO.iterdir() if (p / "__init__.py").exists() and p.name != "tests"}
    assert not violations(REPO)


@pytest.mark.parametrize("back_arrow", ["kit/config/loading.py: import harness.sink",
                                        "runtime_common/pairs_bucket.py: import spark_runtime.app",
                                        "flink_runtime/app.py: from spark_runtime.source import driver_stream",
                                        "validator/compare.py: from translators.spark import translate_pairs",
                                        "spark_runtime/app.py: from harness.sink import SinkServer",
                                        "harness/sink.py: from cepkit_app.cli import main"])
def test_a_back_arrow_fails_the_check(tmp_path, back_arrow):
    """A copy of the tree with one import added against the flow is caught, naming the file."""
    file, line = back_arrow.split(": ")
    for package in ALLOWED:
        for src in (REPO / package).rglob("*.py"):
            dest = tmp_path / src.relative_to(REPO)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(src.read_text())
    target = tmp_path / file
    target.write_text(target.read_text() + f"\n{line}\n")
    found = violations(tmp_path)
    assert len(found) == 1 and found[0].startswith(file), found


def _third_party(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - OURS


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_engine_runtime_imports_only_what_ships_with_it(engine):
    libraries = set(ENGINES[engine].libraries)
    for package in set(ENGINES[engine].runtime_packages) - {"kit"}:
        allowed = COMMON_LIBRARIES if package == "runtime_common" else libraries
        for path in sorted((REPO / package).rglob("*.py")):
            modules = _modules(path)
            kit = {m for m in modules if m.split(".")[0] == "kit"}
            assert kit <= RUNTIME_KIT, (path, kit - RUNTIME_KIT)
            assert _third_party(modules) <= allowed, (path, _third_party(modules) - allowed)
    for module in RUNTIME_KIT - {"kit"}:         # and those kit modules import nothing else of ours
        path = REPO / (module.replace(".", "/") + ("/__init__.py" if module == "kit.wire" else ".py"))
        ours = {m for m in _modules(path) if m.split(".")[0] in OURS}
        assert ours <= RUNTIME_KIT, (path, ours - RUNTIME_KIT)
        assert _third_party(_modules(path)) <= COMMON_LIBRARIES, path


def _programs(engine: str, tmp_path: Path) -> list[Path]:
    """A Pairs program per plan and a micro program per quick suite's workloads, written to tmp_path."""
    from translators.registry import engine_module
    from translators.request import PairsTranslation
    from translators.request import MicroTranslation

    translator = engine_module(engine)
    strategies = StrategySet(1, 7, (PairsStrategy("st_00001", "u_00001", 1_000_000, "SYMA", "SYMB", 5, 5, 1.2, 0.1),))
    texts = [translator.translate_pairs(PairsTranslation(strategies, plan)) for plan in PLANS]
    for name in SUITE_NAMES:
        for w in read_suite(suite_path(name, quick=True)).workloads:
            texts.append(translator.translate_micro(MicroTranslation(w, table_path=tmp_path / "t.parquet")))
    paths = []
    for i, text in enumerate(texts):
        paths.append(tmp_path / f"program{i}.py")
        paths[-1].write_text(text)
    return paths


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_generated_programs_import_only_the_engine_runtime(engine, tmp_path):
    for path in _programs(engine, tmp_path):
        modules = _modules(path)
        ours = {m.split(".")[0] for m in modules} & OURS
        assert ours <= set(ENGINES[engine].runtime_packages) - {"kit"}, (path.read_text()[:200], ours)
        assert _third_party(modules) <= set(ENGINES[engine].libraries), _third_party(modules)
