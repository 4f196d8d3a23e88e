"""An engine program (no JVM) that dies before it reports `started`: `--die-times N` makes its
first N attempts SIGKILL themselves before `started` (as Flink's JVM killed during the job's
submission takes its program down), then it runs as tests/harness/pull_echo_program.py does;
`--die-times -1` dies on every attempt, with exit code 1 and a line on stderr. Attempts are
counted in a file beside the checkpoint, which every attempt of a run shares."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pull_echo_program  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--die-times", type=int, default=int(os.environ.get("DIE_TIMES", "1")))
    args, _ = ap.parse_known_args()
    counter = Path(args.checkpoint).parent / "attempts"
    attempt = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(attempt))
    if args.die_times < 0:
        print("start_death_program: cannot start (on purpose)", file=sys.stderr, flush=True)
        return 1
    if attempt <= args.die_times:
        os.kill(os.getpid(), signal.SIGKILL)
    return pull_echo_program.main()


if __name__ == "__main__":
    sys.exit(main())
