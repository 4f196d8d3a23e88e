"""kit.inputs: every input read by name is a regular file, and a document is read under its kind's
cap, enforced while reading. Each hostile case runs in a child process under a memory cap and a
time limit (tests/fuzz.py `run_capped`): on the old code a FIFO hung the reader forever and
/dev/zero as a manifest filled the memory.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from kit.errors import CepkitError
from kit.inputs import LIMITS, read_input_bytes, require_regular, size_text
from tests.fuzz import run_capped

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

# Every reader of a document the kit reads by name, called on argv[1] in a child process; each
# prints the one-line error (or "ok") so the parent can check it.
READERS = {
    "config": "from kit.config import load_config as f; f(p)",
    "spec": "from kit.workload import read_spec as f; f(p)",
    "manifest": "from kit.manifest import load_manifest as f; f(os.path.dirname(p))",
    "aux": "from kit.workload import load_aux as f; f(p)",
    "output-log": "from validator.outputlog import read_output_log as f; f(p)",
    "run": "from validator.compare_runs import engine_record as f; f(Path(p))",
    "json": "from kit.jsonfile import read_json_object as f; f(p)",
    "secret": "from harness.postgres import read_database_dsn as f; f(p)",
}
FILE_NAMES = {"config": "c.toml", "spec": "s.xml", "manifest": "manifest.json", "aux": "pairs-aux.json",
              "output-log": "output-log.json", "run": "run.json", "json": "d.json",
              "secret": "dsn"}


def _read_in_child(kind: str, path: Path, timeout_s: float = 30) -> str:
    code = ("import os, sys\nfrom pathlib import Path\nfrom kit.errors import CepkitError\np = sys.argv[1]\n"
            f"try:\n    {READERS[kind]}\nexcept CepkitError as e:\n    print(e)\nelse:\n    print('ok')\n")
    res = run_capped(code, str(path), timeout_s=timeout_s)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip().removeprefix("run.database_dsn: ")     # the setting that named the file


def test_the_table_has_every_kind_and_names_its_caps():
    assert set(LIMITS) == set(READERS)
    assert LIMITS["config"] == 1 << 20 and size_text(LIMITS["config"]) == "1024 KiB"
    assert size_text(LIMITS["spec"]) == "128 MiB"


@pytest.mark.parametrize("kind", list(READERS))
def test_a_fifo_is_refused_at_once(tmp_path, kind):
    """No writer ever opens the FIFO: the old readers blocked in open() forever."""
    path = tmp_path / FILE_NAMES[kind]
    os.mkfifo(path)
    line = _read_in_child(kind, path, timeout_s=20)
    assert line == f"{path}: is a FIFO (named pipe), not {_what(kind)}", line


def _what(kind: str) -> str:
    return {"config": "a config file", "spec": "a spec file", "manifest": "a manifest file",
            "aux": "an auxiliary file", "output-log": "an output log", "run": "an engine run record",
            "json": "a JSON file", "secret": "a DSN file"}[kind]


def test_dev_zero_as_a_manifest_is_one_line(tmp_path):
    """/dev/zero never ends: the old reader read it until the machine ran out of memory."""
    (tmp_path / "manifest.json").symlink_to("/dev/zero")
    line = _read_in_child("manifest", tmp_path / "manifest.json")
    assert line == f"{tmp_path / 'manifest.json'}: is a device, not a manifest file"


@pytest.mark.parametrize("kind", ["config", "spec", "json"])
def test_a_terminal_or_device_never_blocks(tmp_path, kind):
    path = tmp_path / FILE_NAMES[kind]
    path.symlink_to("/dev/null")
    assert _read_in_child(kind, path) == f"{path}: is a device, not {_what(kind)}"


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "d.json"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(CepkitError, match=r"d\.json: is a socket, not a JSON file$"):
            read_input_bytes(path, "json", what="a JSON file")


# load_aux takes a dataset directory too (and reads its pairs-aux.json), so a directory is no error there.
@pytest.mark.parametrize("kind", [k for k in READERS if k != "aux"])
def test_a_directory_is_refused(tmp_path, kind):
    path = tmp_path / FILE_NAMES[kind]
    path.mkdir()
    assert _read_in_child(kind, path) == f"{path}: is a directory, not {_what(kind)}"


@pytest.mark.parametrize("kind", list(READERS))
def test_an_oversized_file_is_refused_having_read_at_most_the_cap(tmp_path, kind):
    """A sparse file one byte over the cap (and one far over it: 64 GiB, which the old readers
    tried to read whole): one line naming the cap."""
    for size in (LIMITS[kind] + 1, 64 << 30):
        path = tmp_path / str(size) / FILE_NAMES[kind]
        path.parent.mkdir()
        with open(path, "wb") as fh:
            fh.truncate(size)
        line = _read_in_child(kind, path)
        assert line == f"{path}: not {_what(kind)}: larger than {size_text(LIMITS[kind])}", line


@pytest.mark.parametrize("kind", list(LIMITS))
def test_a_file_of_exactly_the_cap_is_read(tmp_path, kind):
    path = tmp_path / "f"
    with open(path, "wb") as fh:
        fh.write(b"{}")
        fh.truncate(LIMITS[kind])
    data = read_input_bytes(path, kind)
    assert len(data) == LIMITS[kind] and data.startswith(b"{}")


def test_documents_at_the_cap_parse(tmp_path):
    """A config and a JSON document padded to exactly their cap are read as usual."""
    from kit.config import load_config
    from kit.jsonfile import read_json_object
    cfg = tmp_path / "c.toml"
    head = b"[pairs]\nseed = 7\n#"
    cfg.write_bytes(head + b"x" * (LIMITS["config"] - len(head) - 1) + b"\n")
    assert cfg.stat().st_size == LIMITS["config"]
    assert load_config(cfg).pairs.seed == 7
    doc = tmp_path / "d.json"
    text = json.dumps({"a": 1}).encode()
    doc.write_bytes(text + b" " * (LIMITS["json"] - len(text)))
    assert read_json_object(doc) == {"a": 1}


def test_a_data_file_is_checked_for_its_kind_only(tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(LIMITS["json"] * 4)          # data files have no cap
    assert require_regular(big) == big
    os.mkfifo(tmp_path / "ticks.csv")
    with pytest.raises(CepkitError, match=r"ticks\.csv: is a FIFO \(named pipe\), not a data file$"):
        require_regular(tmp_path / "ticks.csv")
    with pytest.raises(CepkitError, match=r"nope\.csv: not found$"):
        require_regular(tmp_path / "nope.csv")
    (tmp_path / "dangling.csv").symlink_to(tmp_path / "gone.csv")
    with pytest.raises(CepkitError, match=r"not found: a dangling symbolic link \(to '.*gone\.csv'"):
        require_regular(tmp_path / "dangling.csv")
