"""The one user-facing error type.

Everything a user can get wrong (a config key, a data file, an XML spec, an engine's output)
raises `CepkitError` with a single line that names the file and the line or field. The CLI
catches it once, prints the line and exits non-zero; tracebacks are shown only with `-v`.
"""

from __future__ import annotations

import os


class CepkitError(Exception):
    """A problem with the user's input; its message is one line and says where."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split("\n")))


def at(source: str | os.PathLike | None, where: int | str | None, message: str) -> CepkitError:
    """Build an error located at `source:where` (a line number or a field name)."""
    parts = []
    if source is not None:
        parts.append(os.fspath(source))
    if where is not None and where != "":
        parts.append(str(where))
    # "--set key: ..." reads better than "--set:key: ..." for command-line overrides.
    sep = " " if parts and parts[0].startswith("--") else ":"
    prefix = sep.join(parts)
    return CepkitError(f"{prefix}: {message}" if prefix else message)
