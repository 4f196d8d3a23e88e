"""The resource sampler (harness/resources.py) on a plain process tree, no engine: it finds
children that start late and sums the tree's CPU and memory."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from harness.bound import judge
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
    assert list(df.columns) == ["ts_ms", "cpu_percent", "rss_bytes", "jvm_rss_bytes", "python_rss_bytes",
                                "engine_cpu_percent", "kit_in_engine_cpu_percent", "feed_cpu_percent",
                                "sink_cpu_percent"]
    assert len(df) >= 4 and df["ts_ms"].is_monotonic_increasing
    assert df["cpu_percent"].max() > 50                  # the child's busy loop, found after it started
    assert (df["python_rss_bytes"] > 0).all() and (df["jvm_rss_bytes"] == 0).all()
    assert sampler.peak_rss_bytes == df["rss_bytes"].max()


def test_the_kits_own_processes_are_sampled_apart_and_judged_per_process(tmp_path):
    # An idle engine tree, and a busy "feed" beside it (as the harness's driver process is): the
    # run's parts put the feed's core on the feed, not on the engine's tree.
    busy = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 2.5: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    sampler = ResourceSampler(idle.pid, tmp_path / "resources.csv", interval_s=0.25,
                              kit_pids=lambda: {busy.pid: "feed"}).start()
    sampler.mark()
    busy.wait()
    sampler.stop()
    idle.kill()
    parts = sampler.parts()
    assert parts["cpu_percent"]["feed"] > 40 and parts["cpu_percent"]["kit_in_engine"] < 10
    top = parts["processes"][0]
    assert (top["pid"], top["part"], top["label"]) == (busy.pid, "feed", "the feed (harness driver process)")
    df = read_resources(tmp_path / "resources.csv")
    assert df["feed_cpu_percent"].max() > 40 and (df["engine_cpu_percent"] < 10).all()
    # The verdict reads these parts: the busy feed bounds a run that fell behind once it is saturated.
    saturated = [{**top, "cpu_percent": 97.0}]
    assert judge(parts["cpu_percent"], saturated, parts["cores"], kept_up=False).label == "kit-bound (feed)"


def test_a_process_gone_before_it_is_labelled_does_not_end_the_sampler():
    # A process the sampler listed may exit before its label is read (seen across hosts: the
    # run ended with a NoSuchProcess traceback from proc.name()).
    import subprocess
    import sys

    import psutil

    from harness.resources import _label

    class ExitsMidLabel(psutil.Process):
        """Alive when asked, gone when read: the window between the two."""

        def is_running(self):
            return True

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    proc = ExitsMidLabel(child.pid)
    child.wait()
    assert _label(proc, "other", "engine") == f"a process (pid {child.pid})"
