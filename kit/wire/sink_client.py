"""Client of the harness sink, used by an engine program to hand over each micro-batch's rows.

The sink (harness/sink.py) stamps and writes what it receives; this side only frames an Arrow
table per (stream, batch id) and turns refusals into `SinkError`.
"""

from __future__ import annotations

import pyarrow as pa

from kit.errors import CepkitError
from kit.wire.connection import FrameClient, FrameConnection
from kit.wire.protocol import ProtocolError, encode_batches


class SinkError(CepkitError):
    """The sink refused or could not take a batch; the engine must fail, not drop it."""


class SinkClient(FrameClient):
    """Sends output batches to a SinkServer; used inside the engine program's foreachBatch.

    `emit` raises SinkError when the sink refuses a batch or stays unreachable for `reconnect_s`:
    a batch is never dropped silently. A resent batch after a lost answer is harmless: the sink
    writes each (stream, batch_id) once. `secret`: the run's secret (kit/wire/auth.py), presented
    on every connection; it pickles with the client.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, timeout_s: float = 60.0,
                 reconnect_s: float = 10.0, epoch: str | None = None, secret: str | None = None):
        if not port:
            raise SinkError("SinkClient: a port is required")
        self.host, self.port = host, int(port)
        # An engine whose restored jobs send answers again (Flink) tags its sends with the
        # sender's restart epoch: the sink drops the replayed answers (harness/replay_filter.py).
        self.epoch = epoch
        self._conn = FrameConnection(host, port, peer="sink", unreachable=SinkError, timeout_s=timeout_s,
                                     reconnect_s=reconnect_s, secret=secret)

    def _request(self, header: dict, body=None) -> dict:
        try:
            resp, _ = self._conn.request(header, body)
        except ProtocolError as e:
            raise SinkError(f"{self._conn.where}: {e}") from None
        if not resp.get("ok"):
            raise SinkError(f"{self._conn.where}: {resp.get('message', 'request failed')}")
        return resp

    def emit(self, stream: str, batch_id: int, table: pa.Table) -> int:
        """Send one stream's rows of one micro-batch; returns the rows the sink wrote."""
        body = encode_batches(table.schema, table.to_batches())
        header = {"op": "emit", "stream": stream, "batch_id": int(batch_id)}
        if self.epoch is not None:
            header["epoch"] = self.epoch
        return self._request(header, body)["rows"]

    def stats(self) -> dict:
        return self._request({"op": "stats"})["stats"]
