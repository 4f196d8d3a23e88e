"""One playback of a dataset by the load driver (`Driver`): events released at their scheduled times.

The driver runs as its own process, separate from the engine under test (seed 001 section 4), and is
pulled from: the engine's source asks over loopback TCP how many events have been released
(`latest_offset`) and reads offset ranges (`read`), any range again if it restarts. Three threads
do the work:

- the loader reads the dataset in event order, chunk by chunk, and computes every event's due
  time with numpy (a few chunks ahead, so reading never delays a release);
- the release loop sleeps until the next event is due, then releases everything due by now in one
  step: it advances the released offset, stamps TS in send mode, and records the step's lateness;
- the server answers requests from any number of connections (harness/server.py).

Use `Driver(cfg)` as a context manager in-process; harness.driver runs one until stopped
(`run_driver`, `python -m harness.driver`). specs/DRIVER.md describes the clocks, stamping,
retention and the protocol.
"""

from __future__ import annotations

import gc
import queue
import sys
import threading
import time

import numpy as np

from harness.buffer import Chunk, ReleaseBuffer, served_runs
from harness.config import DriverConfig
from harness.dataset import Dataset, iter_events, open_dataset
from kit.wire.auth import AUTH_TIMEOUT_S
from kit.wire.protocol import OPS, PROTOCOL_VERSION, BadRequestError, DriverError, encode_batches
from harness.schedule import EpochClock, LatenessRecorder, Pacing, aligned_run_start, check_aligned
from harness.server import FrameServer
from kit.errors import CepkitError

# The longest single sleep of the release loop: bounds how long stop() waits for it.
MAX_SLEEP_S = 0.02
# A waiting request (wait_ms) is capped so a stuck client cannot pin a server thread forever.
MAX_WAIT_MS = 60_000
# Process-wide GIL switch interval for the driver process (the default is 5 ms): a release thread
# that wakes up on time must not wait behind a server thread encoding a large response.
DRIVER_SWITCH_INTERVAL_S = 0.0005
# begin() waits at most this long for the first chunk before fixing the run start.
FIRST_CHUNK_WAIT_S = 30.0


class _End:
    """Loader's last item: `failed` is None after the final chunk, else why reading stopped."""

    def __init__(self, failed: str | None = None):
        self.failed = failed


class Driver:
    """One playback of one dataset; serves on `host:port` from `start()` until `stop()`."""

    def __init__(self, cfg: DriverConfig, *, tune_process: bool = False, secret: str | None = None,
                 on_refused=None, auth_timeout_s: float = AUTH_TIMEOUT_S):
        """`tune_process`: the driver owns this process (python -m harness.driver), so it may set
        process-wide knobs for punctual releases (GIL switch interval, frozen GC generations).
        `secret`: the run's (kit/wire/auth.py), which every connection must present first, and
        `on_refused` hears one line per connection refused without it (harness/server.py); kept
        out of `cfg`, which is written to run.json."""
        self.cfg = cfg
        self._tune_process = tune_process
        self._secret, self._on_refused, self._auth_timeout_s = secret, on_refused, auth_timeout_s
        self.dataset: Dataset = open_dataset(cfg.dataset_dir, cfg.streams, verify=cfg.verify)
        if self.dataset.total_rows == 0:
            raise CepkitError(f"{cfg.dataset_dir}: the selected streams hold no events")
        self.pacing = Pacing(cfg.pacing, self.dataset.sim_start_ms, cfg.speed, cfg.rate_eps)
        if cfg.start_wall_ms is not None:
            check_aligned(cfg.start_wall_ms, self.dataset.sim_start_ms, cfg.align_ms)
        self.clock = EpochClock()
        self.buffer = ReleaseBuffer(cfg.retain_bytes, self.dataset.total_rows, cfg.keep_unread_events)
        self.offset_requests = 0        # an engine source asking for offsets: it is up (stats)
        self.lateness = LatenessRecorder()
        self.run_start_wall_ms: int | None = None
        self._schema = self.dataset.out_schema
        self._ts_index = self.dataset.ts_index
        self._queue: queue.Queue = queue.Queue(maxsize=cfg.prefetch_chunks)
        self._stopping = threading.Event()
        self._begin_lock = threading.Lock()
        self._first_loaded = threading.Event()
        self._loader = threading.Thread(target=self._load_loop, name="driver-loader", daemon=True)
        self._releaser = threading.Thread(target=self._release_loop, name="driver-release", daemon=True)
        self._server: FrameServer | None = None
        self._started = False

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "Driver":
        """Listen, start reading ahead and, unless `hold`, begin the run."""
        if self._started:
            return self
        self._started = True
        if self._tune_process:
            sys.setswitchinterval(DRIVER_SWITCH_INTERVAL_S)
        self._server = FrameServer(self.cfg.host, self.cfg.port, self._handle, secret=self._secret, label="feed",
                                   on_refused=self._on_refused, auth_timeout_s=self._auth_timeout_s)
        self._server.start()
        self._loader.start()
        if not self.cfg.hold:
            self.begin()
        return self

    def begin(self, start_wall_ms: int | None = None) -> int:
        """Fix the run start (idempotent) and start releasing; returns run_start_wall_ms."""
        with self._begin_lock:
            if self.run_start_wall_ms is not None:
                return self.run_start_wall_ms
            if not self._started:
                raise DriverError("begin: the driver has not been started")
            # The first read pays one-off costs (pyarrow imports pandas lazily, holding the GIL for
            # ~0.5 s); fix the run start only after it, or the first releases would be late.
            self._first_loaded.wait(FIRST_CHUNK_WAIT_S)
            if self._stopping.is_set():
                raise DriverError("begin: the driver is stopping")
            if self._tune_process:
                # Start-up (imports, the first read) leaves many long-lived objects; frozen, they
                # are no longer scanned by full collections, which otherwise pause all threads
                # for ~20 ms mid-run.
                gc.collect()
                gc.freeze()
            start = start_wall_ms if start_wall_ms is not None else self.cfg.start_wall_ms
            sim0, align = self.dataset.sim_start_ms, self.cfg.align_ms
            if start is None:
                start = aligned_run_start(self.clock.now_ms() + self.cfg.lead_ms, sim0, align)
            else:
                check_aligned(int(start), sim0, align)
            self.run_start_wall_ms = int(start)
            self._releaser.start()
            return self.run_start_wall_ms

    def stop(self) -> None:
        """Stop releasing and serving; joins every thread the driver started."""
        self._stopping.set()
        self._first_loaded.set()
        self.buffer.close()
        if self._server is not None:
            self._server.stop()
        for t in (self._releaser, self._loader):
            if t.is_alive():
                t.join()

    def __enter__(self) -> "Driver":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise DriverError("the driver is not listening yet: call start()")
        return self._server.port

    @property
    def host(self) -> str:
        return self.cfg.host

    def wait_finished(self, timeout_s: float | None = None) -> bool:
        """Block until every event is released (True) or the run failed / timed out (False)."""
        with self.buffer.cond:
            self.buffer.cond.wait_for(lambda: self.buffer.finished or self.buffer.failed or self.buffer.closed,
                                      timeout_s)
            return self.buffer.finished

    # ---- reading ahead ---------------------------------------------------------------------

    def _put(self, item) -> bool:
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                self._first_loaded.set()
                return True
            except queue.Full:
                continue
        return False

    def _load_loop(self) -> None:
        offset = 0
        try:
            for payload, sim_ts in iter_events(self.dataset, self.cfg.chunk_rows):
                if not self._put((offset, payload, self.pacing.due_rel_ms(offset, sim_ts))):
                    return
                offset += payload.num_rows
            self._put(_End())
        except CepkitError as e:
            self._put(_End(str(e)))
        except Exception as e:  # noqa: BLE001 - reported to clients and the runner as one line
            self._put(_End(f"{self.dataset.directory}: reading failed: {type(e).__name__}: {e}"))

    # ---- releasing ---------------------------------------------------------------------------

    def _adopt(self, item: tuple) -> Chunk:
        first, payload, rel_ms = item
        due = rel_ms + self.run_start_wall_ms
        # Scheduled stamping: TS is the due time itself (one array); send stamping fills TS on release.
        ts = due if self.cfg.stamp == "scheduled" else np.zeros_like(due)
        chunk = Chunk(first, payload, due, ts)
        self.buffer.add(chunk)
        return chunk

    def _next_item(self):
        while not self._stopping.is_set():
            try:
                return self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
        return None

    def _release_loop(self) -> None:
        clock, buf, lateness = self.clock, self.buffer, self.lateness
        send = self.cfg.stamp == "send"
        pull, window = self.cfg.pacing == "pull", self.cfg.pull_window_events
        cap = 0
        chunk: Chunk | None = None
        pos = released = 0
        while not self._stopping.is_set():
            if chunk is None or pos >= chunk.rows:
                item = self._next_item()
                if item is None:
                    return
                if isinstance(item, _End):
                    buf.finish(item.failed)
                    return
                chunk, pos = self._adopt(item), 0
                continue
            due0 = int(chunk.due_ms[pos])
            now = clock.now_ms()
            if now < due0:
                time.sleep(min((due0 - now) / 1000.0, MAX_SLEEP_S))
                continue
            if pull:
                # Release only up to `window` ahead of the engine's reads; wait for a read otherwise.
                cap = buf.pulled + window
                if released >= cap:
                    buf.wait_pulled_beyond(released - window, MAX_SLEEP_S)
                    continue
                now = clock.now_ms()
            # One release step: every event due by now, across chunk boundaries if one is ready.
            now_ms = int(now)               # due times are whole ms: due <= now  <=>  due <= floor(now)
            end = None
            while True:
                k = int(np.searchsorted(chunk.due_ms, now_ms, side="right"))
                if pull:
                    k = min(k, pos + cap - released)
                if send:
                    chunk.ts_ms[pos:k] = now_ms
                released += k - pos
                pos = k
                if pos < chunk.rows or (pull and released >= cap):
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, _End):
                    end = item
                    break
                chunk, pos = self._adopt(item), 0
            buf.publish(released)
            if not pull:                    # pull pacing has no due times to be late for
                lateness.add(now - due0)
            if end is not None:
                buf.finish(end.failed)
                return

    # ---- answering requests ------------------------------------------------------------------

    def info(self) -> dict:
        """What a client needs before reading: stream layout, size and clocks."""
        ds = self.dataset
        return {
            "protocol": PROTOCOL_VERSION, "kind": ds.kind, "dataset": str(ds.directory),
            "streams": [s.name for s in ds.streams], "total_events": ds.total_rows,
            "columns": [[f.name, str(f.type)] for f in self._schema],
            "clocks": self.clocks(),
        }

    def clocks(self) -> dict:
        """The output log's clock fields (specs/OUTPUT_LOG.md) plus how TS was made."""
        return {"run_start_wall_ms": self.run_start_wall_ms, "sim_start_ms": self.dataset.sim_start_ms,
                "speed": self.cfg.speed if self.cfg.pacing == "tickts" else None,
                "pacing": self.cfg.pacing, "rate_eps": self.cfg.rate_eps, "stamp": self.cfg.stamp,
                "align_ms": self.cfg.align_ms}

    def stats(self) -> dict:
        buf = self.buffer
        with buf.cond:
            out = {"released": buf.released, "pulled": buf.pulled, "backlog": buf.released - buf.pulled,
                   "total_events": buf.total_events, "finished": buf.finished, "failed": buf.failed,
                   "retained_from": buf.retained_from, "retained_bytes": buf.retained_bytes,
                   "served_rows": buf.served_rows, "reads": buf.reads, "committed": buf.committed}
        out["offset_requests"] = self.offset_requests
        out["run_start_wall_ms"] = self.run_start_wall_ms
        out["now_ms"] = round(self.clock.now_ms(), 3)
        out["connections_open"] = self._server.open_connections if self._server else 0
        out["connections_total"] = self._server.connections_total if self._server else 0
        out["refused_connections"] = self._server.refused if self._server else 0
        out["lateness"] = self.lateness.summary()
        return out

    def _handle(self, req: dict) -> tuple[dict, object]:
        op = req.get("op")
        if op == "read":
            return self._read(req)
        if op == "latest_offset":
            self.offset_requests += 1
            after = _req_int(req, "after", -1)
            wait_ms = min(_req_int(req, "wait_ms", 0), MAX_WAIT_MS)
            released = self.buffer.wait_beyond(after, wait_ms / 1000.0) if wait_ms > 0 else self.buffer.released
            if self.buffer.failed:
                raise DriverError(self.buffer.failed)
            return {"ok": True, "offset": released, "finished": self.buffer.finished,
                    "total_events": self.buffer.total_events}, None
        if op == "stats":
            return {"ok": True, "stats": self.stats()}, None
        if op == "commit":
            if "before_ms" in req:      # by time: the reads answered before a checkpoint's trigger
                before, after = _req_int(req, "before_ms", None), _req_int(req, "after_ms", 0)
                return {"ok": True, "committed": self.buffer.commit_reads(after, before)}, None
            end = _req_int(req, "end", None)
            if end < 0:
                raise BadRequestError(f"commit: end must be >= 0, got {end}")
            split = None
            if "split" in req:          # one split of several (specs/DRIVER.md, "Splits")
                split = (_req_int(req, "split", None), _req_int(req, "splits", None))
            self.buffer.commit(end, split)
            return {"ok": True}, None
        if op == "reads":               # how far reads answered since a time reached (a restored job)
            return {"ok": True, "end": self.buffer.read_end_since(_req_int(req, "after_ms", 0))}, None
        if op == "hello":
            return {"ok": True, "info": self.info()}, encode_batches(self._schema, [])
        if op == "begin":
            start = req.get("start_wall_ms")
            if start is not None and (isinstance(start, bool) or not isinstance(start, int)):
                raise BadRequestError(f"begin: start_wall_ms must be an integer, got {start!r}")
            try:
                started = self.begin(start)
            except DriverError:
                raise
            except CepkitError as e:       # a misaligned start_wall_ms: the request's fault
                raise BadRequestError(str(e)) from None
            return {"ok": True, "run_start_wall_ms": started, "clocks": self.clocks()}, None
        raise BadRequestError(f"unknown op {op!r} (known: {', '.join(OPS)})")

    def _read(self, req: dict) -> tuple[dict, object]:
        start = _req_int(req, "start", None)
        end = _req_int(req, "end", None)
        max_rows = min(_req_int(req, "max_rows", self.cfg.max_read_rows), self.cfg.max_read_rows)
        wait_ms = min(_req_int(req, "wait_ms", 0), MAX_WAIT_MS)
        if max_rows < 1:
            raise BadRequestError(f"read: max_rows must be >= 1, got {max_rows}")
        split = None
        if "split" in req:              # a split reader's (specs/DRIVER.md, "Splits")
            split = (_req_int(req, "split", None), _req_int(req, "splits", None), _req_int(req, "block", None))
            if split[2] < 1:
                raise BadRequestError(f"read: block must be >= 1, got {split[2]}")
        if wait_ms > 0 and end > start:
            self.buffer.wait_beyond(start, wait_ms / 1000.0)
        stop, pieces = self.buffer.take(start, end, max_rows, split)
        body = encode_batches(self._schema, [c.batch(lo, hi, self._schema, self._ts_index) for c, lo, hi in pieces])
        head = {"ok": True, "start": start, "end": stop, "rows": stop - start, "released": self.buffer.released,
                "finished": self.buffer.finished, "served": served_runs(pieces)}
        if split is not None:           # a caught-up split's watermark: `released` and `last_ts` go together
            head["released"], head["last_ts"] = self.buffer.last_ts()
        return head, body


def _req_int(req: dict, key: str, default):
    value = req.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        raise BadRequestError(f"{req.get('op')}: {key} must be an integer, got {value!r}")
    return value
