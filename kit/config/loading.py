"""Loading a config: defaults, then a TOML file, then `--set section.key=value` overrides, then a
command's own options as typed values, checked as a whole. Unknown keys are refused with the list
of valid ones; a bad value names the file and the dotted key.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kit.config.limits import UNSET_WORDS, FieldError, range_text
from kit.config.sections import (ARRIVALS, CONFIG_KIND, CONFIG_SCHEMA_VERSION, DATABASE_JOIN_PLANS, FOLDED_WORK, FORMATS,
                                 LAUNCHES, PLANS, PROFILES, REPLAYS, STAMPS, TRIGGERS, WORK_PLANS, CONNECTORS,
                                 Config)
from kit.engines import ENGINE_NAMES
from kit.errors import CepkitError, at
from kit.inputs import LIMITS, read_input_bytes


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


# Which names a string key must be one of (for `cepkit config keys`).
_CHOICES = {"RateConfig.profile": PROFILES, "RateConfig.arrivals": ARRIVALS, "PairsConfig.format": FORMATS,
            "MicroConfig.format": FORMATS, "RunConfig.engine": ENGINE_NAMES, "RunConfig.plan": PLANS,
            "RunConfig.stamp": STAMPS, "RunConfig.replay": REPLAYS, "RunConfig.output_format": FORMATS,
            "RunConfig.work": WORK_PLANS, "RunConfig.database_join": DATABASE_JOIN_PLANS,
            "RunConfig.trigger": TRIGGERS, "RunConfig.connectors": CONNECTORS,
            "RunConfig.launch": LAUNCHES}


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
            kind = f"one of {', '.join(choices)}"
        text = ", ".join(filter(None, (kind, range_text(cls.__name__, name), "or auto" if optional else None)))
        out.append((prefix + name, text))
    return out


def _coerce(value: Any, tp: Any, key: str, source: str | None) -> Any:
    optional = False
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional, tp = True, args[0]
    if value is None or (optional and isinstance(value, str) and value.lower() in UNSET_WORDS):
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


def _unknown_text(key: str) -> str:
    if key.startswith("run.") and key[4:] in FOLDED_WORK:
        return f"was folded into run.work (one of {', '.join(WORK_PLANS)}; specs/TRANSLATION.md, \"Plan families\")"
    return f"unknown config key (valid: {', '.join(valid_keys())})"


def _fold(data: dict, source: str | None) -> dict:
    """A run section with keys folded into run.work: an old default is dropped (a config a
    previous version wrote still loads); any other old value names the run.work that replaces it."""
    data = dict(data)
    for old, values in FOLDED_WORK.items():
        if old not in data:
            continue
        value = data.pop(old)
        if value not in values:
            raise at(source, "run." + old, f"was folded into run.work (one of {', '.join(WORK_PLANS)})")
        work = values[value]
        if work is not None and data.get("work", work) != work:
            raise at(source, "run." + old, f"= {value!r} was folded into run.work = {work!r}, "
                                           f"which contradicts run.work = {data['work']!r}")
        if work is not None:
            data["work"] = work
    return data


def _build(cls: type, data: dict, prefix: str, source: str | None) -> Any:
    hints = _hints(cls)
    if prefix == "run.":
        data = _fold(data, source)
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
        raise CepkitError(f"--set {key}: {_unknown_text(key)}")
    if "\n" in raw or "\r" in raw:
        raise CepkitError(f"--set {key}: the value must be one line, got {raw!r}")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return key.split("."), raw          # not a TOML literal: the bare text, whole
    # Read as TOML, a value may end before the text does (`2 # note`, `"a" # b`): what follows would
    # be dropped without a word. Inside brackets a comment leaves them unclosed, so the whole text
    # is one value exactly when `[text]` is an array of one element.
    try:
        whole = tomllib.loads(f"v = [{raw}]")["v"]
    except tomllib.TOMLDecodeError:
        whole = None
    if whole is None or len(whole) != 1:
        raise CepkitError(f"--set {key}: {raw!r}: text after the value {value!r} would be dropped "
                          f"(a comment?); quote the whole value as a TOML string to keep it")
    return key.split("."), value


# A config is a few kB; anything much larger is not one (and /dev/zero must not fill the memory).
# The cap lives in kit.inputs.LIMITS with every other input's; the name stays for its importers.
MAX_CONFIG_BYTES = LIMITS["config"]


def _read_toml(source: str, missing: str = "config file not found") -> dict:
    """The TOML table of the config file `source`; every way it cannot be read is one line
    naming the file."""
    raw = read_input_bytes(source, "config", what="a config file", missing=missing)
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
    except ValueError as e:
        # Python refuses to turn more than sys.get_int_max_str_digits() digits into an int.
        raise CepkitError(f"{source}: invalid TOML: a number too long to read ({e})") from None


def read_config_document(path: str | os.PathLike, *, missing: str = "config file not found") -> dict:
    """The TOML table of a config file (`-c FILE`, a run directory's config.toml) without its
    header: `kind` and `schema_version`, when present, must be a config's (a config written by
    hand may leave them out). Every way it cannot be read is one line naming the file and key."""
    source = os.fspath(path)
    data = _read_toml(source, missing)
    kind = data.pop("kind", CONFIG_KIND)
    version = data.pop("schema_version", CONFIG_SCHEMA_VERSION)
    if kind != CONFIG_KIND:
        raise at(source, "kind", f"expected {CONFIG_KIND!r}, got {kind!r}")
    if type(version) is not int or version != CONFIG_SCHEMA_VERSION:
        raise at(source, "schema_version", f"expected {CONFIG_SCHEMA_VERSION}, got {version!r}")
    return data


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | tuple[str, ...] = (),
                settings: Mapping[str, Any] | None = None) -> Config:
    """Defaults, then the TOML file (if any), then each `--set` override (text, read as TOML), then
    `settings` (typed values by dotted key, e.g. {"pairs.scale_factor": 4} from a command's own
    options), checked as a whole."""
    data: dict = {}
    source = None
    if path is not None:
        source = os.fspath(path)
        data = read_config_document(source)
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
        raise CepkitError(f"{key}: {_unknown_text(key)}")
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
