"""Running the driver as a separate process, as benchmark runs do.

`DriverProcess(cfg)` starts `python -m harness.driver --config-json ...`, waits for its ready line
(host, port, clocks) and hands out clients; `stop()` sends SIGTERM and returns the driver's final
stats line. The driver's stderr goes to a temporary file so a start-up failure can be reported
as the driver's own one-line error.

With `secret` (the run's, kit/wire/auth.py) the driver serves only connections that present it:
it gets the secret in its environment, never on its command line, and the clients handed out
present it. `log`: the file its refused connections are written to (the run's logs/harness.log).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kit.wire.auth import SECRET_ENV
from kit.wire.feed_client import DriverClient
from harness.config import DriverConfig
from kit.errors import CepkitError


class DriverProcess:
    def __init__(self, cfg: DriverConfig, *, exit_when_drained: bool = False, startup_timeout_s: float = 60.0,
                 python: str = sys.executable, secret: str | None = None, log: Path | None = None):
        cmd = [python, "-m", "harness.driver", "--config-json", json.dumps(cfg.to_dict())]
        if exit_when_drained:
            cmd.append("--exit-when-drained")
        if log is not None:
            cmd += ["--log", str(log)]
        # Exactly the given secret (none: none, whatever this process's environment holds).
        env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
        if secret is not None:
            env[SECRET_ENV] = secret
        self._secret = secret
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1, env=env)
        self.final_stats: dict | None = None
        try:
            self.ready = self._read_line(startup_timeout_s)
        except BaseException:
            self._kill()
            raise
        if self.ready is None or self.ready.get("event") != "ready":
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            message = self._error_text()
            self._kill()
            raise CepkitError(f"driver process did not start: {message}")
        self.host, self.port = self.ready["host"], self.ready["port"]

    def _read_line(self, timeout_s: float) -> dict | None:
        """The next JSON line of the driver's stdout, or None if it exited or timed out."""
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if sel.select(timeout=min(0.2, max(0.0, deadline - time.monotonic()))):
                    line = self.proc.stdout.readline()
                    if not line:
                        return None
                    return _parse(line)
                if self.proc.poll() is not None:
                    return None
        return None

    def _error_text(self) -> str:
        self._stderr.seek(0)
        lines = [ln.strip() for ln in self._stderr.read().splitlines() if ln.strip()]
        code = self.proc.poll()
        last = lines[-1] if lines else "no message"
        return f"{last} (exit code {code})" if code is not None else f"{last} (no ready line in time)"

    def client(self, host: str | None = None, **kwargs) -> DriverClient:
        """A client of this driver (at `host`, default the address it bound), presenting its secret."""
        return DriverClient(host or self.host, self.port, **{"secret": self._secret, **kwargs})

    def wait(self, timeout_s: float | None = None) -> dict | None:
        """Wait for the driver to exit by itself (exit_when_drained); its final stats."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.final_stats is None and self.proc.poll() is None:
            left = 3600.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                break
            line = self._read_line(left)
            if line and line.get("event") == "stopped":
                self.final_stats = line["stats"]
        if self.final_stats is None:
            rest = self.proc.stdout.read() if self.proc.poll() is not None else ""
            for ln in rest.splitlines():
                msg = _parse(ln)
                if msg and msg.get("event") == "stopped":
                    self.final_stats = msg["stats"]
        return self.final_stats

    def stop(self, timeout_s: float = 10.0) -> dict | None:
        """SIGTERM, wait, and return the driver's final stats (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        stats = self.wait(timeout_s)
        self._kill()
        return stats

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._stderr.close()

    def __enter__(self) -> "DriverProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _parse(line: str) -> dict | None:
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None
