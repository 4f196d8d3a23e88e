"""Typed config: TOML file, --set overrides, one-line errors naming the key."""

from __future__ import annotations

import re

import pytest

from kit.config import Config, load_config, valid_keys
from kit.errors import CepkitError
from kit.shipped import specs_dir

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)


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
    files = sorted((specs_dir() / "configs").glob("*.toml"))
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


# --- numbers: finite and within the documented ranges (kit.config.LIMITS) ----------------------

from kit.config import LIMITS, describe_keys  # noqa: E402

SECTION_OF = {"pairs.rate": "RateConfig", "micro.rate": "RateConfig", "pairs.prices": "PriceConfig",
              "pairs": "PairsConfig", "micro": "MicroConfig", "run": "RunConfig"}


def _limited_keys() -> list[tuple[str, float, float, bool]]:
    out = []
    for key in valid_keys():
        section, name = key.rsplit(".", 1)
        lim = LIMITS.get(SECTION_OF.get(section, ""), {}).get(name)
        if lim is not None:
            out.append((key, *lim))
    return out


def _float_keys() -> list[str]:
    return [k for k, d in describe_keys() if d.startswith("number")]


def test_every_number_key_has_a_range():
    numeric = {k for k, d in describe_keys() if d.startswith(("number", "integer"))}
    assert numeric == {k for k, *_ in _limited_keys()}


@pytest.mark.parametrize("key", _float_keys())
@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "+inf"])
def test_non_finite_floats_are_refused_with_the_key(key, raw):
    with pytest.raises(CepkitError) as err:
        load_config(None, [f"{key}={raw}"])
    assert str(err.value) == f"--set {key}: must be a finite number, got {float(raw)!r}"


@pytest.mark.parametrize("key, lo, hi, lo_open", _limited_keys())
def test_numbers_outside_their_range_are_refused(key, lo, hi, lo_open):
    integer = dict(describe_keys())[key].startswith("integer")
    above = int(hi) + 1 if integer else hi * 1.5 + 1
    with pytest.raises(CepkitError, match=rf"^--set {key}: must be (<= |in \[)"):
        load_config(None, [f"{key}={above}"])
    below = lo if lo_open else (lo - 1 if integer else lo - abs(lo) * 0.5 - 0.001)
    with pytest.raises(CepkitError, match=rf"^--set {key}: must be"):
        load_config(None, [f"{key}={below}"])


@pytest.mark.parametrize("setting, message", [
    ("pairs.rate.basis_rate_eps=inf", "must be a finite number, got inf"),
    ("pairs.rate.peak_factor=inf", "must be a finite number, got inf"),
    ("pairs.rate.peak_factor=nan", "must be a finite number, got nan"),
    ("pairs.rate.duration_s=inf", "must be a finite number, got inf"),
    ("pairs.start_epoch_ms=9223372036854775000", "must be <= 7258118400000, got 9223372036854775000"),
    ("pairs.scale_factor=1e9", "must be <= 10000, got 1000000000"),
    ("pairs.rate.duration_s=1e12", "must be <= 2592000, got 1000000000000.0"),
    ("micro.rate.basis_rate_eps=1e9", "must be <= 100000000, got 1000000000.0"),
    ("pairs.rate.peak_factor=1000", "must be <= 100, got 1000.0"),
    ("pairs.scale_factor=nan", "must be an integer, got nan"),
    ("micro.zipf_s=-inf", "must be a finite number, got -inf"),
    ("run.speed=0", "must be >= 0.001, got 0.0"),
])
def test_finding_3_values(setting, message):
    key = setting.split("=")[0]
    with pytest.raises(CepkitError) as err:
        load_config(None, [setting])
    assert str(err.value) == f"--set {key}: {message}"


def test_bounds_themselves_are_accepted():
    c = load_config(None, ["pairs.scale_factor=10000", "pairs.start_epoch_ms=7258118400000",
                           "pairs.rate.duration_s=2592000", "pairs.rate.basis_rate_eps=1e8",
                           "pairs.rate.peak_factor=100", "micro.rate.duration_s=0.01", "micro.streams=26",
                           "pairs.prices.correlation=-1", "micro.seed=9223372036854775807"])
    assert c.pairs.scale_factor == 10_000 and c.pairs.rate.peak_factor == 100.0


def test_non_finite_in_a_file_names_the_file_and_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text("[pairs.rate]\nbasis_rate_eps = inf\n")
    with pytest.raises(CepkitError, match=r"^c\.toml:pairs\.rate\.basis_rate_eps: must be a finite number, got inf$"):
        load_config("c.toml")
    (tmp_path / "c.toml").write_text("[micro]\nzipf_s = nan\n")
    with pytest.raises(CepkitError, match=r"^c\.toml:micro\.zipf_s: must be a finite number, got nan$"):
        load_config("c.toml")


def test_strings_with_nul_are_refused():
    with pytest.raises(CepkitError, match=r"^--set paths\.datagen_dir: must not contain a NUL character$"):
        load_config(None, ['paths.datagen_dir="a\\u0000b"'])
    with pytest.raises(CepkitError, match=r"^--set run\.spark_conf: must not contain a NUL character$"):
        load_config(None, ['run.spark_conf=["a=\\u0000"]'])


def test_override_into_a_scalar_section(tmp_path):
    (tmp_path / "c.toml").write_text("pairs = 3\n")
    with pytest.raises(CepkitError, match=r"c\.toml:pairs: must be a table \(section\)$"):
        load_config(tmp_path / "c.toml", ["pairs.rate.profile=constant"])


def test_keys_describe_type_and_range():
    d = dict(describe_keys())
    assert d["pairs.scale_factor"] == "integer, > 0 and <= 10000"
    assert d["pairs.rate.duration_s"] == "number, >= 0.01 and <= 2592000, or auto"
    assert d["pairs.prices.correlation"] == "number, in [-1, 1]"
    assert d["pairs.rate.profile"] == "one of standard, adaptivity, constant"


def test_write_config_is_atomic_and_never_overwrites(tmp_path):
    from kit.config import write_config
    c = load_config(None, ["pairs.seed=3"])
    write_config(c, tmp_path / "a" / "config.toml")
    assert load_config(tmp_path / "a" / "config.toml") == c
    with pytest.raises(CepkitError, match="refusing to overwrite"):
        write_config(Config(), tmp_path / "a" / "config.toml")
    assert load_config(tmp_path / "a" / "config.toml") == c
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["config.toml"]


def test_a_bom_is_accepted(tmp_path):
    (tmp_path / "c.toml").write_bytes(b"\xef\xbb\xbf[pairs]\nseed = 5\n")
    assert load_config(tmp_path / "c.toml").pairs.seed == 5


# --- every documented range is accepted end to end (issue 27) ---------------------------------

from kit.config.limits import LIMITS  # noqa: E402

PREFIXES = {"RateConfig": ("pairs.rate", "micro.rate"), "PriceConfig": ("pairs.prices",), "PairsConfig": ("pairs",),
            "MicroConfig": ("micro",), "RunConfig": ("run",)}
# What a value needs beside it, as the docstrings say (replay_rate_eps goes with replay = constant, ...).
COMPANIONS = {"replay_rate_eps": ['run.replay="constant"'],
              "initial_min_cents": ["pairs.prices.initial_max_cents=100000000"],
              "initial_max_cents": ["pairs.prices.initial_min_cents=1"],
              "pairs.strategies": ["pairs.symbols=1000000", "pairs.correlations=100000"],
              "pairs.correlations": ["pairs.symbols=1000000"]}


def _endpoints(low: float, high: float, low_open: bool, integral: bool) -> list:
    if integral:
        return [int(low) + 1 if low_open else int(low), int(high)]
    import math
    return [math.nextafter(low, math.inf) if low_open else low, high]


@pytest.mark.parametrize("section, name", [(s, n) for s, fields in LIMITS.items() for n in fields])
def test_both_ends_of_every_documented_range_are_accepted(section, name):
    defaults = Config()
    for prefix in PREFIXES[section]:
        key = f"{prefix}.{name}"
        default = getattr(eval("defaults." + prefix), name)  # noqa: S307 - our own attribute path
        integral = isinstance(default, int) or name in ("symbols", "correlations", "strategies")
        for value in _endpoints(*LIMITS[section][name], integral):
            extra = COMPANIONS.get(name, COMPANIONS.get(key, []))
            if name in ("measure_from_s", "measure_to_s"):
                # The interval must not be empty (to > from): from's top and to's bottom pair up.
                extra = ["run.measure_to_s=6307200000"] if name == "measure_from_s" else []
                if name == "measure_from_s" and value == LIMITS[section][name][1]:
                    continue
            config = load_config(None, [*extra, f"{key}={value!r}"])
            assert getattr(eval("config." + prefix), name) == value  # noqa: S307


@pytest.mark.parametrize("sets, message", [
    # 25 strategies per SF step, but one correlated pair holds ten: refused at the key, not by querygen.
    (["pairs.strategies=251"], "--set pairs.strategies: must be <= 250 (25 correlated pairs x 10 strategies"),
    (["pairs.symbols=10", "pairs.correlations=2", "pairs.strategies=21"], "--set pairs.strategies: must be <= 20"),
    # A pair lies within one market: 4 symbols over 3 markets (SF 21) hold one pair, 3 symbols none.
    (["pairs.scale_factor=21", "pairs.symbols=4", "pairs.correlations=2"],
     "--set pairs.correlations: must be <= 1 (what 4 symbols over 3 markets hold), got 2"),
    (["pairs.scale_factor=21", "pairs.symbols=3"], "--set pairs.symbols: must be > the number of markets (3"),
])
def test_sizes_the_query_generator_would_refuse_are_refused_at_their_key(sets, message):
    with pytest.raises(CepkitError) as err:
        load_config(None, sets)
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize("symbols, pairs, strategies", [(2, 1, 10), (3, 1, 10), (7, 1, 10), (8, 2, 20), (40, 10, 25)])
def test_few_symbols_derive_counts_that_fit(symbols, pairs, strategies):
    from kit.scale import ScaleModel
    m = ScaleModel.from_sf(1, symbols=symbols)
    assert (m.correlations, m.strategies) == (pairs, strategies)
    load_config(None, [f"pairs.symbols={symbols}"])


@pytest.mark.parametrize("text, dropped", [
    ("run.speed=2 # twice as fast", "2"),                 # TOML read `2` and dropped the comment
    ('run.master="spark://h:7077" # the cluster', "'spark://h:7077'"),
    ("run.speed=2 #", "2"),
])
def test_a_set_value_is_never_cut_short_without_a_word(text, dropped):
    """Issue 45, class: a `--set` value that TOML reads only the start of is refused in one line
    naming the key, not shortened (before: the rest was dropped silently)."""
    with pytest.raises(CepkitError, match=rf"^--set {text.split('=')[0]}: .*text after the value {re.escape(dropped)} "
                                          r"would be dropped") as e:
        load_config(None, [text])
    assert "\n" not in str(e.value)


def test_a_set_value_of_several_lines_is_refused_not_read_up_to_its_first():
    with pytest.raises(CepkitError, match=r"^--set run\.speed: the value must be one line"):
        load_config(None, ['run.speed=2\nrun.master="x"'])


@pytest.mark.parametrize("text, key, value", [
    ("run.speed=2", "speed", 2.0), ('run.spark_conf=["a=b",]', "spark_conf", ("a=b",)),
    ("run.master=local[2] # x", "master", "local[2] # x"),     # not TOML: the bare text, whole
    ("run.master='x'", "master", "x"), ("run.speed=1_0", "speed", 10.0),
])
def test_whole_set_values_are_read_as_before(text, key, value):
    assert getattr(load_config(None, [text]).run, key) == value
