"""The engine registry: names, the old name, lists of engines, and the config's engine."""

from __future__ import annotations

import pytest

from kit.config import load_config
from kit.engines import ENGINES, engine_list, engine_name
from kit.errors import CepkitError


def test_every_engine_names_its_pieces():
    for name, e in ENGINES.items():
        assert e.name == name and e.translator.startswith("translators.") and e.runner.startswith("harness.runners.")
        assert "runtime_common" in e.runtime_packages and "kit" in e.runtime_packages
        assert e.environment == "main" or e.environment.startswith(".venv-")


def test_the_old_name_is_read_as_spark_and_unknown_names_are_refused():
    assert engine_name("pyspark") == "spark" == load_config(overrides=['run.engine="pyspark"']).run.engine
    with pytest.raises(CepkitError, match="engine 'storm' is not known; known engines: spark, flink"):
        engine_name("storm")
    with pytest.raises(CepkitError, match="run.engine"):
        load_config(overrides=['run.engine="storm"'])


def test_a_list_of_engines_keeps_its_order_once_each():
    assert engine_list("flink, spark,pyspark") == ("flink", "spark")
    with pytest.raises(CepkitError, match="one or more engine names"):
        engine_list(" , ")
