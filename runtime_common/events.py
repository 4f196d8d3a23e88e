"""What an engine program tells the harness: one JSON object per line on stdout.

`started`, `progress`, `batch`, `stalled`, then one of `finished` / `stopped` / `failed`
(specs/ENGINE_RUN.md, "The program's contract"). Spark's own logs go to stderr.
"""

from __future__ import annotations

import json
import re


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def one_line(text: str, limit: int = 500) -> str:
    """The most telling line of a (Spark) error text: a cepkit error if one is in it, else the
    last `SomeError: message` line of a Python traceback, else the first line."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return "unknown error"
    pattern = re.compile(r"((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)): (.+)")
    found = [m for m in (pattern.search(ln) for ln in lines) if m]
    ours = [m for m in found if m.group(1).startswith(("spark_runtime.", "flink_runtime.", "runtime_common.", "kit.")) or "Cepkit" in m.group(1)]
    pick = ours[-1] if ours else None
    java = [m for m in found if m.group(1).startswith("org.apache.flink.")]
    if pick is None and java and any(m.group(1).endswith("Py4JJavaError") for m in found):
        pick = java[0]      # PyFlink: the Java exception the Python call raised, not py4j's wrapper
    if pick is None:
        pyside = [m for m in found if not m.group(1).startswith(("org.", "java.", "scala.", "py4j."))]
        pick = pyside[-1] if pyside else None
    line = f"{pick.group(1).rsplit('.', 1)[-1]}: {pick.group(2)}" if pick else lines[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."
