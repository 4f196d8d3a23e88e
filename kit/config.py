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
import math
import os
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from kit import tomlio
from kit.engines import ENGINE_NAMES
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


# --- the numbers a config accepts: one table, one check ---------------------------------------
#
# Every float must be finite (nan and inf are refused whatever the key), and every number listed
# here must lie in its range. The bounds are generous for real use and keep the generators exact:
# rates and durations bound the work (a dataset's size is also checked against the free disk
# before it is written), the start time keeps every timestamp (start + 30 days) far inside int64
# milliseconds and inside what pandas' nanosecond timestamps can hold (before 2262).
DAY_S = 86_400
MAX_RATE_EPS = 1e8                       # 100 M events/s, basis rate (the peak is basis x peak_factor)
MAX_PEAK_FACTOR = 100.0
MAX_DURATION_S = 30 * DAY_S              # a 30-day run; the standard Pairs run is 2 hours
MIN_DURATION_S = 0.01                    # 10 ms: at least 1 ms per phase of any profile
MAX_SCALE_FACTOR = 10_000                # 1,000 markets, 100,000 symbols, 250,000 strategies, 5 M ev/s
MAX_SYMBOLS = 1_000_000
MAX_STRATEGIES = 1_000_000
MAX_FILES = 1_000                        # files per dataset or stream (each is open while writing)
MAX_START_EPOCH_MS = 7_258_118_400_000   # 2200-01-01 00:00 UTC
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# section class -> field -> (low, high, low_open): low < v (open) or low <= v, and v <= high.
LIMITS: dict[str, dict[str, tuple[float, float, bool]]] = {
    "RateConfig": {
        "duration_s": (MIN_DURATION_S, MAX_DURATION_S, False),
        "basis_rate_eps": (0.001, MAX_RATE_EPS, False),
        "peak_factor": (1.0, MAX_PEAK_FACTOR, False),
    },
    "PriceConfig": {
        "correlation": (-1.0, 1.0, False),
        "drift_per_hour": (-1.0, 1.0, False),
        "volatility_per_hour": (0.0, 10.0, False),
        "initial_min_cents": (0, 100_000_000, True),
        "initial_max_cents": (0, 100_000_000, True),      # 1 M dollars
    },
    "PairsConfig": {
        "scale_factor": (0, MAX_SCALE_FACTOR, True),
        "file_count": (0, MAX_FILES, True),
        "seed": (0, INT64_MAX, False),
        "symbols": (2, MAX_SYMBOLS, False),
        "correlations": (0, MAX_SYMBOLS // 2, True),
        "strategies": (0, MAX_STRATEGIES, True),
        "start_epoch_ms": (0, MAX_START_EPOCH_MS, False),
    },
    "MicroConfig": {
        "seed": (0, INT64_MAX, False),
        "streams": (0, 26, True),                        # S1..S26
        "max_id": (0, INT32_MAX, True),
        "zipf_s": (0.0, 100.0, False),
        "attributes": (0, 1000, True),
        "table_rows": (0, INT32_MAX, False),
        "table_attributes": (0, 1000, True),
        "file_count": (0, MAX_FILES, True),
        "start_epoch_ms": (0, MAX_START_EPOCH_MS, False),
    },
    "RunConfig": {
        "shuffle_partitions": (0, 100_000, True),
        "source_partitions": (0, 10_000, True),
        "trigger_ms": (0, DAY_S * 1000, False),
        # A converted dataset of monthly prices spans decades: replaying 30 years in a minute
        # takes a speed of ~1.6e10.
        "speed": (0.001, 1e12, False),
        "replay_rate_eps": (0.001, MAX_RATE_EPS, False),
        # Seconds on the run's axis, which for a recorded replay is the data's own (decades).
        "measure_from_s": (0.0, 200 * 365 * DAY_S, False),
        "measure_to_s": (0.0, 200 * 365 * DAY_S, True),
        "max_backlog_s": (0.0, DAY_S, True),
        "backlog_grace_s": (0.0, DAY_S, False),
        "startup_timeout_s": (0.0, DAY_S, True),
        "drain_timeout_s": (0.0, DAY_S, True),
    },
}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def range_text(section: str, name: str) -> str | None:
    """'> 0 and <= 10000', '[-1, 1]', ...: the documented range of a field, if it has one."""
    lim = LIMITS.get(section, {}).get(name)
    if lim is None:
        return None
    lo, hi, lo_open = lim
    if lo < 0:
        return f"in [{_num(lo)}, {_num(hi)}]"
    return f"{'>' if lo_open else '>='} {_num(lo)} and <= {_num(hi)}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_values(obj: Any) -> None:
    """The one check of a section's numbers (finite, within LIMITS) and strings (no NUL)."""
    limits = LIMITS.get(type(obj).__name__, {})
    for f in dataclasses.fields(obj):
        name, v = f.name, getattr(obj, f.name)
        if isinstance(v, (str, tuple)):
            for text in (v,) if isinstance(v, str) else v:
                if isinstance(text, str):
                    _need("\0" not in text, name, "must not contain a NUL character")
                    _need(not _SURROGATE.search(text), name, "must be valid Unicode text (it has a lone surrogate, "
                                                           "e.g. from bytes that are not UTF-8)")
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if isinstance(v, float):
            _need(math.isfinite(v), name, f"must be a finite number, got {v!r}")
        if name not in limits:
            continue
        lo, hi, lo_open = limits[name]
        if lo < 0:
            _need(lo <= v <= hi, name, f"must be in [{_num(lo)}, {_num(hi)}], got {v!r}")
            continue
        _need(v > lo if lo_open else v >= lo, name, f"must be {'>' if lo_open else '>='} {_num(lo)}, got {v!r}")
        _need(v <= hi, name, f"must be <= {_num(hi)}, got {v!r}")


@dataclass(frozen=True)
class PathsConfig:
    """Output folders (thesis B.6: dGenFolder, qGenFolder, translatorFolder, validFolder)."""

    datagen_dir: str = "data"
    querygen_dir: str = "queries"
    translator_dir: str = "impl"
    validator_dir: str = "valid"
    runs_dir: str = "runs"

    def __post_init__(self) -> None:
        _check_values(self)
        for f in dataclasses.fields(self):
            _need(bool(getattr(self, f.name)), f.name, "must not be empty")


@dataclass(frozen=True)
class RateConfig:
    """Arrival process. Unset rates come from the scale model (pairs) or the section default.

    Ranges (LIMITS): duration_s 0.01 s .. 30 days, basis_rate_eps 0.001 .. 1e8 ev/s, peak_factor 1 .. 100.
    """

    profile: str = "standard"
    quick: bool = False
    duration_s: float | None = None      # rescale the profile to this total length, same shape; <= 30 days
    basis_rate_eps: float | None = None  # events/s, <= 1e8
    peak_factor: float = 1.5            # peak = basis x peak_factor, in [1, 100]
    arrivals: str = "poisson"           # exponential inter-arrival times, or constant ones
    varying: bool = True                # false: the basis rate throughout, same phases

    def __post_init__(self) -> None:
        _check_values(self)
        _choice(self, "profile", PROFILES)
        _choice(self, "arrivals", ARRIVALS)
        _need(not (self.quick and self.duration_s is not None), "quick",
              f"cannot be combined with duration_s = {self.duration_s} (which already sets the length); "
              "unset one of them")


@dataclass(frozen=True)
class PriceConfig:
    """Geometric Brownian motion of tick prices; time is measured in simulated hours."""

    correlation: float = 0.9            # in [-1, 1]
    drift_per_hour: float = 0.0         # in [-1, 1]
    volatility_per_hour: float = 0.02   # in [0, 10]
    initial_min_cents: int = 1000       # 1 .. 100,000,000 (1 M dollars)
    initial_max_cents: int = 10000      # initial_min_cents .. 100,000,000

    def __post_init__(self) -> None:
        _check_values(self)
        _need(self.initial_max_cents >= self.initial_min_cents, "initial_max_cents",
              f"must be >= initial_min_cents ({self.initial_min_cents}), got {self.initial_max_cents!r}")


@dataclass(frozen=True)
class PairsConfig:
    """Pairs data generation (thesis B.1 and B.6)."""

    scale_factor: int = 1               # 1 .. 10,000 (1,000 markets, 100,000 symbols)
    file_count: int = 1                 # 1 .. 1,000
    seed: int = 42                      # 0 .. 2^63-1
    format: str = "parquet"
    symbols: int | None = None          # 2 .. 1,000,000
    correlations: int | None = None     # 1 .. symbols/2
    strategies: int | None = None       # 1 .. 1,000,000
    start_epoch_ms: int = DEFAULT_START_EPOCH_MS    # 0 (1970) .. 7,258,118,400,000 (2200-01-01 UTC)
    rate: RateConfig = field(default_factory=RateConfig)
    prices: PriceConfig = field(default_factory=PriceConfig)

    def __post_init__(self) -> None:
        _check_values(self)
        _choice(self, "format", FORMATS)
        if self.symbols is not None:
            if self.correlations is not None:
                _need(self.correlations <= self.symbols // 2, "correlations",
                      f"must be <= symbols/2 = {self.symbols // 2}, got {self.correlations}")


@dataclass(frozen=True)
class MicroConfig:
    """Microbenchmark dataset (thesis Table 4.1 and the join table of Q6)."""

    seed: int = 7                       # 0 .. 2^63-1
    streams: int = 1                    # 1 .. 26 (S1..S26)
    max_id: int = 1000                  # 1 .. 2^31-1
    zipf_s: float = 0.0                 # 0: IDs equiprobable; > 0 (<= 100): bounded Zipf with this exponent
    attributes: int = 4                 # 1 .. 1,000
    table_rows: int = 0                 # 0: no join table; at most 2^31-1
    table_attributes: int = 9           # 1 .. 1,000
    file_count: int = 1                 # 1 .. 1,000 per stream
    format: str = "parquet"
    start_epoch_ms: int = DEFAULT_START_EPOCH_MS    # 0 (1970) .. 7,258,118,400,000 (2200-01-01 UTC)
    rate: RateConfig = field(default_factory=lambda: RateConfig(profile="constant", basis_rate_eps=1000.0))

    def __post_init__(self) -> None:
        _check_values(self)
        _choice(self, "format", FORMATS)
        _need(self.rate.basis_rate_eps is not None, "rate.basis_rate_eps", "must be set for microbenchmark streams")


PLANS = ("shared", "per-strategy")
# Microbenchmark plans (translators/spark_micro.py): Q3 on the stateful core or Spark's window();
# J3 by per-batch key lookups through psycopg or Spark's own JDBC source re-reading the table.
TIME_WINDOW_PLANS = ("core", "native")
DATABASE_JOIN_PLANS = ("lookup", "jdbc")
STAMPS = ("scheduled", "send")
# How the driver paces a dataset (specs/DRIVER.md): at its recorded times (tickTS / TS) scaled by
# `speed`, evenly at `replay_rate_eps`, or as fast as the engine pulls.
REPLAYS = ("recorded", "constant", "pull")


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
    replay: str = "recorded"
    replay_rate_eps: float | None = None    # replay = "constant": events per second
    # The measurement interval in seconds on the run's time axis (simulated seconds for a recorded
    # replay, wall seconds otherwise); unset: the rate profile's measured phases, or the whole run.
    measure_from_s: float | None = None
    measure_to_s: float | None = None
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
        _check_values(self)              # every number finite and within LIMITS["RunConfig"]
        _choice(self, "engine", ENGINE_NAMES)
        _need(re.fullmatch(r"[1-9][0-9]*[kmgt]", self.driver_memory or "") is not None, "driver_memory",
              f"must be a size like 4g or 2048m, got {self.driver_memory!r}")
        for item in self.spark_conf:
            _need("=" in item and bool(item.split("=", 1)[0].strip()), "spark_conf",
                  f"entries must look like key=value, got {item!r}")
        _choice(self, "plan", PLANS)
        _choice(self, "time_windows", TIME_WINDOW_PLANS)
        _choice(self, "database_join", DATABASE_JOIN_PLANS)
        _choice(self, "stamp", STAMPS)
        _choice(self, "replay", REPLAYS)
        _need((self.replay == "constant") == (self.replay_rate_eps is not None), "replay_rate_eps",
              "is required with replay = \"constant\" (cepkit pairs --rate) and only applies to it")
        _positive(self, "replay_rate_eps")
        _need(self.measure_from_s is None or self.measure_from_s >= 0, "measure_from_s",
              f"must be >= 0, got {self.measure_from_s!r}")
        _need(self.measure_from_s is None or self.measure_to_s is None or self.measure_to_s > self.measure_from_s,
              "measure_to_s", f"must be > measure_from_s ({self.measure_from_s}), got {self.measure_to_s!r}")
        _choice(self, "output_format", FORMATS)
        _need(bool(self.master), "master", "must not be empty")
        _positive(self, "shuffle_partitions", "source_partitions", "speed", "max_backlog_s", "startup_timeout_s", "drain_timeout_s")
        _need(self.trigger_ms >= 0, "trigger_ms", f"must be >= 0, got {self.trigger_ms!r}")
        _need(self.backlog_grace_s >= 0, "backlog_grace_s", f"must be >= 0, got {self.backlog_grace_s!r}")

    def backlog_limit_events(self, mean_eps: float | None) -> int | None:
        """q^b in events: `max_backlog_s` seconds of input at the mean release rate, at least 1000
        events; None when nothing sets the pace (a pulled replay is never more than its pull
        window ahead of the engine)."""
        return None if mean_eps is None else max(1000, int(self.max_backlog_s * mean_eps))


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


# Which tuple of names a string key must be one of (for `cepkit config keys`).
_CHOICES = {"RateConfig.profile": "PROFILES", "RateConfig.arrivals": "ARRIVALS", "PairsConfig.format": "FORMATS",
            "MicroConfig.format": "FORMATS", "RunConfig.engine": "ENGINE_NAMES", "RunConfig.plan": "PLANS",
            "RunConfig.stamp": "STAMPS", "RunConfig.replay": "REPLAYS", "RunConfig.output_format": "FORMATS",
            "RunConfig.time_windows": "TIME_WINDOW_PLANS", "RunConfig.database_join": "DATABASE_JOIN_PLANS"}


def describe_keys(cls: type = Config, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, 'type, range') for every key, e.g. ('pairs.scale_factor', 'integer, > 0 and <= 10000')."""
    out: list[tuple[str, str]] = []
    for name, tp in _hints(cls).items():
        if _is_section(tp):
            out.extend(describe_keys(tp, f"{prefix}{name}."))
            continue
        optional = isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union
        base = next(a for a in typing.get_args(tp) if a is not type(None)) if optional else tp
        kind = {int: "integer", float: "number", bool: "true or false", str: "string"}.get(
            base, "array of strings")
        choices = _CHOICES.get(f"{cls.__name__}.{name}")
        if choices:
            kind = f"one of {', '.join(globals().get(choices, ()))}"
        text = ", ".join(filter(None, (kind, range_text(cls.__name__, name), "or auto" if optional else None)))
        out.append((prefix + name, text))
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


# A config is a few kB; anything much larger is not one (and /dev/zero must not fill the memory).
MAX_CONFIG_BYTES = 1 << 20


def _read_toml(source: str) -> dict:
    """The TOML table of the config file `source`; every way it cannot be read is one line
    naming the file."""
    try:
        with open(source, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        if os.path.islink(source):
            raise CepkitError(f"{source}: config file is a dangling symbolic link "
                              f"(to {os.readlink(source)!r}, which does not exist)") from None
        raise CepkitError(f"{source}: config file not found") from None
    except IsADirectoryError:
        raise CepkitError(f"{source}: is a directory, not a config file") from None
    except NotADirectoryError:
        raise CepkitError(f"{source}: config file not found (a part of the path is not a directory)") from None
    except PermissionError:
        raise CepkitError(f"{source}: cannot read the config file: permission denied") from None
    except OSError as e:
        raise CepkitError(f"{source}: cannot read the config file: {e.strerror or e}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise CepkitError(f"{source}: not a config file: larger than {MAX_CONFIG_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        bad = bytes(e.object)
        line = bad[:e.start].count(b"\n") + 1
        raise CepkitError(f"{source}:{line}: not UTF-8 text (byte 0x{bad[e.start]:02x}); "
                          "a config file is TOML") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise CepkitError(f"{source}: invalid TOML: {e}") from None
    except RecursionError:
        raise CepkitError(f"{source}: invalid TOML: nested too deeply") from None


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | tuple[str, ...] = (),
                settings: Mapping[str, Any] | None = None) -> Config:
    """Defaults, then the TOML file (if any), then each `--set` override (text, read as TOML), then
    `settings` (typed values by dotted key, e.g. {"pairs.scale_factor": 4} from a command's own
    options), checked as a whole."""
    data: dict = {}
    source = None
    if path is not None:
        source = os.fspath(path)
        data = _read_toml(source)
        kind = data.pop("kind", CONFIG_KIND)
        version = data.pop("schema_version", CONFIG_SCHEMA_VERSION)
        if kind != CONFIG_KIND:
            raise at(source, "kind", f"expected {CONFIG_KIND!r}, got {kind!r}")
        if version != CONFIG_SCHEMA_VERSION:
            raise at(source, "schema_version", f"expected {CONFIG_SCHEMA_VERSION}, got {version!r}")
    for text in overrides:
        keys, value = parse_override(text)
        _put(data, keys, value, source)
    for key, value in (settings or {}).items():
        _put(data, _known_key(key), value, source)
    # Start from the default instance so section-specific defaults (micro.rate) survive a merge.
    defaults = dataclasses.asdict(Config())
    merged = _merge(defaults, data)
    _drop_none(merged)
    src = source if not overrides else (f"{source} + --set" if source else "--set")
    return _build(Config, merged, "", src)


def with_settings(config: Config, settings: Mapping[str, Any]) -> Config:
    """`config` with some keys set to typed values (dotted keys), checked as a whole like a file."""
    data = dataclasses.asdict(config)
    for key, value in settings.items():
        _put(data, _known_key(key), value, None)
    _drop_none(data)
    return _build(Config, data, "", None)


def _known_key(key: str) -> list[str]:
    if key not in valid_keys():
        raise CepkitError(f"{key}: unknown config key (valid: {', '.join(valid_keys())})")
    return key.split(".")


def _put(data: dict, keys: list[str], value: Any, source: str | None) -> None:
    node = data
    for i, k in enumerate(keys[:-1]):
        node = node.setdefault(k, {})
        if not isinstance(node, dict):          # the file has `pairs = 3` and --set pairs.x=...
            raise at(source, ".".join(keys[:i + 1]), "must be a table (section)")
    node[keys[-1]] = value


def _drop_none(d: dict) -> None:
    for k in list(d):
        if isinstance(d[k], dict):
            _drop_none(d[k])
        elif d[k] is None:
            del d[k]


def write_config(config: Config, path: Path) -> None:
    """The resolved config as TOML at `path`, atomically and never over an existing file."""
    from kit.atomic import atomic_write
    atomic_write(Path(path), config.to_toml())
