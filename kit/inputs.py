"""Opening the files the kit reads by name: regular files only, documents read under a size cap.

Every input a user names (a config, an XML spec, a manifest, an auxiliary file, an output log's
JSON, a run record, a data file) comes through here, so that every reader refuses the same
things the same way, with one `CepkitError` line naming the path (specs/DATA.md, "Inputs"):

- only a regular file is read (a symbolic link to one is fine): a directory, FIFO, socket or
  device is refused after an `fstat` of a descriptor opened with `O_NONBLOCK`, so neither opening
  a FIFO with no writer nor reading a terminal or `/dev/zero` can block or run on forever;
- a document (`read_input_bytes`) is read with its kind's cap from `LIMITS`, enforced while
  reading: at most cap + 1 bytes are ever read, so a huge or endless file costs cap + 1 bytes of
  memory, never the whole file;
- data files (CSV, Parquet) are big by nature: `require_regular` checks the kind of file only,
  and the reader then opens it itself.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kit.errors import at

KiB, MiB = 1 << 10, 1 << 20

# The largest file of each document kind the kit reads; each is far above what the kit writes for
# the largest scale (SF 10,000: 250,000 strategies of ~200 bytes in XML; a manifest or an output
# log lists at most some 100,000 files of ~250 bytes) and far below what would strain the machine
# once parsed. Pinned in words in specs/DATA.md, "Inputs".
LIMITS: dict[str, int] = {
    "config": 1 * MiB,          # a TOML config: a few kB
    "spec": 128 * MiB,          # an XML spec: strategies, workload or suite
    "manifest": 64 * MiB,       # a dataset's manifest.json
    "aux": 64 * MiB,            # pairs-aux.json: symbols and correlated pairs
    "output-log": 64 * MiB,     # an output log's output-log.json
    "run": 16 * MiB,            # the harness's run.json
    "json": 64 * MiB,           # any other JSON document (summaries, comparisons, cluster files)
    "secret": 64 * KiB,         # a DSN file (run.database_dsn), a cluster's client settings (credentials/)
}

_CHUNK = 1 * MiB


def size_text(n: int) -> str:
    """1048576 -> "1024 KiB", 134217728 -> "128 MiB" (how a cap is named in an error)."""
    return f"{n // MiB} MiB" if n >= 2 * MiB else f"{n // KiB} KiB"


def _open_regular(path: Path, what: str, missing: str) -> int:
    """A read-only descriptor on `path`, which must be a regular file (module docstring)."""
    try:
        # O_NONBLOCK: opening a FIFO without a writer must not wait for one; the kind of file is
        # checked on the descriptor (no race between a stat and the open).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise at(path, None, f"{missing}: a dangling symbolic link (to {os.readlink(path)!r}, "
                                 "which does not exist)") from None
        raise at(path, None, missing) from None
    except IsADirectoryError:
        raise at(path, None, f"is a directory, not {what}") from None
    except NotADirectoryError:
        raise at(path, None, f"{missing} (a part of the path is not a directory)") from None
    except PermissionError:
        raise at(path, None, "cannot read: permission denied") from None
    except OSError as e:
        # A socket cannot be opened at all (ENXIO): name what it is rather than the errno.
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise at(path, None, f"{_kind_of(mode)}, not {what}") from None
        raise at(path, None, f"cannot read: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise at(path, None, f"{_kind_of(mode)}, not {what}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device"
    return "is not a regular file"


def require_regular(path: str | os.PathLike, *, what: str = "a data file", missing: str = "not found") -> Path:
    """`path` if it is a regular file (or a link to one); else one line naming it. For data files,
    which their readers (pyarrow, csv) then open themselves."""
    p = Path(path)
    os.close(_open_regular(p, what, missing))
    return p


def read_input_bytes(path: str | os.PathLike, kind: str, *, what: str | None = None,
                     missing: str = "not found") -> bytes:
    """The bytes of the document `path` of `kind` (a key of `LIMITS`): a regular file of at most
    `LIMITS[kind]` bytes, read with that cap enforced while reading. `what` names the kind in
    errors ("a manifest file"); `missing` is the message for a file that does not exist."""
    cap = LIMITS[kind]
    what = what or f"a {kind} file"
    p = Path(path)
    fd = _open_regular(p, what, missing)
    parts, size = [], 0
    try:
        with os.fdopen(fd, "rb", buffering=0) as fh:
            while size <= cap:
                block = fh.read(min(_CHUNK, cap + 1 - size))
                if not block:
                    break
                parts.append(block)
                size += len(block)
    except OSError as e:
        raise at(p, None, f"cannot read: {e.strerror or e}") from None
    if size > cap:
        raise at(p, None, f"not {what}: larger than {size_text(cap)}")
    return b"".join(parts)
