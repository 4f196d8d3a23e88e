"""Translators: every registered engine turns a strategies spec into a tidy, importable program
(the Pairs logic it runs is tested in tests/spark_runtime/test_pairs_*.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from kit.errors import CepkitError
from kit.workload import PairsStrategy, StrategySet, load_aux
from querygen.strategies import strategies_for
from runtime_common.pairs_partials import Layout
from translators.output import write_program
from kit.config import PLANS
from kit.engines import ENGINES
from tests.helpers import program_literals
from translators.registry import engine_module
from translators.request import PairsTranslation


def _import(path, name="generated_program"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def spec(quick_pairs) -> StrategySet:
    """The querygen strategies plus dense ones (P=5 s, N=5) so that a 2-minute run trades a lot."""
    aux = load_aux(quick_pairs / "pairs-aux.json")
    base = strategies_for(aux, 7)
    dense = tuple(PairsStrategy(alias=f"st_{900 + i:05d}", user=f"u_{900 + i // 5:05d}", available_funds=1_000_000,
                                symbol1=c.symbol1, symbol2=c.symbol2, period_length=5, num_periods=5,
                                bands_multiplier=1.2, stop_loss_perc=0.1)
                  for i, c in enumerate(aux.correlations[:20]))
    return StrategySet(1, 7, base.strategies + dense)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("plan", PLANS)
def test_program_is_tidy_importable_python(engine, plan, spec, tmp_path):
    text = engine_module(engine).translate_pairs(PairsTranslation(spec, plan, "s.xml", "ab" * 32))
    path = write_program(text, tmp_path / "prog.py")
    assert all(len(line) <= 120 and line == line.rstrip() for line in text.splitlines())
    assert f"{plan} plan" in text.splitlines()[0] and "s.xml" in text
    literals = program_literals(path)
    assert literals["PLAN"] == plan and "\nbuild = PROGRAM.build\n" in text
    assert [s[0] for s in literals["STRATEGIES"]] == [s.alias for s in spec.strategies]
    with pytest.raises(CepkitError, match="refusing to overwrite"):
        write_program(text, path)
    assert path.read_text() == text


def test_plan_must_be_known(spec):
    with pytest.raises(CepkitError, match="plan: must be one of"):
        PairsTranslation(spec, "clever")


@pytest.mark.parametrize("buckets", [0, 3])
def test_the_program_holds_the_plan_and_its_state_keys(spec, buckets, tmp_path):
    """The keyed program carries its number of state keys; the layout it builds from its own table
    spreads the strategies over that many buckets (whole pairs each)."""
    text = engine_module("spark").translate_pairs(PairsTranslation(spec, "keyed", buckets=buckets))
    program = _import(write_program(text, tmp_path / "prog.py"))
    assert program.BUCKETS == buckets and program.PROGRAM.plan == "keyed"
    layout = Layout(program.STRATEGIES, buckets or 2)
    assert len(layout.buckets) == (buckets or 2)
    assert sorted(s.alias for b in layout.buckets for s in b.strategies) == sorted(s[0] for s in program.STRATEGIES)
    with pytest.raises(CepkitError, match="buckets"):
        PairsTranslation(spec, "keyed", buckets=-1)


def test_cli_translate_writes_a_program_and_never_overwrites(spec, tmp_path):
    from kit.workload import write_spec

    xml = tmp_path / "st.xml"
    write_spec(spec, xml)
    out = tmp_path / "impl" / "p.py"
    cmd = [sys.executable, "-m", "cepkit_app.cli", "translate", "pairs", "--strategies", str(xml), "--plan",
           "per-strategy", "--out", str(out)]
    first = subprocess.run(cmd, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(out) and 'PLAN = "per-strategy"' in out.read_text()
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 2 and again.stderr.strip().endswith("refusing to overwrite it")
    assert "Traceback" not in again.stderr
    bad = subprocess.run(cmd[:5] + ["--strategies", str(tmp_path / "missing.xml")], capture_output=True, text=True)
    assert bad.returncode == 2 and "missing.xml" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("work, plan", [("engine", "JVM"), ("operators", "JVM"), ("jvm", "JVM"), ("python", "Python")])
def test_the_flink_program_runs_the_plan_of_its_plan_family(spec, work, plan):
    """Flink's Pairs program runs the JVM plan (cepkit.flink.PairsFlink) for every plan family but
    "python", and says which in its doc, its WORK literal and its job's name."""
    text = engine_module("flink").translate_pairs(PairsTranslation(spec, "keyed", work=work))
    assert f'WORK = "{work}"' in text and "PairsProgram(STRATEGIES, PLAN, BUCKETS, WORK)" in text
    assert f'Work "{work}" (run.work), the {plan} plan' in text and f"keyed, {plan} plan," in text
    assert ("cepkit.flink.PairsFlink" in text) == (plan == "JVM")
    with pytest.raises(CepkitError, match="run.work = 'driver'"):
        engine_module("flink").translate_pairs(PairsTranslation(spec, "keyed", work="driver"))
    with pytest.raises(CepkitError, match="work: must be one of"):
        PairsTranslation(spec, "keyed", work="gpu")


@pytest.mark.parametrize("work, plan", [("engine", "JVM"), ("operators", "JVM"), ("jvm", "JVM"), ("python", "Python")])
def test_the_spark_program_runs_the_plan_of_its_plan_family(spec, work, plan, tmp_path):
    """Spark's Pairs program runs the JVM plan (cepkit.spark.PairsRealTime: partial rows in the JVM
    source's tasks, a JVM transformWithState) for every plan family but "python", which runs the
    Python plan (its partial rows in the Python source's partition transform); "driver" has no Pairs
    plan and is refused in one line, and so is the Python plan in real-time mode."""
    text = engine_module("spark").translate_pairs(PairsTranslation(spec, "keyed", work=work))
    assert f'WORK = "{work}"' in text and "PairsProgram(STRATEGIES, PLAN, BUCKETS, WORK)" in text
    assert f'Work "{work}" (run.work), the {plan} plan' in text and f"keyed, {plan} plan," in text
    assert ("cepkit.spark.PairsRealTime" in text) == (plan == "JVM")
    program = _import(write_program(text, tmp_path / "prog.py"))
    assert program.PROGRAM.jvm == (plan == "JVM") and program.PROGRAM.work == {"family": work, "queries": {}}
    # The JVM plan reads the JVM source; the Python one reduces each offset range in the Python source.
    assert (program.PROGRAM.source_transform is None) == (plan == "JVM")
    with pytest.raises(CepkitError, match="run.work = 'driver': Spark's Pairs program has no driver plan"):
        engine_module("spark").translate_pairs(PairsTranslation(spec, "keyed", work="driver"))
    with pytest.raises(CepkitError, match="the Python Pairs plan has no real-time form"):
        engine_module("spark").translate_pairs(PairsTranslation(spec, "keyed", trigger="realtime", work="python"))
