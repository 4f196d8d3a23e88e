"""Typed configuration: a TOML file plus `--set section.key=value` overrides.

Mirrors the thesis' configuration file (B.6: output folders, scale factor, file count) and the
data generator's parameters (B.1: symbols, correlations, strategies, rates, arrival law, test
duration). Every section is a frozen dataclass that checks itself; unknown keys are rejected with
the list of valid ones; a bad value names the file and the dotted key.

Optional integers/floats left unset (absent in TOML, `auto` on the command line) are derived from
the scale factor by `kit.scale.ScaleModel`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit import tomlio
from kit.errors import CepkitError, at

CONFIG_KIND = "cepkit.config"
CONFIG_SCHEMA_VERSION = 1
FORMATS = ("parquet", "csv")
ARRIVALS = ("poisson", "constant")
PROFILES = ("standard", "adaptivity", "constant")
# 2026-01-05 14:30:00 UTC, a Monday market open; any epoch works, this one is easy to read.
DEFAULT_START_EPOCH_MS = 1_767_623_400_000


class FieldError(CepkitError):
    """A bad value of one field; the loader prefixes the file and the dotted key."""

    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field_name = field_name
        self.message = message


def _need(cond: bool, name: str, message: str) -> None:
    if not cond:
        raise FieldError(name, message)


def _positive(obj: Any, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if v is not None:
            _need(v > 0, n, f"must be > 0, got {v!r}")


def _choice(obj: Any, name: str, choices: tuple[str, ...]) -> None:
    v = getattr(obj, name)
    _need(v in choices, name, f"must be one of {', '.join(choices)}, got {v!r}")


@dataclass(frozen=True)
class PathsConfig:
    """Output folders (thesis B.6: dGenFolder, qGenFolder, translatorFolder, validFolder)."""

    datagen_dir: str = "data"
    querygen_dir: str = "queries"
    translator_dir: str = "impl"
    validator_dir: str = "valid"
    runs_dir: str = "runs"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _need(bool(getattr(self, f.name)), f.name, "must not be empty")


@dataclass(frozen=True)
class RateConfig:
    """Arrival process. Unset rates come from the scale model (pairs) or the section default."""

    profile: str = "standard"
    quick: bool = False
    duration_s: float | None = None      # rescale the profile to this total length, same shape
    basis_rate_eps: float | None = None
    peak_factor: float = 1.5
    arrivals: str = "poisson"           # exponential inter-arrival times, or constant ones
    varying: bool = True                # false: the basis rate throughout, same phases

    def __post_init__(self) -> None:
        _choice(self, "profile", PROFILES)
        _choice(self, "arrivals", ARRIVALS)
        _positive(self, "duration_s", "basis_rate_eps")
        _need(self.peak_factor >= 1.0, "peak_factor", f"must be >= 1, got {self.peak_factor!r}")
        _need(not (self.quick and self.duration_s is not None), "quick",
              f"cannot be combined with duration_s = {self.duration_s} (which already sets the length); "
              "unset one of them")


@dataclass(frozen=True)
class PriceConfig:
    """Geometric Brownian motion of tick prices; time is measured in simulated hours."""

    correlation: float = 0.9
    drift_per_hour: float = 0.0
    volatility_per_hour: float = 0.02
    initial_min_cents: int = 1000
    initial_max_cents: int = 10000

    def __post_init__(self) -> None:
        _need(-1.0 <= self.correlation <= 1.0, "correlation", f"must be in [-1, 1], got {self.correlation!r}")
        _need(self.volatility_per_hour >= 0, "volatility_per_hour", f"must be >= 0, got {self.volatility_per_hour!r}")
        _need(-1.0 <= self.drift_per_hour <= 1.0, "drift_per_hour", f"must be in [-1, 1], got {self.drift_per_hour!r}")
        _positive(self, "initial_min_cents")
        _need(self.initial_max_cents >= self.initial_min_cents, "initial_max_cents",
              f"must be >= initial_min_cents ({self.initial_min_cents}), got {self.initial_max_cents!r}")
        _need(self.initial_max_cents <= 100_000_000, "initial_max_cents", "must be <= 100000000 (1M dollars)")


@dataclass(frozen=True)
class PairsConfig:
    """Pairs data generation (thesis B.1 and B.6)."""

    scale_factor: int = 1
    file_count: int = 1
    seed: int = 42
    format: str = "parquet"
    symbols: int | None = None
    correlations: int | None = None
    strategies: int | None = None
    start_epoch_ms: int = DEFAULT_START_EPOCH_MS
    rate: RateConfig = field(default_factory=RateConfig)
    prices: PriceConfig = field(default_factory=PriceConfig)

    def __post_init__(self) -> None:
        _positive(self, "scale_factor", "file_count", "symbols", "correlations", "strategies")
        _need(self.seed >= 0, "seed", f"must be >= 0, got {self.seed!r}")
        _choice(self, "format", FORMATS)
        _need(self.start_epoch_ms >= 0, "start_epoch_ms", "must be >= 0")
        if self.symbols is not None:
            _need(self.symbols >= 2, "symbols", f"must be >= 2, got {self.symbols}")
            if self.correlations is not None:
                _need(self.correlations <= self.symbols // 2, "correlations",
                      f"must be <= symbols/2 = {self.symbols // 2}, got {self.correlations}")


@dataclass(frozen=True)
class MicroConfig:
    """Microbenchmark dataset (thesis Table 4.1 and the join table of Q6)."""

    seed: int = 7
    streams: int = 1
    max_id: int = 1000
    zipf_s: float = 0.0                 # 0: IDs equiprobable; > 0: bounded Zipf with this exponent
    attributes: int = 4
    table_rows: int = 0                 # 0: no join table
    table_attributes: int = 9
    file_count: int = 1
    format: str = "parquet"
    start_epoch_ms: int = DEFAULT_START_EPOCH_MS
    rate: RateConfig = field(default_factory=lambda: RateConfig(profile="constant", basis_rate_eps=1000.0))

    def __post_init__(self) -> None:
        _positive(self, "streams", "max_id", "attributes", "table_attributes", "file_count")
        _need(self.seed >= 0, "seed", f"must be >= 0, got {self.seed!r}")
        _need(self.streams <= 26, "streams", f"must be <= 26, got {self.streams}")
        _need(self.attributes <= 1000, "attributes", f"must be <= 1000, got {self.attributes}")
        _need(self.max_id <= 2**31 - 1, "max_id", "must fit a 32-bit int")
        _need(self.zipf_s >= 0, "zipf_s", f"must be >= 0, got {self.zipf_s!r}")
        _need(self.table_rows >= 0, "table_rows", f"must be >= 0, got {self.table_rows!r}")
        _choice(self, "format", FORMATS)
        _need(self.rate.basis_rate_eps is not None, "rate.basis_rate_eps", "must be set for microbenchmark streams")


ENGINES = ("pyspark",)
PLANS = ("shared", "per-strategy")
# Microbenchmark plans (translators/spark_micro.py): Q3 on the stateful core or Spark's window();
# J3 by per-batch key lookups through psycopg or Spark's own JDBC source re-reading the table.
TIME_WINDOW_PLANS = ("core", "native")
DATABASE_JOIN_PLANS = ("lookup", "jdbc")
STAMPS = ("scheduled", "send")


@dataclass(frozen=True)
class RunConfig:
    """How a benchmark run drives the engine under test (the harness).

    - `speed`: simulated ms per wall-clock ms when the driver paces by tickTS (1.0: real time).
    - `max_backlog_s` is Karimov's q^b as time: the run is stopped as unsustainable once the
      backlog (released but not pulled events) stays above `max_backlog_s` seconds of input at the
      profile's basis rate for `backlog_grace_s` seconds.
    """

    engine: str = "pyspark"
    plan: str = "shared"
    master: str = "local[*]"
    shuffle_partitions: int = 2
    source_partitions: int = 1          # offset ranges the engine's source reads in parallel per batch
    trigger_ms: int = 0
    speed: float = 1.0
    stamp: str = "scheduled"
    output_format: str = "parquet"
    # Microbenchmark Q3: "core" (the stateful core, exact inputTS) or "native" (Spark's window()).
    time_windows: str = "core"
    # Microbenchmark J3: "lookup" (per-batch key lookups through psycopg) or "jdbc" (Spark's JDBC
    # source re-reading the table every micro-batch; needs Debian's libpostgresql-jdbc-java).
    database_join: str = "lookup"
    max_backlog_s: float = 30.0
    backlog_grace_s: float = 5.0
    startup_timeout_s: float = 240.0
    drain_timeout_s: float = 180.0
    # The driver JVM's heap (spark.driver.memory). Spark's 1g default runs out when a backlog
    # turns into one micro-batch of millions of rows collected on the driver (Q1 near 1 M ev/s).
    driver_memory: str = "4g"
    spark_conf: tuple[str, ...] = ()     # extra Spark settings, "key=value" each

    def __post_init__(self) -> None:
        _choice(self, "engine", ENGINES)
        _need(re.fullmatch(r"[1-9][0-9]*[kmgt]", self.driver_memory or "") is not None, "driver_memory",
              f"must be a size like 4g or 2048m, got {self.driver_memory!r}")
        for item in self.spark_conf:
            _need("=" in item and bool(item.split("=", 1)[0].strip()), "spark_conf",
                  f"entries must look like key=value, got {item!r}")
        _choice(self, "plan", PLANS)
        _choice(self, "time_windows", TIME_WINDOW_PLANS)
        _choice(self, "database_join", DATABASE_JOIN_PLANS)
        _choice(self, "stamp", STAMPS)
        _choice(self, "output_format", FORMATS)
        _need(bool(self.master), "master", "must not be empty")
        _positive(self, "shuffle_partitions", "source_partitions", "speed", "max_backlog_s", "startup_timeout_s", "drain_timeout_s")
        _need(self.trigger_ms >= 0, "trigger_ms", f"must be >= 0, got {self.trigger_ms!r}")
        _need(self.backlog_grace_s >= 0, "backlog_grace_s", f"must be >= 0, got {self.backlog_grace_s!r}")


@dataclass(frozen=True)
class Config:
    paths: PathsConfig = field(default_factory=PathsConfig)
    pairs: PairsConfig = field(default_factory=PairsConfig)
    micro: MicroConfig = field(default_factory=MicroConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict:
        return {"kind": CONFIG_KIND, "schema_version": CONFIG_SCHEMA_VERSION, **dataclasses.asdict(self)}

    def to_toml(self) -> str:
        return tomlio.dumps(self.to_dict())


# --- loading --------------------------------------------------------------------------------

def _is_section(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def valid_keys(cls: type = Config, prefix: str = "") -> list[str]:
    """Every dotted key a config accepts."""
    out: list[str] = []
    for name, tp in _hints(cls).items():
        if _is_section(tp):
            out.extend(valid_keys(tp, f"{prefix}{name}."))
        else:
            out.append(prefix + name)
    return out


def _coerce(value: Any, tp: Any, key: str, source: str | None) -> Any:
    optional = False
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional, tp = True, args[0]
    if value is None or (optional and isinstance(value, str) and value.lower() in ("auto", "none", "")):
        if optional:
            return None
        raise at(source, key, "must be set")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise at(source, key, f"must be true or false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise at(source, key, f"must be an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise at(source, key, f"must be a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise at(source, key, f"must be a string, got {value!r}")
    if typing.get_origin(tp) is tuple:  # tuple[str, ...]: a TOML array of strings
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise at(source, key, f"must be an array of strings, got {value!r}")
    raise TypeError(f"unsupported config type {tp!r} for {key}")


def _build(cls: type, data: dict, prefix: str, source: str | None) -> Any:
    hints = _hints(cls)
    unknown = [k for k in data if k not in hints]
    if unknown:
        key = prefix + unknown[0]
        raise at(source, key, f"unknown config key (valid: {', '.join(valid_keys())})")
    kwargs: dict[str, Any] = {}
    for name, tp in hints.items():
        if name not in data:
            continue
        key = prefix + name
        if _is_section(tp):
            if not isinstance(data[name], dict):
                raise at(source, key, "must be a table (section)")
            kwargs[name] = _build(tp, data[name], key + ".", source)
        else:
            kwargs[name] = _coerce(data[name], tp, key, source)
    try:
        return cls(**kwargs)
    except FieldError as e:
        raise at(source, prefix + e.field_name, e.message) from None


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """`section.key=value`; the value is read as a TOML literal, else kept as a bare string."""
    if "=" not in text:
        raise CepkitError(f"--set {text!r}: expected KEY=VALUE, e.g. pairs.scale_factor=2")
    key, raw = text.split("=", 1)
    key, raw = key.strip(), raw.strip()
    if key not in valid_keys():
        raise CepkitError(f"--set {key}: unknown config key (valid: {', '.join(valid_keys())})")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.split("."), value


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Defaults, then the TOML file (if any), then each `--set` override, checked as a whole."""
    data: dict = {}
    source = None
    if path is not None:
        source = os.fspath(path)
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise CepkitError(f"{source}: config file not found") from None
        except tomllib.TOMLDecodeError as e:
            raise CepkitError(f"{source}: invalid TOML: {e}") from None
        kind = data.pop("kind", CONFIG_KIND)
        version = data.pop("schema_version", CONFIG_SCHEMA_VERSION)
        if kind != CONFIG_KIND:
            raise at(source, "kind", f"expected {CONFIG_KIND!r}, got {kind!r}")
        if version != CONFIG_SCHEMA_VERSION:
            raise at(source, "schema_version", f"expected {CONFIG_SCHEMA_VERSION}, got {version!r}")
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    # Start from the default instance so section-specific defaults (micro.rate) survive a merge.
    defaults = dataclasses.asdict(Config())
    merged = _merge(defaults, data)
    _drop_none(merged)
    src = source if not overrides else (f"{source} + --set" if source else "--set")
    return _build(Config, merged, "", src)


def _drop_none(d: dict) -> None:
    for k in list(d):
        if isinstance(d[k], dict):
            _drop_none(d[k])
        elif d[k] is None:
            del d[k]


def write_config(config: Config, path: Path) -> None:
    Path(path).write_text(config.to_toml())
