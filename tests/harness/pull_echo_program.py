"""A light engine program for the harness's long-run test: no JVM, no engine, the harness's contract.

It speaks the program contract of specs/ENGINE_RUN.md the way a Spark program does, only without
Spark: takes the harness's arguments (ignoring the engine settings), prints `started`, then in a
loop of micro-batches asks the driver for what was released, reads it, echoes every event to the
sink as stream `Echo` (its `ID`, `A1`, `TS` as `inputTS`, `offset`, `ingestTS`: the driver's
serve time) in slices of `--slice-rows` rows, each slice its own batch id (so a run of a few
million events sends tens of thousands of batches, as a long run does), writes a small checkpoint
(an offset file per batch, the last `RETAIN` kept, as Spark's minBatchesToRetain does, and a
state file rewritten each batch), commits the batch to the driver, and prints `finished` once
every event went through.

Used by tests/harness/test_health_long_run.py; `python pull_echo_program.py --driver H:P --sink
H:P --checkpoint DIR [--slice-rows N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from kit.wire.feed_client import DriverClient, served_ms
from kit.wire.sink_client import SinkClient

RETAIN = 5
STATE_BYTES = 64 * 1024


def say(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def checkpoint(root: Path, batch: int, end: int) -> None:
    """Spark-like: one offsets file per batch, the oldest beyond RETAIN deleted; the state rewritten."""
    offsets = root / "offsets"
    (offsets / str(batch)).write_text(json.dumps({"end": end}))
    (offsets / str(batch - RETAIN)).unlink(missing_ok=True)
    tmp = root / "state" / ".state.tmp"
    tmp.write_bytes(batch.to_bytes(8, "little") * (STATE_BYTES // 8))
    tmp.replace(root / "state" / "state")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--sink", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--slice-rows", type=int, default=200)
    args, _ = ap.parse_known_args(argv)      # --master, --conf, --trigger-ms ...: an engine's, not ours
    secret = os.environ.get("CEPKIT_SECRET")
    driver = DriverClient(*host_port(args.driver), secret=secret)
    sink = SinkClient(*host_port(args.sink), secret=secret)
    root = Path(args.checkpoint)
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "state").mkdir(parents=True, exist_ok=True)
    total = driver.info()["total_events"]
    say("started", pid=os.getpid(), streams=["Echo"])
    pos = batch = sent = rows = 0
    while pos < total:
        end = driver.latest_offset(after=pos, wait_ms=20)
        if end <= pos:
            continue
        table, resp = driver.read_once(pos, end)
        got = resp["end"] - pos
        if got <= 0:
            continue
        ingest = served_ms(resp)
        out = pa.table({"ID": table.column("ID"), "A1": table.column("A1"), "inputTS": table.column("TS"),
                        "offset": pa.array(np.arange(pos, pos + got, dtype=np.int64)),
                        "ingestTS": pa.array(ingest)})
        for start in range(0, out.num_rows, args.slice_rows):
            rows += sink.emit("Echo", sent, out.slice(start, args.slice_rows))
            sent += 1
        pos += got
        checkpoint(root, batch, pos)
        driver.commit(pos)
        batch += 1
    say("finished", batches=batch, output_rows=rows, end_offset=pos, last_batch_id=batch - 1, emits=sent)
    driver.close()
    sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
