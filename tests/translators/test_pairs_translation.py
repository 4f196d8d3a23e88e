"""Translators: every registered engine turns a strategies spec into a tidy, importable program;
the PySpark program's Pairs logic gives the reference answers over any batching of the ticks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kit.errors import CepkitError
from kit.workload import PairsStrategy, StrategySet, load_aux
from querygen.strategies import strategies_for
from spark_runtime.pairs_core import PairsCore
from translators.output import write_program
from kit.config import PLANS
from kit.engines import ENGINES
from translators.registry import engine_module
from translators.request import PairsTranslation
from validator.pairs_reference import StrategyParams, compute_reference


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
    module = _import(path)
    assert module.PLAN == plan and callable(module.build)
    assert [s[0] for s in module.STRATEGIES] == [s.alias for s in spec.strategies]
    with pytest.raises(CepkitError, match="refusing to overwrite"):
        write_program(text, path)
    assert path.read_text() == text


def test_plan_must_be_known(spec):
    with pytest.raises(CepkitError, match="plan: must be one of"):
        PairsTranslation(spec, "clever")


def _ticks(directory) -> pd.DataFrame:
    t = pa.concat_tables([pq.read_table(f) for f in sorted(directory.glob("ticks-*.parquet"))]).to_pandas()
    t["symbol"] = t["symbol"].astype(str)
    t["TS"] = t["tickTS"] + 3
    t["ingestTS"] = t["tickTS"] + 5
    t["offset"] = np.arange(len(t))
    return t


@pytest.mark.parametrize("plan", PLANS)
def test_pyspark_pairs_logic_matches_the_reference_over_any_batching(plan, spec, quick_pairs, tmp_path):
    """Random batch sizes (up to 5000 ticks shared, 40000 per strategy, where there are 45 cores to
    feed), rows shuffled inside each batch (a shuffle does not keep
    order), state round-tripped through JSON as the Spark state store does."""
    program = _import(write_program(engine_module("pyspark").translate_pairs(PairsTranslation(spec, plan)),
                                    tmp_path / "prog.py"))
    ticks = _ticks(quick_pairs)
    rng = np.random.default_rng(3)
    groups = [program.STRATEGIES] if plan == "shared" else [(s,) for s in program.STRATEGIES]
    cores = [PairsCore(g) for g in groups]
    states = [c.initial_state() for c in cores]
    outs, start = [], 0
    while start < len(ticks):
        n = int(rng.integers(1, 5000 if plan == "shared" else 40000))
        batch = ticks.iloc[start:start + n].sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
        for i, core in enumerate(cores):
            states[i] = json.loads(json.dumps(states[i]))
            outs.append(core.process(states[i], batch))
        start += n
    got = pd.concat(outs, ignore_index=True)
    ref = compute_reference(quick_pairs, [StrategyParams.of(s) for s in spec.strategies])
    ind = got[got.stream == "Indicator"]
    key = ["strategy", "inputTickTS"]
    merged = ref.indicators.merge(ind, on=key, how="outer", indicator=True, suffixes=("_ref", ""))
    assert len(ref.indicators) > 400 and (merged["_merge"] == "both").all()
    for col in ("ratio", "avgRatio", "upperBand", "lowerBand"):
        np.testing.assert_allclose(merged[col], merged[f"{col}_ref"], rtol=1e-12)
    assert (ind["inputTS"] == ind["inputTickTS"] + 3).all() and (ind["ingestTS"] == ind["inputTickTS"] + 5).all()
    orders = got[got.stream == "MarketOrder"]
    okey = key + ["type", "symbol"]
    m = ref.orders.merge(orders, on=okey, how="outer", indicator=True, suffixes=("_ref", ""))
    assert len(ref.orders) > 50 and (m["_merge"] == "both").all()
    assert (m["price"] == m["price_ref"]).all() and (m["size"] == m["size_ref"]).all()


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
