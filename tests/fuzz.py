"""What every fuzz case checks: a bad input is one line naming the file, exit code 2, no traceback,
and nothing that existed before is changed.

`expect_user_error(argv, watch=..., names=...)` runs `cepkit` in-process (hypothesis runs many
cases; a subprocess each would cost a Python start-up) and asserts the contract of DEVELOPERS.md:

- exit code 2;
- stderr is exactly one line starting with `cepkit: error: ` and containing each of `names`
  (the file, and where given the line or key);
- no traceback anywhere in the output;
- every file under the `watch` directories has the same bytes as before, and none was removed
  (new files are allowed only where `allow_new` says so: by default none).

Budgets: `FUZZ_EXAMPLES` examples per property in the default run, more under `-m slow`
(`slow_settings`).

`run_capped(code)` runs Python code in a child process under a memory cap (`MEMORY_CAP_BYTES`,
RLIMIT_AS) and a time limit: a hostile input that once exhausted the memory or hung a command
then fails its test (MemoryError, killed, or timed out) instead of taking the machine down.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import resource
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from hypothesis import HealthCheck, settings

from cepkit_app.cli import main

FUZZ_EXAMPLES = int(os.environ.get("CEPKIT_FUZZ_EXAMPLES", "40"))
SLOW_EXAMPLES = int(os.environ.get("CEPKIT_FUZZ_SLOW_EXAMPLES", "600"))

# One profile for every fuzz test: no deadline (file I/O and pyarrow vary), function-scoped
# tmp_path fixtures are fine because each example makes its own sub-directory.
fuzz_settings = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                HealthCheck.data_too_large, HealthCheck.filter_too_much])
slow_settings = settings(fuzz_settings, max_examples=SLOW_EXAMPLES, derandomize=False)

MEMORY_CAP_BYTES = 2 << 30
_ROOT = Path(__file__).resolve().parents[1]


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def run_capped(code: str, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """`python -c code args...` from the repository root, under MEMORY_CAP_BYTES of address space
    and `timeout_s` (subprocess.TimeoutExpired: a hang is a failure too)."""
    return subprocess.run([sys.executable, "-c", code, *args], cwd=_ROOT, capture_output=True, text=True,
                          timeout=timeout_s, preexec_fn=_cap_memory)


def tree_digest(roots: Iterable[Path]) -> dict[str, str]:
    """sha256 of every regular file under `roots` (path -> digest); directories as markers."""
    out: dict[str, str] = {}
    for root in roots:
        root = Path(root)
        if root.is_file():
            out[str(root)] = hashlib.sha256(root.read_bytes()).hexdigest()
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            out[dirpath + "/"] = "dir"
            for name in filenames:
                p = os.path.join(dirpath, name)
                if os.path.isfile(p):
                    with open(p, "rb") as fh:
                        out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `cepkit argv` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:       # argparse usage errors
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def expect_user_error(argv: Sequence[str], *, watch: Iterable[Path] = (), names: Iterable[str] = (),
                      allow_new: Iterable[Path] = ()) -> str:
    """Run `cepkit argv`, assert the bad-input contract, return the error line."""
    watch = [Path(w) for w in watch]
    before = tree_digest(watch)
    code, out, err = run_cli(argv)
    after = tree_digest(watch)
    text = out + err
    assert "Traceback" not in text, f"traceback for {list(argv)}:\n{text}"
    lines = err.strip().splitlines()
    assert code == 2, f"exit code {code} (expected 2) for {list(argv)}:\n{text}"
    assert len(lines) == 1 and lines[0].startswith("cepkit: error: "), \
        f"expected one error line for {list(argv)}, got:\n{err}"
    for name in names:
        assert str(name) in lines[0], f"error line does not name {name!r}: {lines[0]}"
    changed = [p for p, h in before.items() if after.get(p) != h]
    assert not changed, f"{list(argv)} changed or removed pre-existing files: {changed[:5]}"
    allowed = tuple(str(a) for a in allow_new)
    new = [p for p in after if p not in before and not p.startswith(allowed or ("\0",))]
    assert not new, f"{list(argv)} left new files behind after failing: {new[:5]}"
    return lines[0]
