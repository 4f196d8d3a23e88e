"""Typed config: TOML file, --set overrides, one-line errors naming the key."""

from __future__ import annotations

import pytest

from kit.config import Config, load_config, valid_keys
from kit.errors import CepkitError
from kit.paths import SPECS_DIR


def test_defaults_and_overrides():
    c = load_config(None, ["pairs.scale_factor=3", "pairs.rate.profile=adaptivity", "micro.format=csv",
                           "pairs.symbols=auto", "pairs.rate.quick=true"])
    assert c.pairs.scale_factor == 3 and c.pairs.rate.profile == "adaptivity" and c.pairs.rate.quick
    assert c.micro.format == "csv" and c.pairs.symbols is None
    # Section-specific defaults survive a merge of a partial section.
    assert c.micro.rate.profile == "constant" and c.micro.rate.basis_rate_eps == 1000.0


def test_file_roundtrip(tmp_path):
    c = load_config(None, ["pairs.scale_factor=12", "pairs.prices.correlation=0.5", "paths.datagen_dir=/x/y"])
    f = tmp_path / "c.toml"
    f.write_text(c.to_toml())
    assert load_config(f) == c
    assert load_config(f, ["pairs.file_count=4"]).pairs.file_count == 4


def test_shipped_configs_parse():
    files = sorted((SPECS_DIR / "configs").glob("*.toml"))
    assert {f.stem for f in files} >= {"standard", "quick"}
    for f in files:
        assert isinstance(load_config(f), Config)


@pytest.mark.parametrize("toml, message", [
    ("[pairs]\nscale_factor = 0\n", "c.toml:pairs.scale_factor: must be > 0, got 0"),
    ("[pairs]\nscale_factor = \"two\"\n", "c.toml:pairs.scale_factor: must be an integer, got 'two'"),
    ("[pairs]\nscal_factor = 2\n", "c.toml:pairs.scal_factor: unknown config key (valid: paths.datagen_dir,"),
    ("[pairs.rate]\narrivals = \"bursty\"\n", "c.toml:pairs.rate.arrivals: must be one of poisson, constant, got 'bursty'"),
    ("[pairs.prices]\ncorrelation = 1.5\n", "c.toml:pairs.prices.correlation: must be in [-1, 1], got 1.5"),
    ("[pairs]\nsymbols = 10\ncorrelations = 6\n", "c.toml:pairs.correlations: must be <= symbols/2 = 5, got 6"),
    ("[pairs]\nrate = 3\n", "c.toml:pairs.rate: must be a table"),
    ("[micro.rate]\nquick = true\nduration_s = 30\n", "c.toml:micro.rate.quick: cannot be combined with duration_s"),
    ("kind = \"something-else\"\n", "c.toml:kind: expected 'cepkit.config'"),
    ("schema_version = 9\n", "c.toml:schema_version: expected 1, got 9"),
    ("[pairs\nscale_factor = 1\n", "c.toml: invalid TOML"),
])
def test_bad_files_one_line_error(tmp_path, monkeypatch, toml, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(toml)
    with pytest.raises(CepkitError) as err:
        load_config("c.toml")
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_bad_overrides():
    with pytest.raises(CepkitError, match=r"^--set pairs\.file_count: must be > 0, got -1$"):
        load_config(None, ["pairs.file_count=-1"])
    with pytest.raises(CepkitError, match=r"^--set pairs\.nope: unknown config key \(valid: .*pairs\.scale_factor"):
        load_config(None, ["pairs.nope=1"])
    with pytest.raises(CepkitError, match="expected KEY=VALUE"):
        load_config(None, ["pairs.scale_factor"])
    with pytest.raises(CepkitError, match=r"^--set run\.driver_memory: must be a size like 4g"):
        load_config(None, ['run.driver_memory="4 GB"'])
    with pytest.raises(CepkitError, match=r"^--set run\.database_join: "):
        load_config(None, ['run.database_join="odbc"'])
    assert load_config(None, ['run.driver_memory="2048m"']).run.driver_memory == "2048m"


def test_missing_file():
    with pytest.raises(CepkitError, match="config file not found"):
        load_config("/nonexistent/cepkit.toml")


def test_valid_keys_cover_thesis_parameters():
    keys = set(valid_keys())
    # B.6 output folders and scale factor/file count; B.1 generator parameters.
    assert {"paths.datagen_dir", "paths.querygen_dir", "paths.translator_dir", "paths.validator_dir",
            "pairs.scale_factor", "pairs.file_count", "pairs.seed", "pairs.symbols", "pairs.correlations",
            "pairs.strategies", "pairs.rate.basis_rate_eps", "pairs.rate.peak_factor", "pairs.rate.arrivals",
            "pairs.rate.varying", "pairs.rate.duration_s"} <= keys
