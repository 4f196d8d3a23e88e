"""Reading and writing the kit's JSON documents (manifest, auxiliary file, output log, run record,
summaries, comparisons, cluster files, ...): the one writer and the one reader of every one.

Each file kind has its own model and checks (`kit.manifest`, `kit.workload.aux`, ...); this module
only turns bytes into a JSON object and back, so that every reader fails the same way: one
`CepkitError` line naming the file (and the line where the JSON parser knows it, or the key) for a
missing or unreadable file, a file that is not a regular one or is larger than its kind's cap
(`kit.inputs`), text that is not UTF-8, invalid JSON (NaN and Infinity included, which no other
JSON reader takes, and a number of more digits than Python converts), a document that is not an
object, and, with `read_document`, another `kind` or `schema_version` than the reader's.

Every document the kit writes goes through `dumps_json`/`write_json`, so that what one command
writes the next one reads: a number that is not finite (a mean over no samples, a rate over no
time) is written as null, the JSON spelling of "no value", which is how every reader takes an
absent figure; tuples are lists, paths and other objects their text.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from kit.errors import at
from kit.inputs import read_input_bytes


def read_json_object(path: str | os.PathLike, *, missing: str = "not found", what: str = "a JSON file",
                     kind: str = "json") -> dict:
    """The JSON object in `path`. `missing` is the message when the file does not exist (readers
    say what a missing file means, e.g. "not a cepkit dataset directory"); `what` names the file
    kind for a directory or other non-regular file given in its place ("a manifest file");
    `kind` is the document kind whose size cap applies (`kit.inputs.LIMITS`)."""
    path = Path(path)
    data = read_input_bytes(path, kind, what=what, missing=missing)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise at(path, data[:e.start].count(b"\n") + 1, "not UTF-8 text") from None
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise at(path, e.lineno, f"invalid JSON: {e.msg}") from None
    except _Constant as e:
        # Python's json accepts NaN and Infinity, which no other JSON reader does.
        raise at(path, None, f"invalid JSON: {e} is not a JSON number") from None
    except RecursionError:
        raise at(path, None, "invalid JSON: nested too deeply") from None
    except ValueError as e:
        # Python refuses to turn more than sys.get_int_max_str_digits() digits into an int.
        raise at(path, None, f"invalid JSON: a number too long to read ({e})") from None
    if not isinstance(doc, dict):
        raise at(path, 1, "expected a JSON object")
    return doc


def read_document(path: str | os.PathLike, kind: str, schema_version: int | tuple[int, ...], *,
                  missing: str = "not found", what: str = "a JSON file", cap: str = "json") -> dict:
    """`read_json_object`, then the document's `kind` must be `kind` and its `schema_version` one
    of `schema_version` (an integer, not true): another is one line naming the file and the key."""
    path = Path(path)
    doc = read_json_object(path, missing=missing, what=what, kind=cap)
    if doc.get("kind") != kind:
        raise at(path, "kind", f"expected {kind!r}, got {_show(doc.get('kind'))}")
    versions = schema_version if isinstance(schema_version, tuple) else (schema_version,)
    version = doc.get("schema_version")
    if type(version) is not int or version not in versions:
        raise at(path, "schema_version", f"expected {' or '.join(map(str, versions))}, got {_show(version)} "
                                         "(a file of another cepkit version?)")
    return doc


def _show(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


class _Constant(ValueError):
    pass


def _no_constant(name: str):
    raise _Constant(name)


def _plain(v):
    """`v` as JSON has it: non-finite numbers null, tuples lists, numpy values Python's, keys
    text, any other object its str() (a path)."""
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k if isinstance(k, str) else _key(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if type(v).__module__ == "numpy" and callable(getattr(v, "tolist", None)):
        return _plain(v.tolist())           # a numpy scalar or array: Python's numbers and lists
    return str(v)


def _key(k) -> str:
    # As json.dumps turns keys: numbers by their JSON text, None as "null".
    return json.dumps(_plain(k)) if not isinstance(k, str) and (k is None or isinstance(k, (bool, int, float))) \
        else str(k)


def dumps_json(doc, *, indent: int | None = 2) -> str:
    """`doc` as JSON text with a final newline (keys in the order given), every value one a
    JSON reader takes (module docstring); `indent=None`: one line (a JSON-lines record)."""
    # ensure_ascii (the default) keeps the bytes independent of the locale's encoding.
    return json.dumps(_plain(doc), indent=indent, allow_nan=False) + "\n"


def write_json(path: str | os.PathLike, doc: dict, *, indent: int | None = 2) -> Path:
    """Write `doc` (`dumps_json`) to `path`; returns the path.

    Not atomic: the generators write into a staging directory that is renamed when complete, and
    the harness into the run directory it owns (`kit.atomic.atomic_write` for the others)."""
    path = Path(path)
    path.write_text(dumps_json(doc, indent=indent), encoding="utf-8")
    return path
