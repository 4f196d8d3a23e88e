"""Reading and writing the kit's JSON documents (manifest, auxiliary file, output log, ...).

Each file kind has its own model and checks (`kit.manifest`, `kit.workload.aux`, ...); this module
only turns bytes into a JSON object and back, so that every reader fails the same way: one
`CepkitError` line naming the file (and the line where the JSON parser knows it) for a missing or
unreadable file, a file that is not a regular one or is larger than its kind's cap (`kit.inputs`),
text that is not UTF-8, invalid JSON, or a document that is not an object.
"""

from __future__ import annotations

import json
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
    if not isinstance(doc, dict):
        raise at(path, 1, "expected a JSON object")
    return doc


class _Constant(ValueError):
    pass


def _no_constant(name: str):
    raise _Constant(name)


def write_json(path: str | os.PathLike, doc: dict) -> None:
    """Write `doc` as indented JSON with a final newline (keys in the order given).

    Not atomic: the generators write into a staging directory that is renamed when complete."""
    # ensure_ascii (the default) keeps the bytes independent of the locale's encoding.
    Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")

