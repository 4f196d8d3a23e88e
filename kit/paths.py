"""Fresh output paths: every output lands in a new file or directory, never over an earlier one.

`output_path` is how every command reads its `--out` (and `path_option` any optional path): unset
means a fresh path under the configured folder; given, it is used as is; empty is an error, never
the default.
"""

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


def path_option(given: str | None, option: str = "--out") -> str | None:
    """An `--out` value as given, None when unset; an empty or blank value (an unset shell
    variable, say) is refused rather than read as "unset": the user named an output and would not
    find it in the default folder."""
    from kit.errors import CepkitError

    if given is not None and not given.strip():
        raise CepkitError(f"{option}: must name a file or directory, got an empty value "
                          f"(leave {option} out for its default)")
    return given


def output_path(given: str | None, parent: Path, name: str, option: str = "--out") -> Path:
    """The command's output path: `given` (the `--out` value), or a fresh `parent/name` when unset."""
    given = path_option(given, option)
    return fresh_path(parent, name) if given is None else Path(given)
