"""What a config value may be: the one table of numeric ranges (LIMITS), the one check of a section's
values (finite numbers within range, text without NUL or lone surrogates), and the errors a
section raises (`FieldError`, which the loader locates at the file and dotted key).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing
from typing import Any

from kit.errors import CepkitError


class FieldError(CepkitError):
    """A bad value of one field; the loader prefixes the file and the dotted key."""

    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field_name = field_name
        self.message = message


def need(cond: bool, name: str, message: str) -> None:
    if not cond:
        raise FieldError(name, message)


def positive(obj: Any, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if v is not None:
            need(v > 0, n, f"must be > 0, got {v!r}")


def choice(obj: Any, name: str, choices: tuple[str, ...]) -> None:
    v = getattr(obj, name)
    need(v in choices, name, f"must be one of {', '.join(choices)}, got {v!r}")


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
# The most IDs a bounded Zipf law draws from (zipf_s > 0): datagen's sampler keeps a table per ID.
MAX_ZIPF_ID = 50_000_000

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
        "source_partitions": (0, 10_000, False),
        "max_rows_per_batch": (0, 2**31 - 1, False),
        "buckets": (0, 100_000, False),
        "trigger_ms": (0, DAY_S * 1000, False),
        "realtime_batch_ms": (100, DAY_S * 1000, False),
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
        "max_restarts": (0, 1000, False),
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

# How a config says "unset" for an optional key (`--set run.worker_python=auto`, or in a file): the
# reader takes these words (any case) so. An optional text is therefore never one of them, or a
# config holding it would not read back (kit.config.loading.write_config, load_config).
UNSET_WORDS = ("auto", "none", "")


@functools.lru_cache(maxsize=None)
def _optional_text(cls: type) -> frozenset[str]:
    """The fields of `cls` typed `str | None`."""
    return frozenset(name for name, tp in typing.get_type_hints(cls).items()
                     if set(typing.get_args(tp)) == {str, type(None)})


def check_values(obj: Any) -> None:
    """The one check of a section's numbers (finite, within LIMITS) and strings (no NUL)."""
    limits = LIMITS.get(type(obj).__name__, {})
    for f in dataclasses.fields(obj):
        name, v = f.name, getattr(obj, f.name)
        if isinstance(v, (str, tuple)):
            for text in (v,) if isinstance(v, str) else v:
                if isinstance(text, str):
                    need("\0" not in text, name, "must not contain a NUL character")
                    need(not _SURROGATE.search(text), name, "must be valid Unicode text (it has a lone surrogate, "
                                                           "e.g. from bytes that are not UTF-8)")
            if isinstance(v, str) and v and v.lower() in UNSET_WORDS and name in _optional_text(type(obj)):
                raise FieldError(name, f"{v!r} is the word for unset here (a config reads it so); "
                                       "leave the key out to unset it")
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if isinstance(v, float):
            need(math.isfinite(v), name, f"must be a finite number, got {v!r}")
        if name not in limits:
            continue
        lo, hi, lo_open = limits[name]
        if lo < 0:
            need(lo <= v <= hi, name, f"must be in [{_num(lo)}, {_num(hi)}], got {v!r}")
            continue
        need(v > lo if lo_open else v >= lo, name, f"must be {'>' if lo_open else '>='} {_num(lo)}, got {v!r}")
        need(v <= hi, name, f"must be <= {_num(hi)}, got {v!r}")


_MEMORY = re.compile(r"([1-9][0-9]*)([kmgt])b?", re.IGNORECASE)
_MIB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 ** 2}


def memory_mib(text) -> float | None:
    """A JVM memory size as Spark takes it (4g, 2048m, 512M, 1gb) in MiB; None if it is not one."""
    m = _MEMORY.fullmatch(text) if isinstance(text, str) else None
    return None if m is None else int(m[1]) * _MIB[m[2].lower()]
