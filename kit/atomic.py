"""Outputs written atomically: the one place that opens an output for writing.

Nothing half-written survives a failure or a signal, and nothing existing is overwritten:

- `StagedDir(final)`: a context manager yielding a hidden staging directory next to `final`;
  on success it is renamed to `final`, on any exception (KeyboardInterrupt included: SIGINT,
  and under `cepkit` every other signal of `TERMINATION_SIGNALS`, raise it) it is removed.
- `atomic_open(path, mode)`: a context manager yielding a file object open on a hidden sibling
  temp file; on success its bytes are flushed to disk and the file appears at `path` in one step
  (a hard link, so an existing `path` is never replaced unless `overwrite=True`); on failure the
  temp file is removed. `atomic_write(path, data)` writes a str or bytes that way.
- Staging names are `.NAME.partial-<pid>-<host>-<random>` (`<host>` a short hash of the host
  name). A process killed outright (SIGKILL, power cut) cannot clean up; the next `StagedDir` or
  `atomic_open` in the same parent directory removes the leftovers of processes of this host
  that no longer exist (`remove_stale_partials`).
- The final rename and the clean-up run with every signal of `TERMINATION_SIGNALS` deferred
  (`deferred_signals`), so a second Ctrl-C or a SIGHUP cannot leave a half-removed staging
  directory behind. `TERMINATION_SIGNALS` is the one list of the catchable signals whose default
  action ends the process (specs/EXIT_CODES.md says why each is in or out); under `cepkit` each
  raises a KeyboardInterrupt, so every `with` block cleans up.
- An OSError without a file name raised while writing (ENOSPC from a buffered write, pyarrow's
  I/O errors) becomes a one-line CepkitError naming the output.
- `check_free_space(path, need_bytes, what)` refuses work that cannot fit on the output's
  filesystem before it starts.

Not staged, on purpose: the run directory of `cepkit pairs` / `cepkit micro` (harness). A failed
or interrupted run keeps its directory as partial results (logs, metrics, outputs so far); it is
marked by its status (`failed`, `unsustainable`, reason "interrupted") in `engine/run.json`, and
the next run goes to a new directory (`kit.paths.fresh_path`), so nothing blocks a retry.

`kit` is the floor: this module imports nothing of cepkit but `kit.errors`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from kit.errors import CepkitError

PARTIAL_MARK = ".partial-"
_PARTIAL_RE = re.compile(r"^\.(?P<name>.+)\.partial-(?P<pid>[0-9]+)-(?P<host>[0-9a-f]{6})-[A-Za-z0-9_]+$")


def _host_tag() -> str:
    return hashlib.blake2b(socket.gethostname().encode("utf-8", "replace"), digest_size=3).hexdigest()


def staging_prefix(name: str) -> str:
    """The prefix of a staging file or directory for the final name `name`."""
    return f".{name}{PARTIAL_MARK}{os.getpid()}-{_host_tag()}-"


def is_staging_name(name: str) -> bool:
    return _PARTIAL_RE.match(name) is not None


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError, OSError):
        return True         # someone else's process, or we cannot tell: leave it alone
    return True


def remove_stale_partials(parent: str | os.PathLike) -> list[Path]:
    """Remove staging leftovers in `parent` whose writer (a process of this host) no longer
    exists; returns what was removed. Never raises: a directory it cannot list or clean is left."""
    removed: list[Path] = []
    host = _host_tag()
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        m = _PARTIAL_RE.match(entry.name)
        if m is None or m["host"] != host or _pid_alive(int(m["pid"])):
            continue
        path = Path(entry.path)
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
        except OSError:
            pass
    return removed


def _termination_signals() -> tuple[signal.Signals | int, ...]:
    # Left out, on purpose: SIGKILL and SIGSTOP (cannot be caught); SIGPIPE and SIGXFSZ (Python
    # ignores both at start-up, so the write that would raise them fails instead, with EPIPE, which
    # the CLI's stream rule handles, or EFBIG, a one-line error naming the output); the signals of
    # a fault in the process itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT: a
    # Python handler would run after the faulting C code, if at all); the ones whose default is not
    # to end the process (SIGCHLD, SIGCONT, SIGURG, SIGWINCH, SIGTSTP, SIGTTIN, SIGTTOU).
    names = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGXCPU",
             "SIGVTALRM", "SIGPROF", "SIGIO", "SIGPOLL", "SIGPWR", "SIGLOST", "SIGEMT")
    found = dict.fromkeys(getattr(signal, n) for n in names if hasattr(signal, n))   # SIGPOLL is SIGIO on Linux
    realtime = range(signal.SIGRTMIN, signal.SIGRTMAX + 1) if hasattr(signal, "SIGRTMIN") else range(0)
    return (*found, *realtime)


# Every catchable signal whose default action ends the process and Python does not ignore
# (Linux: 13 named ones and the real-time ones).
TERMINATION_SIGNALS: tuple[signal.Signals | int, ...] = _termination_signals()


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold every signal of TERMINATION_SIGNALS for the duration of the block, then deliver them.

    Only the main thread can change signal handlers; elsewhere (and where a handler was installed
    outside Python) the block runs unprotected.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum, frame) -> None:
        caught.append(signum)

    previous: dict[int, Any] = {}
    for sig in TERMINATION_SIGNALS:
        old = signal.getsignal(sig)
        if old is None or old is signal.SIG_IGN:     # set outside Python, or ignored: nothing to hold
            continue
        try:
            previous[sig] = signal.signal(sig, hold)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        for sig in dict.fromkeys(caught):
            signal.raise_signal(sig)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Errors of writing (not of reading an input) that may come without a file name.
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO}


def _cannot_write(output: Path, e: OSError, tmp: Path | None = None) -> OSError | CepkitError:
    """An OSError raised while writing `output`, named after the output when it names only the
    staging path (gone by now) or no file at all (ENOSPC from a buffered write, pyarrow's I/O)."""
    name = e.filename
    staged = name is not None and tmp is not None and isinstance(name, (str, os.PathLike)) \
        and os.fspath(name).startswith(os.fspath(tmp))
    if staged or (name is None and e.errno in _WRITE_ERRNOS):
        reason = e.strerror or str(e) or type(e).__name__
        if e.errno == errno.ENOSPC:
            reason = "no space left on device"
        return CepkitError(f"{output}: cannot write the output: {reason}")
    return e


def _existing_ancestor(path: Path) -> Path:
    p = Path(os.path.abspath(path))
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def check_parent(output: str | os.PathLike) -> None:
    """Refuse (one line naming `output`) a place where `output` cannot be created: its nearest
    existing ancestor is not a directory, or not writable (a read-only filesystem, /proc)."""
    output = Path(output)
    anc = _existing_ancestor(output.parent)
    if not anc.is_dir():
        raise CepkitError(f"{output}: cannot create it: {anc} is not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise CepkitError(f"{output}: cannot create it: {anc} is not writable")


def _make_parents(output: Path) -> list[Path]:
    """Create the missing parent directories of `output`; returns those created (outermost first),
    so a failure can take them away again."""
    check_parent(output)
    missing: list[Path] = []
    p = Path(os.path.abspath(output.parent))
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    created: list[Path] = []
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:
            if not d.is_dir():
                _remove_dirs(created)
                raise CepkitError(f"{output}: cannot create it: {d} is not a directory") from None
            continue
        except OSError as e:
            _remove_dirs(created)
            raise CepkitError(f"{output}: cannot create the directory {d}: {e.strerror or e}") from None
        created.append(d)
    return created


def _remove_dirs(created: list[Path]) -> None:
    """Remove directories `_make_parents` created, innermost first, as long as they are empty."""
    for d in reversed(created):
        try:
            os.rmdir(d)
        except OSError:
            return


class StagedDir:
    """Write a directory into a staging dir next to `final`; rename on success, delete on failure.

    The constructor refuses an existing `final` and a place where it cannot be created (a parent
    that is a file, a read-only location), before any work. `__enter__` creates the missing parent
    directories, removes stale staging leftovers there and returns the staging directory. On
    failure the staging directory and the parents it created are removed; an OSError of writing
    (ENOSPC, ...) becomes a CepkitError naming `final`.
    """

    def __init__(self, final: str | os.PathLike):
        self.final = Path(final)
        self.tmp: Path | None = None
        self._created: list[Path] = []
        if os.path.lexists(self.final):
            raise CepkitError(f"{self.final}: output directory already exists; refusing to overwrite it")
        check_parent(self.final)

    def __enter__(self) -> Path:
        parent = self.final.parent
        self._created = _make_parents(self.final)
        remove_stale_partials(parent)
        try:
            self.tmp = Path(tempfile.mkdtemp(prefix=staging_prefix(self.final.name), dir=parent))
        except OSError as e:
            _remove_dirs(self._created)
            raise CepkitError(f"{self.final}: cannot write here: {e.strerror or e}") from None
        return self.tmp

    def _discard(self) -> None:
        """Remove the staging dir and the parent directories this output created."""
        with deferred_signals():
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)
            _remove_dirs(self._created)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._discard()
            if isinstance(exc, OSError):
                translated = _cannot_write(self.final, exc, self.tmp)
                if translated is not exc:
                    raise translated from exc
            return False
        try:
            with deferred_signals():
                if os.path.lexists(self.final):
                    raise CepkitError(f"{self.final}: appeared while writing it; refusing to overwrite it")
                # mkdtemp makes the staging dir owner-only; the output gets the usual permissions.
                os.chmod(self.tmp, 0o777 & ~_umask())
                os.rename(self.tmp, self.final)
        except BaseException:
            self._discard()
            raise
        return False


def _publish(tmp: Path, path: Path, overwrite: bool) -> None:
    """Make the finished temp file appear at `path` in one step (never over a file unless
    `overwrite`); the temp name is gone afterwards."""
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise CepkitError(f"{path}: file already exists; refusing to overwrite it") from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        # A filesystem without hard links: check, then rename (a tiny window, but never half-written).
        if os.path.lexists(path):
            raise CepkitError(f"{path}: file already exists; refusing to overwrite it") from None
        os.rename(tmp, path)
        return
    os.unlink(tmp)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", *, overwrite: bool = False,
                encoding: str | None = "utf-8", newline: str | None = None) -> Iterator[IO]:
    """A file open for writing whose content appears at `path` only when the block succeeds.

    `mode` is "w" (text, `encoding`) or "wb". An existing `path` is refused up front (CepkitError)
    unless `overwrite` is true. Parent directories are created.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    if not overwrite and os.path.lexists(path):
        raise CepkitError(f"{path}: file already exists; refusing to overwrite it")
    if os.path.isdir(path):
        raise CepkitError(f"{path}: is a directory; cannot write a file there")
    created = _make_parents(path)
    remove_stale_partials(path.parent)
    try:
        fd, name = tempfile.mkstemp(prefix=staging_prefix(path.name), dir=path.parent)
    except OSError as e:
        _remove_dirs(created)
        raise CepkitError(f"{path}: cannot write here: {e.strerror or e}") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": encoding, "newline": newline})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        with deferred_signals():
            _publish(tmp, path, overwrite)
    except BaseException as e:
        with deferred_signals():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            _remove_dirs(created)
        if isinstance(e, OSError):
            translated = _cannot_write(path, e, tmp)
            if translated is not e:
                raise translated from e
        raise


def atomic_write(path: str | os.PathLike, data: str | bytes, *, overwrite: bool = False,
                 encoding: str = "utf-8") -> Path:
    """Write `data` (str or bytes) to `path` atomically; never over an existing file unless
    `overwrite`. Returns the path."""
    with atomic_open(path, "wb" if isinstance(data, (bytes, bytearray, memoryview)) else "w",
                     overwrite=overwrite, encoding=encoding) as fh:
        fh.write(data)
    return Path(path)


# --- room on the output's filesystem ---------------------------------------------------------

def free_bytes(path: str | os.PathLike) -> int:
    """Free bytes (for this user) on the filesystem that holds, or will hold, `path`."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError as e:
        raise CepkitError(f"{path}: cannot tell the free space of its filesystem: {e.strerror or e}") from None


def human_bytes(n: float) -> str:
    """1234567 -> '1.2 MB' (decimal units, as df -H)."""
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB", "EB"):
        if abs(n) < 1000 or unit == "EB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} EB"


def check_free_space(path: str | os.PathLike, need_bytes: float, *, what: str = "output",
                     detail: str = "", free: int | None = None) -> int:
    """Refuse (CepkitError) an output of about `need_bytes` that the free space on `path`'s
    filesystem cannot hold; `free` overrides the measured free bytes (tests). Returns the free
    bytes."""
    available = free_bytes(path) if free is None else int(free)
    if need_bytes > available:
        how = f" ({detail})" if detail else ""
        raise CepkitError(f"{path}: the {what} needs about {human_bytes(need_bytes)}{how} but only "
                          f"{human_bytes(available)} is free on its filesystem; free some space, choose "
                          f"another --out, or make it smaller")
    return available
