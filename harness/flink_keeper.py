"""Keep one Flink TaskManager running: start it again when it dies (Flink's standalone mode has no
supervisor of its own; harness/flink_cluster.py starts each TaskManager under one of these).

    python -I flink_keeper.py CLUSTER_DIR NAME -- COMMAND [ARG ...]

runs COMMAND (the distribution's `taskmanager.sh start-foreground`) in the keeper's own session,
with its stdout and stderr (the TaskManager's log). When it exits by itself (a crash, a SIGKILL
from a fault injected on purpose), the keeper notes it in that log and starts it again after
RESTART_DELAY_S; a new TaskManager registers with the JobManager, which then has the slots to
restore the job from its latest checkpoint. A TaskManager that cannot start (it exits within
QUICK_EXIT_S of its start QUICK_EXITS times in a row) is given up on: the keeper exits 1. SIGTERM
(or SIGINT, SIGHUP) stops the TaskManager (SIGTERM, then SIGKILL after STOP_WAIT_S) and the keeper,
exit 0. CLUSTER_DIR and NAME only mark the process as that cluster's keeper (its command line is how
`cepkit cluster stop` and `status` recognise it).

Run as a script under `-I`: it imports nothing but the standard library, and its directory (which
holds modules of cepkit's harness) is not put on the module path.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

RESTART_DELAY_S = 1.0
QUICK_EXIT_S = 20.0
QUICK_EXITS = 3
STOP_WAIT_S = 10.0


def _note(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{stamp} cepkit flink_keeper: {message}", flush=True)


def _wait(child: subprocess.Popen, state: dict) -> int:
    """The child's exit code; once the keeper is stopping, a child still alive STOP_WAIT_S after
    the SIGTERM is killed."""
    stop_at = None
    while True:
        code = child.poll()
        if code is not None:
            return code
        if state["stopping"]:
            stop_at = time.monotonic() if stop_at is None else stop_at
            if time.monotonic() - stop_at > STOP_WAIT_S:
                child.kill()
        time.sleep(0.1)


def keep(name: str, command: list[str]) -> int:
    state = {"stopping": False, "child": None}

    def on_signal(signum, _frame):
        state["stopping"] = True
        child = state["child"]
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    quick = restarts = 0
    while not state["stopping"]:
        began = time.monotonic()
        child = state["child"] = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        if state["stopping"]:                     # a signal between the fork and the assignment
            child.send_signal(signal.SIGTERM)
        code = _wait(child, state)
        if state["stopping"]:
            return 0
        lived = time.monotonic() - began
        quick = quick + 1 if lived < QUICK_EXIT_S else 0
        if quick >= QUICK_EXITS:
            _note(f"{name} (pid {child.pid}) exited with code {code} after {lived:.1f} s, {quick} times in a row "
                  f"within {QUICK_EXIT_S:g} s of its start: not starting it again")
            return 1
        restarts += 1
        _note(f"{name} (pid {child.pid}) exited with code {code} after {lived:.1f} s; starting it again in "
              f"{RESTART_DELAY_S:g} s (restart {restarts})")
        deadline = time.monotonic() + RESTART_DELAY_S
        while not state["stopping"] and time.monotonic() < deadline:
            time.sleep(0.1)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: flink_keeper.py CLUSTER_DIR NAME -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    return keep(argv[1], argv[3:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
