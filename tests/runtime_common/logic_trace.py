"""Running the Java twins of the micro cores (runtime_common/java/cepkit/logic) over test traces.

`cepkit.logic.LogicTrace` (a main class) feeds each case's events through a query's logic in the
case's micro-batches, as an engine operator would, and writes the rows with doubles as their bits.
The classes are compiled once per session with `javac` against nothing but the JDK and Jackson
(PySpark's jar of it), and a test module runs all its cases in one JVM (`run_cases`), so the checks
stay in the default run. `assert_bits` compares with the reference bit for bit.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "runtime_common" / "java"
MAIN = SOURCES / "cepkit" / "logic" / "LogicTrace.java"
HAVE_JDK = shutil.which("javac") is not None and shutil.which("java") is not None


def jackson_jars() -> list[str]:
    import pyspark

    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    found = [p for stem in ("jackson-core-", "jackson-databind-", "jackson-annotations-")
             for p in sorted(glob.glob(os.path.join(jars, stem + "[0-9]*.jar")))]
    assert len(found) == 3, f"Jackson's jars not found in {jars}"
    return found


@functools.lru_cache(maxsize=None)
def class_path() -> str:
    """The compiled logic (only what LogicTrace reaches, via -sourcepath) and Jackson."""
    sources = sorted((SOURCES / "cepkit" / "logic").glob("*.java"))
    key = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources)).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"cepkit-logic-test-{os.getuid()}-{key}"
    jars = jackson_jars()
    if not (out / "cepkit" / "logic" / "LogicTrace.class").is_file():
        staged = Path(tempfile.mkdtemp(prefix="cepkit-logic-"))
        proc = subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", os.pathsep.join(jars),
                               "-sourcepath", str(SOURCES), "-d", str(staged), str(MAIN)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        if out.exists():
            shutil.rmtree(out, ignore_errors=True)
        os.replace(staged, out)
    return os.pathsep.join([str(out), *jars])


@dataclass
class Case:
    """One trace: a query literal, its events (a frame as the cores get them), the batches as
    (start, stop) bounds, a seed for the random state round trips, and the mode (stream or keyed)."""

    name: str
    query: dict
    events: pd.DataFrame
    cuts: list
    seed: int = 0
    mode: str = "stream"
    rows: pd.DataFrame | None = field(default=None, repr=False)
    live: int | None = None
    state_bytes: int | None = None


def _events_csv(q: dict, ev: pd.DataFrame, path: Path) -> None:
    index = {name: i for i, name in enumerate(q["inputs"])}
    attrs = sorted((c for c in ev.columns if c[:1] == "A" and c[1:].isdigit()), key=lambda c: int(c[1:]))
    out = pd.DataFrame({"stream": ev["stream"].map(index).fillna(-1).astype(np.int64),
                        "ID": ev["ID"].astype(np.int64)})
    for a in attrs:
        out[a] = ev[a].astype(np.float64)
    for c in ("TS", "offset", "ingestTS"):
        out[c] = ev[c].astype(np.int64)
    out.to_csv(path, index=False, float_format="%.17g")


def _double(bits: str) -> float:
    return struct.unpack("<d", int(bits[1:], 16).to_bytes(8, "little"))[0]


def run_cases(cases: list[Case], work: Path, fails: bool = False) -> str:
    """Run every case in one JVM; fills each case's `rows` (the query's fields, then `ingestTS`
    and `_trigger`, the triggering event's offset) and `live` (keyed runs: candidates held at the
    end) or `state_bytes` (whole-stream runs: the largest state written after a batch). With
    `fails`, the run must fail: its error output is returned."""
    work.mkdir(parents=True, exist_ok=True)
    manifest, written = [], {}
    for i, c in enumerate(cases):
        key = id(c.events)
        if key not in written or written[key][1] != tuple(c.query["inputs"]):
            path = work / f"events-{i}.csv"
            _events_csv(c.query, c.events, path)
            written[key] = (path, tuple(c.query["inputs"]))
        manifest.append({"query": c.query, "events": str(written[key][0]), "cuts": [list(map(int, b)) for b in c.cuts],
                         "seed": c.seed, "mode": c.mode, "out": str(work / f"out-{i}.csv")})
    (work / "manifest.json").write_text(json.dumps({"cases": manifest}))
    # C1 only: a short run of many small cases, where the JIT's second tier costs more than it saves.
    proc = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-cp", class_path(), "cepkit.logic.LogicTrace",
                           str(work / "manifest.json")],
                          capture_output=True, text=True, timeout=600)
    if fails:
        assert proc.returncode != 0
        return proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    for i, c in enumerate(cases):
        lines = (work / f"out-{i}.csv").read_text().splitlines()
        if lines and lines[-1].startswith("#live "):
            c.live = int(lines.pop()[len("#live "):])
        if lines and lines[-1].startswith("#bytes "):
            c.state_bytes = int(lines.pop()[len("#bytes "):])
        cols = {name: [] for name in (*c.query["fields"], "ingestTS", "_trigger")}
        for line in lines:
            parts = line.split(",")
            cols["_trigger"].append(int(parts[0]))
            for name, v in zip((*c.query["fields"], "ingestTS"), parts[1:]):
                cols[name].append(_double(v) if v.startswith("x") else int(v))
        dtypes = [np.float64 if t == "double" else np.int64 for t in c.query["types"]] + [np.int64, np.int64]
        c.rows = pd.DataFrame({name: np.asarray(v, dtype=d) for (name, v), d in zip(cols.items(), dtypes)})
    return proc.stderr


def bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float64)).view(np.int64)


def assert_bits(got: pd.DataFrame, exp: pd.DataFrame, q: dict, near: tuple[str, ...] = ()) -> None:
    """`got` (a case's rows in emission order) is the reference's `exp`: same rows in the same
    order, ints equal and doubles equal bit for bit, except the columns `near`, which must agree
    within the validator's default tolerance (the caller checks those another way)."""
    assert len(got) == len(exp), (len(got), len(exp))
    for name, t in zip(q["fields"], q["types"]):
        g, e = got[name].to_numpy(), exp[name].to_numpy()
        if t != "double":
            assert (g.astype(np.int64) == e.astype(np.int64)).all(), name
        elif name in near:
            e = e.astype(np.float64)
            assert (np.abs(g - e) <= 1e-9 + 1e-9 * np.abs(e)).all(), name
        else:
            bad = np.flatnonzero(bits(g) != bits(e))
            assert len(bad) == 0, f"{name}: {len(bad)} rows differ, first at {bad[0]}: {g[bad[0]]!r} != {e[bad[0]]!r}"


def in_trigger_order(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of a keyed run (keys handled in any order within a batch) in the reference order: by
    triggering event, each trigger's rows as emitted."""
    return rows.sort_values("_trigger", kind="stable").reset_index(drop=True)
