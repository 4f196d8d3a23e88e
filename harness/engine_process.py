"""The engine program's process tree, seen from the harness: started, its stdout events read,
its descendants remembered (CPU/RSS sampling and cleanup), and ended without leaving anything.

The program prints one JSON object per line (specs/ENGINE_RUN.md); everything else the JVM
writes to stdout is kept apart in engine.stdout.txt, stderr in engine.log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil

from harness.resources import now_ms

# After SIGTERM the program waits up to 10 s for a batch boundary, then stops Spark.
TERM_WAIT_S = 40.0
# A normally finished program's JVM and workers exit on their own within this long.
TREE_EXIT_WAIT_S = 10.0


def last_error_line(log: Path) -> str:
    """The most telling line at the end of the program's stderr, for a one-line message."""
    try:
        lines = [ln.rstrip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    # A traceback ends with "SomeError: message"; Java stack frames start with whitespace.
    for ln in reversed(lines[-200:]):
        if not ln[0].isspace() and ("Error" in ln or "Exception" in ln or "error" in ln):
            return ln.strip()[:300]
    return lines[-1].strip()[:300] if lines else "no output"


RESTART_MARK = "==== cepkit: engine program restarted"
# A JVM error that ends the engine however its Python side words the death afterwards (py4j's
# "Connection refused" once the JVM is gone).
_FATAL_JVM = ("java.lang.OutOfMemoryError", "java.lang.StackOverflowError", "java.lang.InternalError")


def fatal_jvm_error(log: Path, tail_bytes: int = 4 << 20) -> str | None:
    """The first fatal JVM error (e.g. `java.lang.OutOfMemoryError: Java heap space`) the current
    attempt logged: in the log's last `tail_bytes`, after the last restart mark."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - tail_bytes))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    text = text.rpartition(RESTART_MARK)[2]
    found = [(i, name) for name in _FATAL_JVM if (i := text.find(name)) >= 0]
    if not found:
        return None
    start = min(found)[0]
    line = text[start:].splitlines()[0].strip()
    return line[:300]


class EngineProcess:
    """The engine program's process tree and its stdout events. A restarted program (attempt 2,
    3, ...) appends to the same logs after a line saying so."""

    def __init__(self, cmd: list[str], env: dict, cwd: Path, logs: Path, attempt: int = 1, on_event=None):
        self.log_path = logs / "engine.log"
        self.attempt = attempt
        self._stderr = open(self.log_path, "a")
        self._jsonl = open(logs / "engine.stdout.jsonl", "a")
        if attempt > 1:
            self._stderr.write(f"\n{RESTART_MARK} (attempt {attempt}) ====\n")
            self._stderr.flush()
        self._other = logs / "engine.stdout.txt"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=cwd,
                                     text=True, bufsize=1, start_new_session=True)
        self.pid = self.proc.pid
        self.events: dict[str, dict] = {}
        self.on_event = on_event        # hears every event line, in the reader thread
        self.progress: dict | None = None
        self.peak_state_bytes: int | None = None
        self.peak_state_rows: int | None = None
        self.started = threading.Event()
        self._known: dict[int, psutil.Process] = {}
        self._reader = threading.Thread(target=self._read, name="engine-stdout", daemon=True)
        self._reader.start()
        self.refresh_tree()

    def _read(self) -> None:
        other = None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                msg = None
            if isinstance(msg, dict) and "event" in msg:
                msg["harness_ts_ms"] = now_ms()
                msg["attempt"] = self.attempt
                self._jsonl.write(json.dumps(msg) + "\n")
                self._jsonl.flush()
                if msg["event"] == "progress":
                    self.progress = msg
                elif msg["event"] == "batch":
                    self._note_state(msg.get("state"))
                else:
                    self.events[msg["event"]] = msg
                if msg["event"] == "started":
                    self.started.set()
                if self.on_event is not None:
                    self.on_event(msg)
            else:
                # Something else on stdout (the JVM shares it): kept, apart from the JSON lines.
                other = other or open(self._other, "a")
                other.write(line)
                other.flush()
        if other:
            other.close()

    def _note_state(self, operators) -> None:
        if not isinstance(operators, list) or not operators:
            return
        total_bytes = sum(int(op.get("memoryUsedBytes") or 0) for op in operators if isinstance(op, dict))
        total_rows = sum(int(op.get("numRowsTotal") or 0) for op in operators if isinstance(op, dict))
        self.peak_state_bytes = max(self.peak_state_bytes or 0, total_bytes)
        self.peak_state_rows = max(self.peak_state_rows or 0, total_rows)

    def refresh_tree(self) -> None:
        """Remember the program's descendants: orphaned ones can still be found and ended."""
        try:
            root = psutil.Process(self.pid)
            for p in [root] + root.children(recursive=True):
                self._known.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def poll(self) -> int | None:
        return self.proc.poll()

    def alive_tree(self) -> list[psutil.Process]:
        out = []
        for p in self._known.values():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.NoSuchProcess:
                pass
        return out

    def terminate(self, wait_s: float = TERM_WAIT_S) -> None:
        """SIGTERM (the program stops its query between batches), then SIGKILL the whole tree."""
        self.refresh_tree()
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                pass
        self.reap()

    def reap(self, wait_s: float = TREE_EXIT_WAIT_S) -> None:
        """Make sure nothing of the tree is left: the root is waited for (or killed), its
        descendants get `wait_s` to exit by themselves (the JVM exits when the Python driver's
        pipe closes), then whatever remains is killed."""
        if self.proc.poll() is None:
            self.refresh_tree()
            self.proc.kill()
        self.proc.wait()
        if self._wait_tree(wait_s):
            return self._close()
        for p in self.alive_tree():
            if p.pid != self.pid:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
        try:
            os.killpg(self.pid, signal.SIGKILL)     # anything else still in the program's group
        except (ProcessLookupError, PermissionError):
            pass
        self._wait_tree(5.0)
        self._close()

    def _wait_tree(self, wait_s: float) -> bool:
        """Wait until no descendant runs (zombies count as gone: they are not ours to reap)."""
        deadline = time.monotonic() + wait_s
        while True:
            if not [p for p in self.alive_tree() if p.pid != self.pid]:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def _close(self) -> None:
        self._reader.join(timeout=5)
        self.proc.stdout.close()
        self._stderr.close()
        self._jsonl.close()
