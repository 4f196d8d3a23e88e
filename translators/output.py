"""Writing a generated program: never over an existing file, never half-written (kit.atomic)."""

from __future__ import annotations

from pathlib import Path

from kit.atomic import atomic_write


def write_program(text: str, path: Path) -> Path:
    return atomic_write(Path(path), text)
