"""kit.atomic: outputs appear complete or not at all, never over an existing file; stale staging
leftovers are cleaned; a full disk is one line naming the output; the free-space estimate."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kit import atomic
from kit.atomic import (TERMINATION_SIGNALS, StagedDir, atomic_open, atomic_write, check_free_space, deferred_signals,
                        remove_stale_partials, staging_prefix)
from kit.errors import CepkitError

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# --- single files -----------------------------------------------------------------------------

def test_atomic_write_text_and_bytes(tmp_path):
    assert atomic_write(tmp_path / "a" / "b.txt", "héllo\n") == tmp_path / "a" / "b.txt"
    atomic_write(tmp_path / "c.bin", b"\x00\xff")
    assert (tmp_path / "a" / "b.txt").read_text(encoding="utf-8") == "héllo\n"
    assert (tmp_path / "c.bin").read_bytes() == b"\x00\xff"
    assert listing(tmp_path) == ["a", "a/b.txt", "c.bin"]           # no temp file left
    mode = (tmp_path / "c.bin").stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_atomic_write_never_overwrites_unless_asked(tmp_path):
    target = tmp_path / "x.txt"
    target.write_text("old")
    with pytest.raises(CepkitError, match=r"x\.txt: file already exists; refusing to overwrite it$"):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    atomic_write(target, "new", overwrite=True)
    assert target.read_text() == "new" and listing(tmp_path) == ["x.txt"]


def test_atomic_open_failure_leaves_nothing_not_even_the_parents(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_open(tmp_path / "new" / "deeper" / "f.txt") as fh:
            fh.write("half")
            raise RuntimeError("boom")
    assert listing(tmp_path) == []
    with pytest.raises(KeyboardInterrupt):
        with atomic_open(tmp_path / "f.txt", "wb") as fh:
            fh.write(b"half")
            raise KeyboardInterrupt
    assert listing(tmp_path) == []


def test_enospc_at_the_lowest_layer_is_one_line_naming_the_output(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(CepkitError) as err:
        atomic_write(tmp_path / "out.xml", "x" * 1000)
    assert str(err.value) == f"{tmp_path / 'out.xml'}: cannot write the output: no space left on device"
    assert listing(tmp_path) == []


def test_write_error_in_the_body_is_named_after_the_output(tmp_path):
    with pytest.raises(CepkitError, match=r"out\.txt: cannot write the output: no space left on device"):
        with atomic_open(tmp_path / "out.txt") as fh:
            fh.write("x")
            raise OSError(errno.ENOSPC, "No space left on device")
    # An error about another file (an input) keeps its own name.
    with pytest.raises(FileNotFoundError):
        with atomic_open(tmp_path / "out.txt"):
            open(tmp_path / "missing-input")
    assert listing(tmp_path) == []


def test_impossible_places_are_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CepkitError, match=r"file/x\.txt: cannot create it: .*file is not a directory$"):
        atomic_write(tmp_path / "file" / "x.txt", "y")
    with pytest.raises(CepkitError, match=r"^/proc/self/x\.txt: cannot create it: /proc/self is not writable$"):
        atomic_write("/proc/self/x.txt", "y")
    (tmp_path / "d").mkdir()
    with pytest.raises(CepkitError, match="already exists"):
        atomic_write(tmp_path / "d", "y")
    assert listing(tmp_path) == ["d", "file"]


# --- directories ------------------------------------------------------------------------------

def test_staged_dir_renames_on_success(tmp_path):
    final = tmp_path / "sub" / "ds"
    with StagedDir(final) as tmp:
        assert tmp.parent == final.parent and tmp.name.startswith(staging_prefix("ds"))
        (tmp / "f").write_text("1")
        assert not final.exists()
    assert (final / "f").read_text() == "1"
    assert listing(tmp_path) == ["sub", "sub/ds", "sub/ds/f"]
    umask = os.umask(0)
    os.umask(umask)
    assert final.stat().st_mode & 0o777 == 0o777 & ~umask


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_staged_dir_removed_on_failure_with_the_parents_it_made(tmp_path, exc):
    with pytest.raises(exc):
        with StagedDir(tmp_path / "a" / "b" / "ds") as tmp:
            (tmp / "half.parquet").write_bytes(b"PAR1")
            raise exc()
    assert listing(tmp_path) == []


def test_staged_dir_refuses_existing_and_impossible(tmp_path):
    (tmp_path / "ds").mkdir()
    with pytest.raises(CepkitError, match="output directory already exists; refusing to overwrite it"):
        StagedDir(tmp_path / "ds")
    (tmp_path / "file").write_text("x")
    with pytest.raises(CepkitError, match="cannot create it: .*file is not a directory"):
        StagedDir(tmp_path / "file" / "ds")
    with pytest.raises(CepkitError, match="/proc/self is not writable"):
        StagedDir("/proc/self/ds")


def test_staged_dir_enospc_is_named_after_the_final_dir(tmp_path):
    with pytest.raises(CepkitError, match=r"ds: cannot write the output: no space left on device$"):
        with StagedDir(tmp_path / "ds"):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert listing(tmp_path) == []


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_partials_of_dead_processes_are_removed(tmp_path):
    host = atomic._host_tag()
    dead = _dead_pid()
    stale_dir = tmp_path / f".ds.partial-{dead}-{host}-abc123"
    stale_dir.mkdir()
    (stale_dir / "half").write_text("x")
    stale_file = tmp_path / f".s.xml.partial-{dead}-{host}-zz_9"
    stale_file.write_text("x")
    alive = tmp_path / f".ds.partial-{os.getpid()}-{host}-abc"
    alive.mkdir()
    pid1 = tmp_path / f".ds.partial-1-{host}-abc"          # init: alive
    pid1.mkdir()
    other_host = tmp_path / f".ds.partial-{dead}-{'0' * 6 if host != '0' * 6 else '1' * 6}-abc"
    other_host.mkdir()
    unrelated = tmp_path / ".ds.partial-notapid"
    unrelated.mkdir()
    with StagedDir(tmp_path / "new"):
        pass
    left = set(os.listdir(tmp_path))
    assert stale_dir.name not in left and stale_file.name not in left
    assert {alive.name, pid1.name, other_host.name, unrelated.name, "new"} <= left
    assert remove_stale_partials(tmp_path / "missing") == []


def test_sigkill_leftover_is_cleaned_by_the_next_command(tmp_path):
    """A writer killed outright leaves its staging dir; the next StagedDir in that parent removes it."""
    code = ("import os, sys, time; from kit.atomic import StagedDir\n"
            "with StagedDir(sys.argv[1]) as tmp:\n"
            "    (tmp / 'half').write_text('x'); print(tmp, flush=True); time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "ds")], stdout=subprocess.PIPE, text=True)
    staging = Path(p.stdout.readline().strip())
    assert staging.is_dir()
    p.kill()
    p.wait()
    p.stdout.close()
    assert staging.is_dir() and not (tmp_path / "ds").exists()     # SIGKILL: nothing could clean up
    with StagedDir(tmp_path / "ds") as tmp:
        (tmp / "f").write_text("ok")
    assert sorted(os.listdir(tmp_path)) == ["ds"]


@pytest.mark.parametrize("sig", TERMINATION_SIGNALS, ids=lambda s: signal.Signals(s).name
                         if s in signal.Signals.__members__.values() else f"SIG{s}")
def test_deferred_signals_hold_then_deliver(sig):
    seen = []

    def handler(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt
    old = signal.signal(sig, handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with deferred_signals():
                os.kill(os.getpid(), sig)
                for _ in range(1000):       # give the handler every chance to run (it must not)
                    pass
                assert seen == []
        assert seen == [sig]
        assert signal.getsignal(sig) is handler
    finally:
        signal.signal(sig, old)


def test_the_termination_signals_are_every_catchable_one_that_ends_the_process():
    """The list of specs/EXIT_CODES.md: named ones, the real-time ones; not SIGPIPE/SIGXFSZ, faults, stops."""
    names = {signal.Signals(s).name for s in TERMINATION_SIGNALS if s in signal.Signals.__members__.values()}
    assert {"SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTERM", "SIGXCPU", "SIGVTALRM",
            "SIGPROF", "SIGIO", "SIGPWR"} <= names
    assert not names & {"SIGKILL", "SIGSTOP", "SIGPIPE", "SIGXFSZ", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL",
                        "SIGABRT", "SIGCHLD", "SIGCONT", "SIGWINCH", "SIGTSTP"}
    assert set(range(signal.SIGRTMIN, signal.SIGRTMAX + 1)) <= set(TERMINATION_SIGNALS)


# --- a real full disk ---------------------------------------------------------------------------

@pytest.fixture
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs, if this process may mount one (root in most containers)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill ({res.stderr.strip() or 'mount failed'}); "
                    "the ENOSPC paths are covered by the monkeypatched tests")
    try:
        yield mnt
    finally:
        import gc
        gc.collect()            # writers dropped by a failed write may still hold a file open
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_real_enospc_file_and_dir(tiny_fs):
    with pytest.raises(CepkitError, match=r"big\.bin: cannot write the output: no space left on device$"):
        atomic_write(tiny_fs / "big.bin", os.urandom(200_000))
    assert os.listdir(tiny_fs) == []
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    with pytest.raises(CepkitError, match=r"ds: cannot write the output: no space left on device$"):
        with StagedDir(tiny_fs / "ds") as tmp:
            pq.write_table(pa.table({"a": np.random.default_rng(1).random(100_000)}), tmp / "a.parquet")
    assert os.listdir(tiny_fs) == []


def test_cli_on_a_full_disk_is_one_line_and_leaves_nothing(tiny_fs, monkeypatch, capsys):
    from cepkit_app.cli import main
    import datagen.pairs
    # The free-space check refuses it up front ...
    assert main(["datagen", "pairs", "--set", "pairs.rate.duration_s=5", "--out", str(tiny_fs / "ds")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the dataset needs about" in err and "is free on its filesystem" in err
    # ... and a write that fails anyway (the estimate is only an estimate) is one line too.
    monkeypatch.setattr(datagen.pairs, "check_room", lambda *a, **k: None)
    assert main(["datagen", "pairs", "--set", "pairs.rate.duration_s=5", "--out", str(tiny_fs / "ds")]) == 2
    assert capsys.readouterr().err == \
        f"cepkit: error: {tiny_fs / 'ds'}: cannot write the output: no space left on device\n"
    assert os.listdir(tiny_fs) == []


# --- free space -------------------------------------------------------------------------------

def test_check_free_space(tmp_path):
    assert check_free_space(tmp_path / "a" / "b", 10, free=10) == 10
    with pytest.raises(CepkitError) as err:
        check_free_space(tmp_path / "out", 4.5e9, what="dataset", detail="1,000 ticks", free=1_200_000_000)
    assert str(err.value).startswith(f"{tmp_path / 'out'}: the dataset needs about 4.5 GB (1,000 ticks) but only "
                                     "1.2 GB is free on its filesystem")
    assert atomic.free_bytes(tmp_path / "not" / "yet") > 0


# --- the dataset estimates behind the free-space check -----------------------------------------

def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_pairs_estimate_covers_the_real_size(tmp_path, fmt):
    from datagen.pairs import DATASET_OVERHEAD_BYTES, check_room, estimate_bytes, generate_pairs
    from tests.helpers import pairs_config
    cfg = pairs_config(format=fmt, scale_factor=11, rate={"duration_s": 12.0})
    need, events = estimate_bytes(cfg)
    ds = generate_pairs(cfg, tmp_path / "ds")
    assert abs(ds.total_rows - events) < 6 * events ** 0.5
    actual = _size(tmp_path / "ds")
    assert actual <= need <= 3 * actual + 2 * DATASET_OVERHEAD_BYTES
    check_room(cfg, tmp_path / "again", free=int(need) + 1)
    with pytest.raises(CepkitError) as err:
        check_room(cfg, tmp_path / "again", free=int(need) - 1)
    line = str(err.value)
    assert line.startswith(f"{tmp_path / 'again'}: the dataset needs about ") and "\n" not in line
    assert f"{events:,.0f} expected ticks" in line and f"but only {atomic.human_bytes(int(need) - 1)} is free" in line


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_micro_estimate_covers_the_real_size(tmp_path, fmt):
    from datagen.micro import DATASET_OVERHEAD_BYTES, check_room, estimate_bytes, generate_micro
    from kit.config import load_config
    cfg = load_config(None, [f"micro.format={fmt!r}", "micro.streams=2", "micro.attributes=7",
                             "micro.table_rows=20000", "micro.rate.duration_s=10",
                             "micro.rate.basis_rate_eps=5000"]).micro
    need, events = estimate_bytes(cfg)
    ds = generate_micro(cfg, tmp_path / "ds")
    assert abs(ds.total_rows - events) < 6 * events ** 0.5
    actual = _size(tmp_path / "ds")
    assert actual <= need <= 3 * actual + 2 * DATASET_OVERHEAD_BYTES
    with pytest.raises(CepkitError, match=r"needs about .* \(100,000 expected events of 7 attribute\(s\) and "
                                          r"20,000 table rows in " + fmt):
        check_room(cfg, tmp_path / "again", free=1000)


def test_generators_refuse_before_writing(tmp_path, monkeypatch):
    """The check runs before any row: nothing is left, not even the parent directories."""
    import datagen.pairs
    from tests.helpers import pairs_config
    monkeypatch.setattr(atomic, "free_bytes", lambda path: 1000)
    with pytest.raises(CepkitError, match="but only 1.0 kB is free on its filesystem"):
        datagen.pairs.generate_pairs(pairs_config(rate={"duration_s": 1.0}), tmp_path / "a" / "ds")
    assert listing(tmp_path) == []
