"""Typed configuration: a TOML file plus `--set section.key=value` overrides and a command's own
options, loaded once per command into a frozen `Config`.

- sections.py: the sections (frozen dataclasses that check themselves) and the names each choice
  may take;
- limits.py: the one table of numeric ranges and the one value check;
- loading.py: reading, merging and checking a config as a whole; writing it back.

Everything is imported from here (`from kit.config import load_config, Config, PLANS`).
"""

from kit.config.limits import (DAY_S, INT32_MAX, INT64_MAX, LIMITS, MAX_DURATION_S, MAX_FILES, MAX_PEAK_FACTOR,
                               MAX_RATE_EPS, MAX_SCALE_FACTOR, MAX_ZIPF_ID, MAX_START_EPOCH_MS, MAX_STRATEGIES, MAX_SYMBOLS,
                               MIN_DURATION_S, FieldError, memory_mib, range_text)
from kit.config.loading import (MAX_CONFIG_BYTES, describe_keys, load_config, parse_override, read_config_document,
                                valid_keys, with_settings, write_config)
from kit.config.sections import (ARRIVALS, CONFIG_KIND, CONFIG_SCHEMA_VERSION, DATABASE_JOIN_PLANS, FOLDED_WORK,
                                 DEFAULT_START_EPOCH_MS, FORMATS, LAUNCHES, PLANS, PROFILES, REPLAYS, STAMPS,
                                 WORK_PLANS,
                                 TRIGGERS, CONNECTORS, Config, MicroConfig, PairsConfig, PathsConfig, PriceConfig, RateConfig, RunConfig)

__all__ = [
    "DAY_S", "INT32_MAX", "INT64_MAX", "LIMITS", "MAX_DURATION_S", "MAX_FILES", "MAX_PEAK_FACTOR", "MAX_RATE_EPS",
    "MAX_SCALE_FACTOR", "MAX_ZIPF_ID", "MAX_START_EPOCH_MS", "MAX_STRATEGIES", "MAX_SYMBOLS", "MIN_DURATION_S", "FieldError", "memory_mib",
    "range_text", "MAX_CONFIG_BYTES", "describe_keys", "load_config", "parse_override", "read_config_document", "valid_keys", "with_settings",
    "write_config", "ARRIVALS", "CONFIG_KIND", "CONFIG_SCHEMA_VERSION", "DATABASE_JOIN_PLANS", "FOLDED_WORK",
    "CONNECTORS", "DEFAULT_START_EPOCH_MS", "FORMATS", "LAUNCHES", "PLANS", "PROFILES", "REPLAYS", "STAMPS", "TRIGGERS", "WORK_PLANS", "Config",
    "MicroConfig", "PairsConfig", "PathsConfig", "PriceConfig", "RateConfig", "RunConfig",
]
