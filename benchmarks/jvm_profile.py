"""Where a running Spark engine's JVM spends its CPU: a Java Flight Recorder sample, summarized.

batch_breakdown.py splits a micro-batch's wall time into Spark's phases; a real-time run has no
micro-batches to split (its tasks run for the whole batch and handle events as they come), and
inside a task the question is which code takes the time: the feed reader, the partial rows, the
shuffle, the Pairs buckets, the state store. This script attaches the JDK's own sampling profiler
(JFR, `jcmd PID JFR.start`) to the engine's JVM of a run in progress (the Spark driver JVM: in
local mode it runs the tasks too), records for `--seconds`, and prints:

- CPU samples per thread kind (task threads, the stream execution thread, shuffle clients, ...);
- the hottest methods by self samples (the frame on top of the stack);
- for the frames of `--focus` packages (cepkit's classes, Spark's state store and streaming
  shuffle by default), the share of samples with the method anywhere on the stack (inclusive).

Each count is a number of samples (JFR's `profile` settings sample running Java threads every
10-20 ms), so a share is an estimate from that many samples; the sample count is printed with it.
Run it alone beside the engine (another busy process changes what the JVM gets to run).

    .venv/bin/cepkit pairs --quick --sf 256 --trigger realtime --out /tmp/rt &
    .venv/bin/python benchmarks/jvm_profile.py --after 40 --seconds 40 --out /tmp/rt-profile

`--pid` names the JVM (default: the one SparkSubmit JVM running on this machine); `--jfr FILE`
summarizes an existing recording instead of making one. The recording and `summary.json` land in
`--out` (a new directory).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil

from kit.jsonfile import dumps_json

DEFAULT_FOCUS = ("cepkit.", "org.apache.spark.sql.execution.streaming.state.",
                 "org.apache.spark.shuffle.streaming.")


class ProfileError(Exception):
    """A one-line reason this script cannot go on."""


def spark_jvm() -> int:
    """The pid of the one SparkSubmit JVM on this machine."""
    found = [p.pid for p in psutil.process_iter(["name", "cmdline"])
             if (p.info["name"] or "").startswith("java")
             and "org.apache.spark.deploy.SparkSubmit" in (p.info["cmdline"] or [])]
    if len(found) != 1:
        raise ProfileError(f"expected one SparkSubmit JVM, found {len(found)}: name it with --pid")
    return found[0]


def record(pid: int, seconds: float, path: Path) -> None:
    """A JFR recording of `seconds` from JVM `pid` into `path` (waits for it to be written)."""
    proc = subprocess.run(["jcmd", str(pid), "JFR.start", f"duration={int(seconds)}s", f"filename={path}",
                           "settings=profile", "name=cepkit-profile"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ProfileError(f"jcmd {pid} JFR.start failed: {(proc.stderr or proc.stdout).strip()[:300]}")
    # JFR writes the file when the duration is over; wait for it, then for its size to settle.
    time.sleep(seconds)
    last = -1
    for _ in range(60):
        size = path.stat().st_size if path.exists() else -1
        if size > 0 and size == last:
            return
        last = size
        time.sleep(1)
    raise ProfileError(f"{path}: the recording was not written (did JVM {pid} exit?)")


def samples(jfr: Path) -> list[tuple[str, list[str]]]:
    """(thread name, frames top first as `class.method`) of every execution sample of a recording."""
    proc = subprocess.run(["jfr", "print", "--json", "--events", "jdk.ExecutionSample", str(jfr)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise ProfileError(f"jfr print {jfr} failed: {(proc.stderr or proc.stdout).strip()[:300]}")
    out = []
    for event in json.loads(proc.stdout)["recording"]["events"]:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        frames = []
        for frame in ((values.get("stackTrace") or {}).get("frames") or []):
            method = frame.get("method") or {}
            owner = ((method.get("type") or {}).get("name") or "?").replace("/", ".")
            frames.append(f"{owner}.{method.get('name', '?')}")
        out.append((thread, frames))
    return out


def thread_kind(name: str) -> str:
    """A thread's name without its numbers and ids (`Executor task launch worker for task 3.0 ...`
    and its siblings are one kind)."""
    name = re.sub(r"\[id = [^]]*\]", "", name)
    return re.sub(r"\d+", "N", name).strip()[:70]


def summarize(rows: list[tuple[str, list[str]]], focus: tuple[str, ...], top: int) -> dict:
    threads = Counter(thread_kind(t) for t, _ in rows)
    self_time = Counter(frames[0] for _, frames in rows if frames)
    inclusive = Counter(f for _, frames in rows for f in set(frames) if f.startswith(focus))
    return {"samples": len(rows), "threads": threads.most_common(top), "self": self_time.most_common(top),
            "inclusive": inclusive.most_common(top)}


def print_summary(s: dict) -> None:
    n = max(1, s["samples"])
    for title, key in (("samples per thread kind", "threads"), ("hottest methods (self)", "self"),
                       ("focus methods (inclusive: anywhere on the stack)", "inclusive")):
        print(f"\n{title}, of {s['samples']:,} samples")
        for name, count in s[key]:
            print(f"  {count:>7,}  {100 * count / n:5.1f} %  {name}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int, help="the JVM to record (default: the one SparkSubmit JVM)")
    ap.add_argument("--after", type=float, default=0.0, metavar="S", help="wait this long before recording")
    ap.add_argument("--seconds", type=float, default=30.0, metavar="S", help="how long to record (default 30)")
    ap.add_argument("--jfr", type=Path, help="summarize this recording instead of making one")
    ap.add_argument("--out", type=Path, help="a new directory for the recording and summary.json")
    ap.add_argument("--focus", action="append", default=[], metavar="PREFIX",
                    help=f"class name prefixes for the inclusive table (default: {', '.join(DEFAULT_FOCUS)})")
    ap.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    args = ap.parse_args(argv)
    try:
        if args.out is not None:
            if args.out.exists():
                raise ProfileError(f"{args.out}: exists (give a new directory)")
            args.out.mkdir(parents=True)
        jfr = args.jfr
        if jfr is None:
            if args.out is None:
                raise ProfileError("--out DIR is needed to keep the recording (or give --jfr FILE)")
            time.sleep(args.after)
            pid = args.pid or spark_jvm()
            jfr = args.out / "profile.jfr"
            print(f"recording JVM {pid} for {args.seconds:g} s ...", file=sys.stderr)
            record(pid, args.seconds, jfr)
        summary = summarize(samples(jfr), tuple(args.focus) or DEFAULT_FOCUS, args.top)
    except (ProfileError, OSError) as e:
        print(f"jvm_profile: error: {e}", file=sys.stderr)
        return 2
    print_summary(summary)
    if args.out is not None:
        tmp = args.out / "summary.json.tmp"
        tmp.write_text(dumps_json({"jfr": str(jfr), **summary}, indent=1), encoding="utf-8")
        tmp.replace(args.out / "summary.json")
        print(f"\nsummary: {args.out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
