"""A stand-in for someone else's engine: it answers one microbenchmark filter query (Q1) over a
cepkit micro dataset and writes an output log that `cepkit validate micro` can check.

It imports nothing from cepkit on purpose (only the standard library, pandas and pyarrow): all it
knows of cepkit is what the written specs say, which is all an engine in another language or on
another machine would know.

- Input, either way of specs/OUTPUT_LOG.md, "Writing an output log from your own engine":
  - `--data DIR`: the dataset's files, read directly (specs/datagen-micro.md): `manifest.json`
    names each stream's files in event order and `start_epoch_ms`; each row is `ID`, `A1..AN`,
    `TS`. Like the harness's driver at speed 1 (specs/DRIVER.md), the engine picks a run start
    `run_start_wall_ms` on the wall clock and sees every event at `TS + shift` with
    `shift = run_start_wall_ms - start_epoch_ms` (a multiple of `--align-ms`), and it does not
    look at an event before that instant: the replay keeps the dataset's pace, so latencies mean
    what they mean for a harness run.
  - `--feed HOST:PORT`: the harness's driver (`python -m harness.driver --dataset DIR --hold`),
    spoken to over TCP with the frames of specs/DRIVER.md, "Protocol" (no cepkit client: this is
    what an engine in another language would do). The driver paces the events and stamps their
    `TS`; the clocks come from its `begin` answer. A driver started with a secret (the harness's
    runs; by hand, `CEPKIT_SECRET` in its environment) serves only connections that present it
    first (specs/DRIVER.md, "Who may connect"): with `CEPKIT_SECRET` set, this engine does.
- Processing: every `--batch-ms` it takes the events that became due, keeps those that satisfy
  every `--where`, and writes the `--select`ed fields plus the stamps of specs/OUTPUT_LOG.md:
  `inputTS` (the event's shifted TS), `arrivalTS` (wall clock, read just before the rows are
  written), `ingestTS` (wall clock when the batch was taken) and `batchId`.
- Output: `--out/output-log.json` plus `<query>-00001.parquet` (or `.csv`) files, rolled every
  `--rows-per-file` rows. output-log.json is written last, through a rename, so an interrupted run
  leaves no log that looks complete.

Usage (examples/external_engine/README.md has the whole walk-through):

    python examples/external_engine/filter_engine.py --data DATASET --out OUTPUTS \\
        --query-id q1 --select ID,A1,A2,A3,A4,A5 --where 'ID le 5'
    python examples/external_engine/filter_engine.py --feed 127.0.0.1:7077 --out OUTPUTS ...
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import secrets
import socket
import struct
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

# The comparison operators of the workload XML (`op` of <Where>) and their usual symbols.
OPS = {"lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__", "eq": "__eq__", "ne": "__ne__"}
SYMBOLS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "=": "eq", "==": "eq", "<>": "ne", "!=": "ne"}
# The columns after the query's own fields (specs/OUTPUT_LOG.md, "Row columns"): inputTS is the
# query's last field, the other three the stamps a harness sink would add.
STAMPS = ("inputTS", "arrivalTS", "ingestTS", "batchId")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_where(text: str) -> tuple[str, str, float]:
    """'ID le 5' (or 'ID <= 5') -> ('ID', 'le', 5.0)."""
    parts = text.split()
    if len(parts) != 3:
        raise SystemExit(f"filter_engine: --where {text!r}: expected 'FIELD OP VALUE', e.g. 'ID le 5'")
    field, op, value = parts
    op = SYMBOLS.get(op, op)
    if op not in OPS:
        raise SystemExit(f"filter_engine: --where {text!r}: unknown operator (use {', '.join(OPS)})")
    try:
        return field, op, float(value)
    except ValueError:
        raise SystemExit(f"filter_engine: --where {text!r}: {value!r} is not a number") from None


def arrow_type(column: str) -> pa.DataType:
    """The column's type in the output: as in a micro event (datagen-micro.md), ID int32, TS int64,
    attributes float64."""
    return pa.int32() if column == "ID" else pa.int64() if column == "TS" else pa.float64()


def read_dataset(data: Path, stream: str) -> tuple[int, str, list[Path]]:
    """start_epoch_ms, format and the files (in event order) of `stream`, from manifest.json."""
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    if manifest.get("kind") != "cepkit.datagen-manifest":
        raise SystemExit(f"filter_engine: {data / 'manifest.json'}: not a cepkit dataset manifest")
    for entry in manifest.get("streams") or []:
        if entry.get("name") == stream:
            return int(manifest["start_epoch_ms"]), manifest["format"], [data / f["path"] for f in entry["files"]]
    raise SystemExit(f"filter_engine: {data / 'manifest.json'}: no stream {stream!r}")


def events(files: list[Path], fmt: str, chunk_rows: int = 65536):
    """The stream's events in order, a DataFrame chunk at a time (memory stays flat)."""
    for path in files:
        if fmt == "parquet":
            for batch in pq.ParquetFile(path).iter_batches(batch_size=chunk_rows):
                yield batch.to_pandas()
        else:
            reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=1 << 22))
            for batch in reader:
                yield batch.to_pandas()


class LogWriter:
    """The rows of one output stream, in files of at most `rows_per_file` rows, then output-log.json."""

    def __init__(self, out: Path, stream: str, schema: pa.Schema, fmt: str, rows_per_file: int):
        self.out, self.stream, self.schema, self.fmt, self.rows_per_file = out, stream, schema, fmt, rows_per_file
        self.files: list[str] = []
        self.rows_in_file = 0
        self.total = 0
        self._parquet: pq.ParquetWriter | None = None
        self._csv = None

    def _roll(self) -> None:
        self._close_file()
        name = f"{self.stream}-{len(self.files) + 1:05d}.{self.fmt}"
        self.files.append(name)
        self.rows_in_file = 0
        if self.fmt == "parquet":
            self._parquet = pq.ParquetWriter(self.out / name, self.schema)
        else:
            self._csv = open(self.out / name, "w", newline="", encoding="utf-8")
            self._csv.write(",".join(self.schema.names) + "\n")

    def write(self, df: pd.DataFrame) -> None:
        while len(df):
            if not self.files or self.rows_in_file >= self.rows_per_file:
                self._roll()
            room = self.rows_per_file - self.rows_in_file
            part, df = df.iloc[:room], df.iloc[room:]
            if self.fmt == "parquet":
                self._parquet.write_table(pa.Table.from_pandas(part, schema=self.schema, preserve_index=False))
            else:
                # pandas writes each double as the shortest text that reads back the same value.
                part.to_csv(self._csv, header=False, index=False)
                self._csv.flush()
            self.rows_in_file += len(part)
            self.total += len(part)

    def _close_file(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        if self._csv is not None:
            self._csv.close()
            self._csv = None

    def finish(self, clocks: dict) -> Path:
        """Close the last file and write output-log.json (last, and atomically: a temp file renamed)."""
        self._close_file()
        doc = {"kind": "cepkit.output-log", "schema_version": 1, "format": self.fmt, **clocks,
               "streams": {self.stream: {"files": self.files}}}
        tmp = self.out / ".output-log.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.out / "output-log.json")
        return self.out / "output-log.json"


class Feed:
    """A connection to the harness's driver: one request frame out, one response frame back
    (uint32 header length, uint32 body length, big-endian; a JSON header; an Arrow IPC stream body)."""

    def __init__(self, address: str):
        host, _, port = address.rpartition(":")
        try:
            self.sock = socket.create_connection((host or "127.0.0.1", int(port)), timeout=120)
        except (OSError, ValueError) as e:
            raise SystemExit(f"filter_engine: --feed {address}: cannot connect: {e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.address = address
        # The run's secret comes in the environment, never on the command line (argv is world-readable).
        secret = os.environ.get("CEPKIT_SECRET")
        if secret:
            self.authenticate(secret)

    def authenticate(self, secret: str) -> None:
        """The challenge-response of specs/DRIVER.md ("Who may connect"): each side proves it
        holds the secret by an HMAC-SHA256 of both nonces; the secret never crosses the wire."""
        def proof(role: str, client_nonce: str, server_nonce: str) -> str:
            message = f"cepkit-auth {role} {client_nonce} {server_nonce}".encode()
            return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()

        client_nonce = secrets.token_hex(16)
        challenge, _ = self.request({"op": "auth", "nonce": client_nonce})
        server_nonce = str(challenge.get("nonce", ""))
        if not hmac.compare_digest(str(challenge.get("proof", "")), proof("server", client_nonce, server_nonce)):
            raise SystemExit(f"filter_engine: driver at {self.address}: it does not hold the run's secret")
        self.request({"op": "auth", "proof": proof("client", client_nonce, server_nonce)})

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            part = self.sock.recv(n - len(buf))
            if not part:
                raise SystemExit(f"filter_engine: driver at {self.address} closed the connection")
            buf += part
        return bytes(buf)

    def request(self, header: dict) -> tuple[dict, bytes]:
        h = json.dumps(header).encode("utf-8")
        self.sock.sendall(struct.pack(">II", len(h), 0) + h)
        header_len, body_len = struct.unpack(">II", self._recv(8))
        resp = json.loads(self._recv(header_len))
        body = self._recv(body_len)
        if not resp.get("ok"):
            raise SystemExit(f"filter_engine: driver at {self.address}: {resp.get('error')}: {resp.get('message')}")
        return resp, body

    def read(self, start: int, end: int, wait_ms: int) -> tuple[dict, pd.DataFrame | None]:
        resp, body = self.request({"op": "read", "start": start, "end": end, "wait_ms": wait_ms})
        return resp, (pa.ipc.open_stream(body).read_all().to_pandas() if resp["rows"] else None)


class Query:
    """The filter itself: every event satisfying all comparisons gives one row of the selected fields."""

    def __init__(self, select: list[str], where: list[tuple[str, str, float]], writer: LogWriter):
        self.select, self.where, self.writer = select, where, writer
        self.batches = 0

    def batch(self, events: pd.DataFrame, shift: int, ingest: int) -> None:
        """One micro-batch of events (`TS` as in the input; `shift` moves it to the engine's time)."""
        keep = pd.Series(True, index=events.index)
        for field, op, value in self.where:
            keep &= getattr(events[field], OPS[op])(value)
        rows = events.loc[keep, self.select].copy()
        if "TS" in rows:
            rows["TS"] = rows["TS"] + shift           # a selected TS is in the engine's time too
        rows["inputTS"] = events.loc[keep, "TS"].to_numpy() + shift
        rows["ingestTS"] = ingest
        rows["batchId"] = self.batches
        rows["arrivalTS"] = now_ms()                  # the moment the rows leave the engine
        self.writer.write(rows[self.writer.schema.names])
        self.batches += 1


def replay_files(args, query: Query) -> dict:
    """Read the dataset's files at their recorded pace; returns the clocks of output-log.json."""
    sim_start_ms, in_fmt, files = read_dataset(args.data, args.input)
    # The run start: at least lead_ms from now, with the shift a whole multiple of align_ms.
    earliest = now_ms() + args.lead_ms
    run_start_wall_ms = earliest + (-(earliest - sim_start_ms)) % args.align_ms
    shift = run_start_wall_ms - sim_start_ms

    pending: list[pd.DataFrame] = []
    next_trigger = run_start_wall_ms
    chunks = events(files, in_fmt)
    exhausted = False
    while True:
        # Keep the events of the next trigger in memory (a chunk ahead), no more.
        while not exhausted and (not pending or pending[-1]["TS"].iloc[-1] + shift <= next_trigger):
            chunk = next(chunks, None)
            if chunk is None:
                exhausted = True
            elif len(chunk):
                pending.append(chunk)
        if not pending:
            break
        wait = next_trigger - now_ms()
        if wait > 0:
            time.sleep(wait / 1000.0)
        ingest = now_ms()
        # Every event due by now (TS + shift <= now): an event is never seen before its time.
        due = []
        while pending:
            head = pending[0]
            n = int((head["TS"] + shift <= ingest).sum())       # TS never decreases within a stream
            if n == 0:
                break
            due.append(head.iloc[:n])
            if n == len(head):
                pending.pop(0)
            else:
                pending[0] = head.iloc[n:]
                break
        if due:
            query.batch(pd.concat(due, ignore_index=True) if len(due) > 1 else due[0], shift, ingest)
        next_trigger = max(next_trigger + args.batch_ms, ingest + 1)
    return {"run_start_wall_ms": run_start_wall_ms, "sim_start_ms": sim_start_ms, "speed": 1.0, "pacing": "tickts"}


def pull_feed(args, query: Query) -> dict:
    """Pull the events from the harness's driver every batch_ms; returns the driver's clocks."""
    feed = Feed(args.feed)
    info = feed.request({"op": "hello"})[0]["info"]
    total = int(info["total_events"])
    clocks = feed.request({"op": "begin"})[0]["clocks"]       # a held driver starts releasing now
    pos = 0
    while pos < total:
        # Wait for the first released event of the batch, then take everything released so far.
        resp, table = feed.read(pos, total, wait_ms=1000)
        parts, ingest = [], now_ms()
        while table is not None:
            parts.append(table)
            pos = resp["end"]
            if pos >= resp["released"]:
                break
            resp, table = feed.read(pos, total, wait_ms=0)
        if parts:
            batch = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
            if "stream" in batch:                             # several streams: keep the query's input
                batch = batch[batch["stream"] == args.input]
            query.batch(batch, 0, ingest)                     # the driver's TS is the engine's time already
        elif resp["finished"] and pos >= resp["released"]:
            break
        time.sleep(max(0.0, args.batch_ms / 1000.0 - (now_ms() - ingest) / 1000.0))
    out = {"run_start_wall_ms": clocks["run_start_wall_ms"], "sim_start_ms": clocks["sim_start_ms"],
           "pacing": clocks["pacing"]}
    if clocks.get("speed") is not None:                       # only tickts pacing has a speed
        out["speed"] = clocks["speed"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A toy engine: one filter query over a cepkit micro dataset, "
                                             "written as a cepkit output log.")
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="read this dataset's files (cepkit datagen micro)")
    source.add_argument("--feed", metavar="HOST:PORT", help="pull from the harness's driver (python -m harness.driver)")
    ap.add_argument("--out", required=True, type=Path, help="the output-log directory to create (must not exist)")
    ap.add_argument("--query-id", default="q1", help="the query's id in the workload spec: the output stream's name")
    ap.add_argument("--input", default="S1", help="the input stream (S1)")
    ap.add_argument("--select", required=True, help="comma-separated output fields, e.g. ID,A1,A2")
    ap.add_argument("--where", action="append", default=[], help="'FIELD OP VALUE', e.g. 'ID le 5' (repeatable; all "
                                                                 "must hold)")
    ap.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="output file format")
    ap.add_argument("--rows-per-file", type=int, default=100_000, help="start a new output file after this many rows")
    ap.add_argument("--batch-ms", type=int, default=100, help="micro-batch interval in ms")
    ap.add_argument("--lead-ms", type=int, default=500, help="--data: time from start-up to the run start")
    ap.add_argument("--align-ms", type=int, default=1000,
                    help="--data: run_start_wall_ms - start_epoch_ms is a multiple of this; time windows need a "
                         "multiple of every slideMs (the harness uses 60000)")
    args = ap.parse_args(argv)
    select = [s.strip() for s in args.select.split(",") if s.strip()]
    where = [parse_where(w) for w in args.where]
    if args.rows_per_file < 1 or args.batch_ms < 1 or args.align_ms < 1 or args.lead_ms < 0:
        raise SystemExit("filter_engine: --rows-per-file, --batch-ms and --align-ms must be >= 1, --lead-ms >= 0")
    if args.data is not None:
        read_dataset(args.data, args.input)           # a bad dataset fails before --out is created
    args.out.mkdir(parents=True, exist_ok=False)
    schema = pa.schema([(c, arrow_type(c)) for c in select] + [(s, pa.int64()) for s in STAMPS])
    writer = LogWriter(args.out, args.query_id, schema, args.format, args.rows_per_file)
    query = Query(select, where, writer)
    clocks = replay_files(args, query) if args.data is not None else pull_feed(args, query)
    log = writer.finish(clocks)
    print(f"filter_engine: {writer.total} rows of {args.query_id} in {len(writer.files)} {args.format} file(s), "
          f"{query.batches} batches; log {log}", file=sys.stderr)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
