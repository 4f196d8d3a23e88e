"""The driver's wire protocol: length-prefixed frames over TCP (specs/DRIVER.md).

Every message, request or response, is one frame:

    uint32 header_len | uint32 body_len | header (UTF-8 JSON object) | body (bytes)

both lengths big-endian. Requests carry `{"op": ...}` and no body. Responses carry
`{"ok": true, ...}` and, for `hello` and `read`, an Arrow IPC stream as body (the schema alone for
`hello`; schema plus record batches for `read`). A failed request gets `{"ok": false, "error":
code, "message": one line}`; the client turns the code back into the matching exception. A server
started with the run's secret first asks every connection for it (kit/wire/auth.py).

Events travel as Arrow record batches, many per frame, so nothing on the hot path is per event.
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pyarrow as pa

from kit.errors import CepkitError

PROTOCOL_VERSION = 1
PREFIX = struct.Struct("!II")
MAX_HEADER_BYTES = 1 << 20
MAX_BODY_BYTES = (1 << 32) - 1
OPS = ("hello", "latest_offset", "read", "stats", "begin", "commit", "reads")


class DriverError(CepkitError):
    """The driver refused or failed a request; the message is one line."""

    code = "error"


class OffsetEvictedError(DriverError):
    """The requested offsets were released once but are no longer retained."""

    code = "evicted"


class BadRequestError(DriverError):
    code = "bad_request"


class ProtocolError(DriverError):
    """A malformed frame: the connection is out of step and is closed."""

    code = "protocol"


class UnauthorizedError(DriverError):
    """The server refused the connection: it did not present the run's secret (kit/wire/auth.py)."""

    code = "unauthorized"


ERRORS = {cls.code: cls for cls in (DriverError, OffsetEvictedError, BadRequestError, ProtocolError,
                                    UnauthorizedError)}


def error_header(err: BaseException) -> dict:
    code = err.code if isinstance(err, DriverError) else "internal"
    return {"ok": False, "error": code, "message": str(err) or type(err).__name__}


def raise_for(header: dict, where: str = "driver") -> dict:
    """The header itself if ok, else raise the error it describes, prefixed with `where`."""
    if header.get("ok"):
        return header
    cls = ERRORS.get(header.get("error"), DriverError)
    raise cls(f"{where}: {header.get('message', 'request failed')}")


def encode_frame(header: dict) -> bytes:
    """A whole frame without a body."""
    head = json.dumps(header, separators=(",", ":")).encode()
    return PREFIX.pack(len(head), 0) + head


def send_frame(sock: socket.socket, header: dict, body=None) -> None:
    head = json.dumps(header, separators=(",", ":")).encode()
    size = 0 if body is None else len(body)
    if size > MAX_BODY_BYTES:
        raise ProtocolError(f"response body of {size} bytes is too large for a frame")
    sock.sendall(PREFIX.pack(len(head), size) + head)
    if size:
        sock.sendall(memoryview(body))


# A body up to this size is allocated whole when its prefix arrives; a larger one grows as its
# bytes arrive, so a prefix that claims gigabytes and sends nothing costs nothing.
_PREALLOCATE_BYTES = 16 << 20


def _recv_into(sock: socket.socket, buf: memoryview, deadline: float | None = None) -> bool:
    """Fill `buf`; False on a clean end of stream before the first byte. With `deadline` (a
    time.monotonic() instant) TimeoutError once it passes, however slowly the bytes trickle in."""
    got = 0
    while got < len(buf):
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no whole frame in time")
            sock.settimeout(left)
        n = sock.recv_into(buf[got:])
        if n == 0:
            if got == 0:
                return False
            raise ConnectionResetError("connection closed in the middle of a frame")
        got += n
    return True


def recv_frame(sock: socket.socket, *, max_header: int = MAX_HEADER_BYTES, max_body: int = MAX_BODY_BYTES,
               deadline: float | None = None) -> tuple[dict, memoryview] | None:
    """One frame, or None if the peer closed the connection between frames. The caps are checked
    before anything is allocated (a server reads a connection's first frame, before it knows the
    peer, with small ones); `deadline` bounds the whole frame's arrival (see _recv_into)."""
    prefix = bytearray(PREFIX.size)
    if not _recv_into(sock, memoryview(prefix), deadline):
        return None
    head_len, body_len = PREFIX.unpack(prefix)
    if head_len > max_header:
        raise ProtocolError(f"frame header of {head_len} bytes exceeds {max_header}")
    if body_len > max_body:
        raise ProtocolError(f"frame body of {body_len} bytes exceeds {max_body}")
    head = bytearray(head_len)
    if head_len and not _recv_into(sock, memoryview(head), deadline):
        raise ConnectionResetError("connection closed in the middle of a frame")
    body = _recv_body(sock, body_len, deadline)
    try:
        header = json.loads(head)
    except (ValueError, RecursionError) as e:       # not UTF-8, not JSON, or nested beyond Python's stack
        raise ProtocolError(f"frame header is not JSON: {type(e).__name__}") from None
    if not isinstance(header, dict):
        raise ProtocolError("frame header is not a JSON object")
    return header, memoryview(body)


def _recv_body(sock: socket.socket, size: int, deadline: float | None) -> bytearray:
    """`size` bytes; allocated whole up to _PREALLOCATE_BYTES, grown as they arrive beyond."""
    if size <= _PREALLOCATE_BYTES:
        body = bytearray(size)
        if size and not _recv_into(sock, memoryview(body), deadline):
            raise ConnectionResetError("connection closed in the middle of a frame")
        return body
    body = bytearray(_PREALLOCATE_BYTES)
    got = 0
    while got < size:
        if got == len(body):
            body.extend(bytes(min(len(body), size - len(body))))     # doubles, up to the size
        view = memoryview(body)[got:]
        if not _recv_into(sock, view, deadline):
            raise ConnectionResetError("connection closed in the middle of a frame")
        got += len(view)
        view.release()
    return body


def encode_batches(schema: pa.Schema, batches) -> pa.Buffer:
    """An Arrow IPC stream: the schema, then each batch (none for a bare schema)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for b in batches:
            writer.write_batch(b)
    return sink.getvalue()


def decode_table(body) -> pa.Table:
    """The record batches of an IPC stream body as one table (zero-copy over the body)."""
    return pa.ipc.open_stream(pa.py_buffer(body)).read_all()
