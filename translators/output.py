"""Writing a generated program: never over an existing file, never half-written."""

from __future__ import annotations

import os
from pathlib import Path

from kit.errors import CepkitError


def write_program(text: str, path: Path) -> Path:
    path = Path(path)
    if path.exists():
        raise CepkitError(f"{path}: already exists; refusing to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    try:
        os.link(tmp, path)  # fails if `path` appeared meanwhile: nothing is overwritten
    except FileExistsError:
        raise CepkitError(f"{path}: already exists; refusing to overwrite it") from None
    finally:
        tmp.unlink()
    return path
