"""The resource sampler (harness/resources.py) on a plain process tree, no engine: it finds
children that start late and sums the tree's CPU and memory."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from harness.resources import ResourceSampler
from validator.outputlog import read_resources

pytestmark = pytest.mark.alone      # it measures a busy child CPU share


def test_resource_sampler_sums_a_process_tree_whose_children_appear_late(tmp_path):
    # A parent that starts a busy child after a moment, as the program starts its JVM.
    busy = "import time\\nt = time.time()\\nwhile time.time() - t < 1.5: pass"
    code = f"import subprocess, sys, time; time.sleep(0.3); subprocess.run([sys.executable, '-c', '{busy}'])"
    proc = subprocess.Popen([sys.executable, "-c", code])
    sampler = ResourceSampler(proc.pid, tmp_path / "resources.csv", interval_s=0.25).start()
    proc.wait()
    time.sleep(0.5)     # the sampler notices the root is gone and stops sampling by itself
    sampler.stop()
    df = read_resources(tmp_path / "resources.csv")
    assert list(df.columns) == ["ts_ms", "cpu_percent", "rss_bytes", "jvm_rss_bytes", "python_rss_bytes"]
    assert len(df) >= 4 and df["ts_ms"].is_monotonic_increasing
    assert df["cpu_percent"].max() > 50                  # the child's busy loop, found after it started
    assert (df["python_rss_bytes"] > 0).all() and (df["jvm_rss_bytes"] == 0).all()
    assert sampler.peak_rss_bytes == df["rss_bytes"].max()
