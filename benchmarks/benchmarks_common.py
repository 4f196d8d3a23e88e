"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import psutil


class PeakRss:
    """Samples this process's resident set size in a background thread."""

    def __init__(self, every_s: float = 0.05):
        self.proc = psutil.Process(os.getpid())
        self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def checkout_version() -> str:
    """`git describe --always --dirty` of this checkout, for a result's notes ("unknown" outside git)."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"
