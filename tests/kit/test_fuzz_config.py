"""Fuzzing config files and `--set` values (hypothesis; the contract is in tests/fuzz.py).

Valid configs (the shipped ones and a fully resolved one) are mutated: keys deleted, renamed or
retyped, numbers replaced by nan/inf/huge/negative/zero/strings, sections replaced by scalars,
files truncated, random bytes inserted or written. Each mutant goes through `cepkit config show`:

- rejected: one line naming the file (and the key or line), exit 2, no traceback, nothing
  changed; the same file given to `cepkit datagen pairs --out ...` is rejected the same way and
  leaves nothing behind;
- accepted: what `config show` prints reads back as the same config, and when the dataset it
  describes is tiny, `cepkit datagen pairs` either writes it or refuses it under the same contract
  (a valid mutation never starts a large generation: larger ones are only shown, not generated).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from kit.config import Config, describe_keys, load_config, valid_keys
from kit.shipped import specs_dir
from tests.fuzz import expect_user_error, fuzz_settings, run_cli, slow_settings

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

BASES = {
    "quick": (specs_dir() / "configs" / "quick.toml").read_text(),
    "standard": (specs_dir() / "configs" / "standard.toml").read_text(),
    "resolved": Config().to_toml(),
    # A tiny dataset, so that accepted mutants are also generated.
    "tiny": load_config(None, ["pairs.rate.duration_s=0.5", "pairs.rate.basis_rate_eps=2000",
                               "pairs.file_count=2", "micro.rate.duration_s=0.5"]).to_toml(),
}
# The generations an accepted mutant may start: a few thousand ticks at most.
MAX_EVENTS = 20_000

SPECIAL_NUMBERS = [math.nan, math.inf, -math.inf, 1e308, -1e308, 2**63 - 1, -(2**63), 2**31, -1, 0, 0.0, -0.0,
                   1e-300, 0.5, 1e9, 7, 10_001]
SCALARS = st.one_of(
    st.sampled_from(SPECIAL_NUMBERS),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["auto", "none", "", "inf", "nan", "1e9", "parquet", "constant", "4g", "a=b", "\u0000"]),
    st.lists(st.text(max_size=5), max_size=3),
)


def _paths(d: dict, prefix: tuple = ()) -> list[tuple]:
    out = []
    for k, v in d.items():
        out.append(prefix + (k,))
        if isinstance(v, dict):
            out.extend(_paths(v, prefix + (k,)))
    return out


def _get_parent(d: dict, path: tuple) -> dict:
    for k in path[:-1]:
        d = d[k]
    return d


@st.composite
def mutated_config(draw) -> bytes:
    """A config file: a valid one with a few structural/value mutations, or broken bytes."""
    base = draw(st.sampled_from(sorted(BASES)))
    text = BASES[base]
    kind = draw(st.sampled_from(["tree", "tree", "tree", "truncate", "insert-bytes", "random-bytes"]))
    if kind == "truncate":
        return text.encode()[:draw(st.integers(0, len(text)))]
    if kind == "insert-bytes":
        raw = text.encode()
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    if kind == "random-bytes":
        return draw(st.binary(max_size=200))
    data = tomllib.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get_parent(data, path)
        key = path[-1]
        op = draw(st.sampled_from(["delete", "rename", "retype", "retype", "scalar-section", "add-key"]))
        if op == "delete":
            del parent[key]
        elif op == "rename":
            parent[key + draw(st.sampled_from(["_", "s", "X", "-x"]))] = parent.pop(key)
        elif op == "retype":
            parent[key] = draw(SCALARS)
        elif op == "scalar-section":
            sections = [p for p in paths if isinstance(_get_parent(data, p)[p[-1]], dict)]
            if sections:
                sec = draw(st.sampled_from(sections))
                _get_parent(data, sec)[sec[-1]] = draw(SCALARS)
        else:
            dotted = draw(st.sampled_from(valid_keys())).split(".")
            node = data
            for k in dotted[:-1]:
                node = node.setdefault(k, {}) if isinstance(node.get(k, {}), dict) else {}
            node[dotted[-1]] = draw(SCALARS)
    try:
        return tomli_w.dumps(data).encode("utf-8", "surrogatepass")
    except (TypeError, UnicodeEncodeError):
        return text.encode()


def _tiny(config) -> bool:
    """True when the Pairs dataset `config` describes is small enough to generate in a test."""
    from datagen.pairs import estimate_bytes
    p = config.pairs
    if p.scale_factor > 20 or (p.symbols or 0) > 2000:
        return False
    try:
        _, events = estimate_bytes(p)
    except Exception:        # the generator will say why (that is what the run below checks)
        return True
    return events <= MAX_EVENTS


def check_config_file(tmp: Path, raw: bytes) -> None:
    cfg = tmp / "c.toml"
    cfg.write_bytes(raw)
    code, out, err = run_cli(["config", "show", "-c", str(cfg)])
    if code != 0:
        expect_user_error(["config", "show", "-c", str(cfg)], watch=[tmp], names=[str(cfg)])
        expect_user_error(["datagen", "pairs", "-c", str(cfg), "--out", str(tmp / "ds")], watch=[tmp],
                          names=[str(cfg)])
        return
    assert "Traceback" not in out + err
    shown = tmp / "shown.toml"
    shown.write_text(out)
    config = load_config(cfg)
    assert load_config(shown) == config, "config show does not read back as the same config"
    if _tiny(config):
        code, out, err = run_cli(["datagen", "pairs", "-c", str(cfg), "--out", str(tmp / "ds")])
        if code == 0:
            assert (tmp / "ds" / "manifest.json").is_file()
        else:
            expect_user_error(["datagen", "pairs", "-c", str(cfg), "--out", str(tmp / "ds2")], watch=[tmp])


_counter = iter(range(10**9))


def _fresh(tmp_path: Path) -> Path:
    d = tmp_path / f"case{next(_counter)}"
    d.mkdir()
    return d


@fuzz_settings
@given(raw=mutated_config())
def test_fuzz_config_files(tmp_path, raw):
    check_config_file(_fresh(tmp_path), raw)


@pytest.mark.slow
@slow_settings
@given(raw=mutated_config())
def test_fuzz_config_files_slow(tmp_path, raw):
    check_config_file(_fresh(tmp_path), raw)


# --- --set values ------------------------------------------------------------------------------

SET_VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "+inf", "1e999", "-1", "0", "0.0", "1e9", "9223372036854775807",
                     "9223372036854775808", "-9223372036854775809", '""', '"x"', "[1, 2]", "{a = 1}", "true",
                     "auto", "none", '"\\u0000"', "1_000", "0x10", "1e-320", "7.5", "[\"a=b\"]", "'''x'''"]),
    st.text(max_size=15),
    st.integers().map(str),
    st.floats().map(repr),
)


def check_set(tmp: Path, key: str, value: str) -> None:
    argv = ["config", "show", "--set", f"{key}={value}"]
    code, out, err = run_cli(argv)
    if code != 0:
        line = expect_user_error(argv, watch=[tmp], names=["--set "])
        # The key itself, or the key of the same section a cross-check names (initial_max_cents
        # must be >= initial_min_cents, correlations <= symbols/2, ...).
        section = key.rsplit(".", 1)[0]
        assert any(f"--set {k}:" in line for k in valid_keys() if k.rsplit(".", 1)[0] == section), line
        return
    assert "Traceback" not in out + err
    shown = tmp / "shown.toml"
    shown.write_text(out)
    config = load_config(None, [f"{key}={value}"])
    assert load_config(shown) == config
    for v in (getattr(config.pairs.rate, "basis_rate_eps", None), config.pairs.rate.peak_factor,
              config.run.speed, config.micro.zipf_s):
        assert v is None or math.isfinite(v)


@fuzz_settings
@given(key=st.sampled_from(valid_keys()), value=SET_VALUES)
def test_fuzz_set_values(tmp_path, key, value):
    check_set(_fresh(tmp_path), key, value)


@pytest.mark.slow
@slow_settings
@given(key=st.sampled_from(valid_keys()), value=SET_VALUES)
def test_fuzz_set_values_slow(tmp_path, key, value):
    check_set(_fresh(tmp_path), key, value)


@pytest.mark.parametrize("key", [k for k, d in describe_keys() if d.startswith(("number", "integer"))])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "-1e300"])
def test_every_number_key_refuses_non_finite_and_huge(tmp_path, key, value):
    line = expect_user_error(["datagen", "pairs", "--set", f"{key}={value}", "--out", str(tmp_path / "ds")],
                             watch=[tmp_path], names=[f"--set {key}"])
    assert "must be" in line
