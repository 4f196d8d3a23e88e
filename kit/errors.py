"""The one user-facing error type.

Everything a user can get wrong (a config key, a data file, an XML spec, an engine's output)
raises `CepkitError` with a single line that names the file and the line or field. The CLI
catches it once, prints the line and exits 2; tracebacks are shown only with `-v` (which keeps the
exit code). `describe_os_error` gives the same one line for an OSError that got that far.
"""

from __future__ import annotations

import os


class CepkitError(Exception):
    """A problem with the user's input; its message is one line and says where."""

    exit_code = 2

    def __init__(self, message: str):
        # Every line break Python knows (\r, \x0c, \u2028, ...), not just \n: the message stays one line.
        super().__init__(" ".join(str(message).splitlines()))


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


def describe_os_error(e: OSError) -> str:
    """`<file>: <reason>` (or `<file> -> <other file>: <reason>`) of an OSError, on one line."""
    def name(x) -> str:
        return os.fsdecode(x) if isinstance(x, (str, bytes, os.PathLike)) else str(x)

    reason = e.strerror or str(e) or type(e).__name__
    if e.filename is not None and getattr(e, "filename2", None) is not None:
        where = f"{name(e.filename)} -> {name(e.filename2)}: "
    elif e.filename is not None:
        where = f"{name(e.filename)}: "
    else:
        where = ""
    return " ".join(f"{where}{reason}".split("\n"))
