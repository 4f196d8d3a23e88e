"""Which checkpoint a restarted Flink program restores: the newest completed one.

The program prints each checkpoint its job completes (`checkpoint` events: id, trigger time,
path); the harness restarts a dead program from the newest it heard of, if its `_metadata` (written
last, when the checkpoint completed) is there. Otherwise, and when it heard of none, the newest
`chk-N/_metadata` under the run's checkpoint directory; none at all: the job starts afresh from
offset 0 (the sink then drops every answer the dead program had sent, harness/replay_filter.py).
"""

from __future__ import annotations

import re
from pathlib import Path

_CHK = re.compile(r"chk-(\d+)")


def local_dir(checkpoint: str) -> Path:
    """The run's checkpoint location (a path or a file: URL) as a local path."""
    if checkpoint.startswith("file:"):
        checkpoint = "/" + checkpoint[len("file:"):].lstrip("/")
    return Path(checkpoint)


def _complete(path: Path) -> bool:
    return (path / "_metadata").is_file()


def newest_checkpoint(checkpoint_dir: Path, heard: dict | None) -> tuple[Path | None, int | None]:
    """(the checkpoint to restore, its trigger time in epoch ms when known)."""
    if heard and heard.get("path") and _complete(Path(heard["path"])):
        return Path(heard["path"]), heard.get("trigger_ts_ms")
    found = []
    if checkpoint_dir.is_dir():
        for job in checkpoint_dir.iterdir():
            if not job.is_dir():
                continue
            for chk in job.iterdir():
                m = _CHK.fullmatch(chk.name)
                if m and _complete(chk):
                    found.append(((chk / "_metadata").stat().st_mtime, int(m[1]), chk))
    if not found:
        return None, None
    return max(found)[2], None
