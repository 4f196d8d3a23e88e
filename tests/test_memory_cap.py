"""The hostile-input tests' memory cap (tests/conftest.py `memory_cap`) holds: a runaway
allocation in the test, or in a command it starts, is a MemoryError, not an exhausted machine."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import MEMORY_HEADROOM_BYTES

pytestmark = pytest.mark.usefixtures("memory_cap")


def test_a_runaway_allocation_in_the_test_is_a_memory_error():
    with pytest.raises(MemoryError):
        bytearray(MEMORY_HEADROOM_BYTES + (1 << 30))


def test_a_command_the_test_starts_inherits_the_cap(memory_cap):
    # The child starts small, so it is asked for more than the whole cap (the test's own size + 4 GiB).
    proc = subprocess.run([sys.executable, "-c", f"bytearray({memory_cap + (1 << 30)})"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "MemoryError" in proc.stderr
