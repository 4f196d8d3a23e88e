"""How a core's state is stored between micro-batches: one binary value per group.

A core's state is a dict of Python scalars, lists, dicts and numpy arrays. It used to be a JSON
string, whose encoding and parsing grew with the window and cost more than the core's own work
once the cores were vectorized (a 1 s pattern window at 100 K ev/s is 100 K candidates). Pickle
(protocol 5) stores numpy arrays as their raw buffers and keeps doubles exact. The bytes are only
ever read back by this runtime from its own checkpoint, never from outside input.
"""

from __future__ import annotations

import pickle

PROTOCOL = 5


def dumps(state: dict) -> bytes:
    return pickle.dumps(state, protocol=PROTOCOL)


def loads(blob: bytes) -> dict:
    return pickle.loads(blob)


def round_trip(state: dict) -> dict:
    """What the next batch sees: the state as stored and read back (tests use it between batches)."""
    return loads(dumps(state))
