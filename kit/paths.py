"""Fresh output paths: every output lands in a new file or directory, never over an earlier one."""

from __future__ import annotations

from pathlib import Path


def fresh_path(parent: Path, name: str) -> Path:
    """`parent/name`, or `stem-2.ext`, `stem-3.ext`, ... if taken: never an existing path.

    Every output (datasets, specs, runs, reports) goes to a fresh path so nothing written
    earlier is overwritten. The parent directory is created.
    """
    from kit.atomic import check_parent
    from kit.errors import CepkitError

    parent = Path(parent)
    check_parent(parent / name)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CepkitError(f"{parent}: cannot create the output directory: {e.strerror or e}") from None
    stem, suffix = Path(name).stem, Path(name).suffix
    if not suffix or suffix[1:].isdigit():  # a directory name like "pairs-sf1-seed42" has no extension
        stem, suffix = name, ""
    candidate, n = parent / name, 1
    while candidate.exists():
        n += 1
        candidate = parent / f"{stem}-{n}{suffix}"
    return candidate
