"""The load driver: releases a dataset's events at their scheduled wall-clock times.

This module runs one until it is stopped: `run_driver(cfg)` in-process, or as its own process
`python -m harness.driver --dataset DIR ...` (what harness.process.DriverProcess starts), which
prints one JSON line when ready and one when stopped, and stops on SIGTERM or SIGINT. The driver
itself, its threads and how it answers requests, is `Driver` in harness.playback;
specs/DRIVER.md describes the clocks, stamping, retention and the protocol.

As its own process it takes the run's secret from its environment (`CEPKIT_SECRET`, never an
argument: argv is readable by every user) and then serves only connections that present it; each
connection it refuses is one line in `--log FILE` (the run's logs/harness.log), else on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from harness.config import DriverConfig
from harness.playback import Driver
from harness.server import log_to
from kit.errors import CepkitError
from kit.wire.auth import secret_from_env


def run_driver(cfg: DriverConfig, *, on_ready: Callable[[dict], None] | None = None,
               stop: threading.Event | None = None, exit_when_drained: bool = False,
               tune_process: bool = False, secret: str | None = None,
               on_refused: Callable[[str], None] | None = None) -> dict:
    """Run a driver until `stop` is set (or, with `exit_when_drained`, until every event was
    released and pulled); returns the final stats. A dataset error ends it with CepkitError.
    `secret` and `on_refused`: see harness.playback.Driver."""
    stop = stop or threading.Event()
    with Driver(cfg, tune_process=tune_process, secret=secret, on_refused=on_refused) as drv:
        if on_ready is not None:
            on_ready({"event": "ready", "host": drv.host, "port": drv.port, "pid": os.getpid(), **drv.info()})
        while not stop.wait(0.05):
            if drv.buffer.failed:
                raise CepkitError(drv.buffer.failed)
            if exit_when_drained and drv.buffer.finished and drv.buffer.pulled >= drv.buffer.total_events:
                break
        return drv.stats()


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m harness.driver", description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", help="dataset directory (manifest.json and its files)")
    ap.add_argument("--config-json", help="a DriverConfig as JSON (what DriverProcess passes); other flags override it")
    ap.add_argument("--streams", help="comma-separated streams to play (default: all)")
    ap.add_argument("--pacing", choices=("tickts", "rate", "pull"))
    ap.add_argument("--speed", type=float)
    ap.add_argument("--rate-eps", type=float)
    ap.add_argument("--stamp", choices=("scheduled", "send"))
    ap.add_argument("--host")
    ap.add_argument("--port", type=int)
    ap.add_argument("--start-wall-ms", type=int)
    ap.add_argument("--lead-ms", type=int)
    ap.add_argument("--align-ms", type=int)
    ap.add_argument("--hold", action="store_true", default=None, help="release nothing until a client sends begin")
    ap.add_argument("--chunk-rows", type=int)
    ap.add_argument("--retain-bytes", type=int)
    ap.add_argument("--max-read-rows", type=int)
    ap.add_argument("--exit-when-drained", action="store_true",
                    help="exit once every event was released and pulled (default: run until SIGTERM/SIGINT)")
    ap.add_argument("--ready-file", help="also write the ready line to this file (atomically)")
    ap.add_argument("--log", metavar="FILE",
                    help="append one line per refused connection to this file (default: stderr)")
    return ap


def config_from_args(args: argparse.Namespace) -> DriverConfig:
    base = json.loads(args.config_json) if args.config_json else {}
    flags = {"dataset_dir": args.dataset, "streams": args.streams, "pacing": args.pacing, "speed": args.speed,
             "rate_eps": args.rate_eps, "stamp": args.stamp, "host": args.host, "port": args.port,
             "start_wall_ms": args.start_wall_ms, "lead_ms": args.lead_ms, "align_ms": args.align_ms,
             "hold": args.hold, "chunk_rows": args.chunk_rows, "retain_bytes": args.retain_bytes,
             "max_read_rows": args.max_read_rows}
    base.update({k: v for k, v in flags.items() if v is not None})
    if "dataset_dir" not in base:
        raise CepkitError("driver: --dataset is required")
    return DriverConfig.from_dict(base)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def ready(info: dict) -> None:
        line = json.dumps(info)
        if args.ready_file:
            tmp = Path(args.ready_file + ".tmp")
            tmp.write_text(line + "\n")
            tmp.replace(args.ready_file)
        print(line, flush=True)

    try:
        cfg = config_from_args(args)
        refused = log_to(Path(args.log)) if args.log else lambda line: print(line, file=sys.stderr, flush=True)
        stats = run_driver(cfg, on_ready=ready, stop=stop, exit_when_drained=args.exit_when_drained,
                           tune_process=True, secret=secret_from_env(), on_refused=refused)
    except (CepkitError, json.JSONDecodeError) as e:
        print(f"cepkit driver: error: {e}", file=sys.stderr, flush=True)
        return CepkitError.exit_code
    print(json.dumps({"event": "stopped", "stats": stats}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
