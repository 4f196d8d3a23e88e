"""kit.manifest: the one reader and verifier of a dataset's manifest.json (issue 14, finding 2).

On the main before it there were three readers, none of which verified a file's sha256, confined
a symlinked path to the dataset directory or counted a CSV file's rows: every test below that
expects an error on a changed file, a symlink escaping the directory or a wrong CSV row count
fails there (`kit.manifest` did not exist at all; the validator read whatever the manifest listed).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kit.datafiles as kd
import kit.manifest as km
from datagen.micro import generate_micro
from datagen.pairs import generate_pairs
from kit.config import MicroConfig, RateConfig
from kit.errors import CepkitError
from tests.fuzz import fuzz_settings
from tests.helpers import pairs_config


@pytest.fixture(scope="module")
def ticks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("manifest") / "ticks"
    generate_pairs(pairs_config(file_count=3, rate={"duration_s": 30.0, "basis_rate_eps": 200.0}), out)
    return out


@pytest.fixture(scope="module")
def csv_ticks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("manifest") / "csv"
    generate_pairs(pairs_config(file_count=2, format="csv", rate={"duration_s": 30.0, "basis_rate_eps": 200.0}), out)
    return out


@pytest.fixture(scope="module")
def micro(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("manifest") / "micro"
    cfg = MicroConfig(streams=2, table_rows=50, rate=RateConfig(profile="constant", basis_rate_eps=100.0,
                                                                  duration_s=5.0))
    generate_micro(cfg, out)
    return out


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def edit(ds: Path, change) -> None:
    m = json.loads((ds / "manifest.json").read_text())
    change(m)
    (ds / "manifest.json").write_text(json.dumps(m, indent=2))


def error_of(ds: Path, verify: bool = True) -> str:
    with pytest.raises(CepkitError) as e:
        km.read_manifest(ds, verify=verify)
    assert "\n" not in str(e.value)
    return str(e.value)


# -- reading ---------------------------------------------------------------------------------

def test_reads_a_generated_tick_dataset(ticks):
    m = km.read_manifest(ticks)
    assert m.kind == "ticks" and m.format == "parquet" and m.generator == "pairs"
    assert [f.key for f in m.files] == ["files[0]", "files[1]", "files[2]"]
    assert all(f.path.is_file() and f.sha256 and f.bytes for f in m.files)
    assert m.start_epoch_ms == m.doc["start_epoch_ms"] and m.aux_path == ticks / "pairs-aux.json"
    assert m.rate_profile().duration_ms == 30_000
    assert m.data_files() == m.files and m.streams == () and m.table is None


def test_reads_a_micro_dataset_with_its_table(micro):
    m = km.read_manifest(micro)
    assert m.kind == "micro" and [s.name for s in m.streams] == ["S1", "S2"]
    assert m.table is not None and m.table.rows == 50
    # Every file once, though `files` and `streams[i].files` both list the stream files.
    names = [f.name for f in m.data_files()]
    assert len(names) == len(set(names)) == 3


def test_the_one_writer_sets_the_header_and_keeps_the_field_order(tmp_path):
    fields = {"seed": 3, "format": "csv", "start_epoch_ms": 5, "total_rows": 0, "files": []}
    doc = km.write_manifest(tmp_path, "pairs", **fields)
    assert list(doc) == ["kind", "schema_version", "generator", "versions", *fields]
    assert (doc["kind"], doc["schema_version"], doc["generator"]) == ("cepkit.datagen-manifest", 1, "pairs")
    assert json.loads((tmp_path / km.FILE_NAME).read_text()) == doc
    with pytest.raises(TypeError, match="kind"):
        km.write_manifest(tmp_path, "pairs", kind="other", **fields)
    with pytest.raises(TypeError, match="files"):
        km.write_manifest(tmp_path, "pairs", **{k: v for k, v in fields.items() if k != "files"})


# -- the document ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, match", [
    ('{"kind": "cepkit.datagen-manifest",\n "schema_version": 1', r"manifest.json:2: invalid JSON"),
    ("[1, 2]", r"manifest.json:1: expected a JSON object"),
    ('{"kind": NaN}', r"manifest.json: invalid JSON: NaN is not a JSON number"),
    ('{"kind": "x"}', r"manifest.json:kind: expected 'cepkit.datagen-manifest', got 'x'"),
    ('{"kind": "cepkit.datagen-manifest", "schema_version": true}', r"manifest.json:schema_version: expected 1"),
    ('{"kind": "cepkit.datagen-manifest", "schema_version": 2}', r"manifest.json:schema_version: expected 1, got 2"),
])
def test_bad_documents(tmp_path, text, match):
    (tmp_path / "manifest.json").write_text(text)
    assert pytest.raises(CepkitError, km.read_manifest, tmp_path).match(match)


def test_not_utf8_and_missing(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "manifest.json").write_bytes(b'{\n"kind": "\xff"}')
    assert pytest.raises(CepkitError, km.read_manifest, tmp_path / "a").match(r"manifest.json:2: not UTF-8")
    assert pytest.raises(CepkitError, km.read_manifest, tmp_path / "b").match(r"b: dataset directory not found")
    (tmp_path / "c").mkdir()
    assert pytest.raises(CepkitError, km.read_manifest, tmp_path / "c").match(r"c/manifest.json: not found")


@pytest.mark.parametrize("change, match", [
    (lambda m: m.pop("format"), r"manifest.json:format: expected 'parquet' or 'csv', got None"),
    (lambda m: m.update(start_epoch_ms=1.5), r"manifest.json:start_epoch_ms: expected an integer"),
    (lambda m: m.update(files={}), r"manifest.json:files: expected a non-empty list"),
    (lambda m: m["files"][1].pop("rows"), r"manifest.json:files\[1\].rows: expected a row count"),
    (lambda m: m["files"][1].update(rows=True), r"manifest.json:files\[1\].rows: expected a row count"),
    (lambda m: m["files"][0].update(sha256="ABC"), r"manifest.json:files\[0\].sha256: expected 64 lowercase hex"),
    (lambda m: m["files"][0].update(bytes=-1), r"manifest.json:files\[0\].bytes: expected a byte count"),
    (lambda m: m["files"][2].update(path=m["files"][0]["path"]), r"manifest.json:files\[2\]: .* is listed twice"),
    (lambda m: m["files"][0].update(path="pairs-aux.json"), r"files\[0\].path: 'pairs-aux.json' does not end in "
                                                             r"\.parquet"),
    (lambda m: m.update(total_rows=m["total_rows"] + 1), r"manifest.json:total_rows: is \d+ but the listed files"),
    (lambda m: m.update(profile=[]), r"manifest.json:profile: expected an object"),
    (lambda m: m["profile"].update(phases=[{"name": "x"}]), r"manifest.json:profile: malformed description"),
])
def test_bad_keys_are_named(ticks, tmp_path, change, match):
    ds = copy(ticks, tmp_path / "ds")
    edit(ds, change)
    with pytest.raises(CepkitError, match=match):
        km.read_manifest(ds).rate_profile()


# -- paths -----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/etc/passwd.parquet", "../x.parquet", "a/../../x.parquet", "", ".", "a\x00.parquet"])
def test_paths_must_stay_inside(ticks, tmp_path, path):
    ds = copy(ticks, tmp_path / "ds")
    edit(ds, lambda m: m["files"][0].update(path=path))
    assert "manifest.json:files[0].path:" in error_of(ds, verify=False)


def test_absolute_path_to_the_very_file_is_refused(ticks, tmp_path):
    ds = copy(ticks, tmp_path / "ds")
    edit(ds, lambda m: m["files"][0].update(path=str(ds / m["files"][0]["path"])))
    assert "must be a file inside the dataset directory" in error_of(ds)


def test_symlink_escaping_the_directory_is_refused(ticks, tmp_path):
    ds = copy(ticks, tmp_path / "ds")
    name = json.loads((ds / "manifest.json").read_text())["files"][0]["path"]
    os.symlink(ticks / name, ds / "link.parquet")                      # an identical file, but outside
    os.symlink(ticks, ds / "sub")                                      # a directory outside
    edit(ds, lambda m: m["files"][0].update(path="link.parquet"))
    assert "files[0].path: must be a file inside the dataset directory, but 'link.parquet' resolves to" \
        in error_of(ds, verify=False)
    edit(ds, lambda m: m["files"][0].update(path=f"sub/{name}"))
    assert "resolves to" in error_of(ds, verify=False)
    edit(ds, lambda m: (m["files"][0].update(path=name), m.update(aux_file="../ticks/pairs-aux.json")))
    assert "manifest.json:aux_file: must be a file inside" in error_of(ds, verify=False)


def test_symlink_inside_the_directory_is_fine(ticks, tmp_path):
    ds = copy(ticks, tmp_path / "ds")
    name = json.loads((ds / "manifest.json").read_text())["files"][0]["path"]
    (ds / "real").mkdir()
    os.replace(ds / name, ds / "real" / name)
    os.symlink(ds / "real" / name, ds / name)
    assert km.read_manifest(ds).files[0].path == ds / name


def test_missing_file_and_directory_in_its_place(ticks, tmp_path):
    ds = copy(ticks, tmp_path / "ds")
    edit(ds, lambda m: m["files"][1].update(path="gone.parquet"))
    assert error_of(ds, verify=False).endswith("gone.parquet: listed in manifest.json but missing (files[1])")
    (ds / "gone.parquet").mkdir()
    assert "gone.parquet: listed in manifest.json (files[1]) but not a regular file" in error_of(ds, verify=False)


# -- the files' contents ---------------------------------------------------------------------

def _flip_a_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_changed_file_is_caught_by_its_checksum_only_when_verifying(ticks, tmp_path):
    ds = copy(ticks, tmp_path / "ds")
    f = km.read_manifest(ds).files[1]
    _flip_a_byte(f.path, 10)             # inside the first data page: footer, size and rows unchanged
    msg = error_of(ds)
    assert f.name in msg and "sha256" in msg and "differs from manifest.json's" in msg and "files[1].sha256" in msg
    km.read_manifest(ds, verify=False)   # --no-verify: presence, paths, sizes and Parquet rows only


def test_rows_and_sizes_are_checked_even_without_verify(ticks, tmp_path):
    ds = copy(ticks, tmp_path / "ds")
    edit(ds, lambda m: (m["files"][0].update(rows=m["files"][0]["rows"] + 1), m.update(total_rows=m["total_rows"] + 1)))
    assert re_search(r"ticks-00001-of-00003.parquet: has \d+ rows but manifest.json says \d+ \(files\[0\].rows\)",
                     error_of(ds, verify=False))
    ds2 = copy(ticks, tmp_path / "ds2")
    f = km.read_manifest(ds2).files[2]
    with open(f.path, "ab") as fh:
        fh.write(b"x")
    assert f"{f.name}: has {f.bytes + 1} bytes but manifest.json says {f.bytes}" in error_of(ds2, verify=False)


def test_truncated_parquet_is_named(ticks, tmp_path):
    ds = copy(ticks, tmp_path / "ds")
    edit(ds, lambda m: [f.pop("bytes") for f in m["files"]])
    f = km.read_manifest(ds).files[0]
    f.path.write_bytes(f.path.read_bytes()[:100])
    assert f"{f.name}: not a readable Parquet file" in error_of(ds, verify=False)


def test_csv_rows_are_counted_when_verifying(csv_ticks, tmp_path):
    ds = copy(csv_ticks, tmp_path / "ds")
    m = km.read_manifest(ds)
    assert m.format == "csv" and sum(f.rows for f in m.files) == m.doc["total_rows"]
    # A CSV file one row short, with its manifest entry's checksum and size updated to match.
    f = m.files[0]
    lines = f.path.read_bytes().splitlines(keepends=True)
    f.path.write_bytes(b"".join(lines[:-1]))
    edit(ds, lambda d: d["files"][0].update(sha256=kd.sha256_of(f.path), bytes=f.path.stat().st_size))
    assert f"{f.name}: has {f.rows - 1} rows but manifest.json says {f.rows} (files[0].rows)" in error_of(ds)
    km.read_manifest(ds, verify=False)   # not counted without verify (the readers still count as they read)


def test_each_file_is_hashed_once_per_process(ticks, tmp_path, monkeypatch):
    ds = copy(ticks, tmp_path / "ds")
    opened = []
    real_open = open
    monkeypatch.setattr(kd, "open", lambda p, *a, **k: (opened.append(Path(p).name), real_open(p, *a, **k))[1],
                        raising=False)
    km.read_manifest(ds)
    assert sorted(opened) == sorted(f["path"] for f in json.loads((ds / "manifest.json").read_text())["files"])
    opened.clear()
    km.read_manifest(ds)
    km.read_manifest(ds)
    assert opened == []
    # A change (new mtime) is hashed again, and caught.
    f = km.read_manifest(ds).files[0]
    _flip_a_byte(f.path, 10)
    os.utime(f.path, ns=(f.path.stat().st_atime_ns, f.path.stat().st_mtime_ns + 1_000_000))
    assert "differs from manifest.json's" in error_of(ds)
    assert opened == [f.name]


def test_progress_only_for_big_datasets(ticks, monkeypatch):
    kd._DIGESTS.clear()
    calls = []
    km.read_manifest(ticks, progress=lambda done, total: calls.append((done, total)))
    assert calls == []                   # small: nothing to show
    kd._DIGESTS.clear()
    monkeypatch.setattr(kd, "PROGRESS_MIN_BYTES", 1)      # the threshold kit.datafiles applies
    km.read_manifest(ticks, progress=lambda done, total: calls.append((done, total)))
    total = sum(f["bytes"] for f in json.loads((ticks / "manifest.json").read_text())["files"])
    assert calls and calls[-1] == (total, total) and all(a <= b for (a, _), (b, _) in zip(calls, calls[1:]))


def test_micro_table_and_streams_are_verified(micro, tmp_path):
    ds = copy(micro, tmp_path / "ds")
    m = km.read_manifest(ds)
    _flip_a_byte(m.table.path, 10)
    assert f"{m.table.name}: sha256" in error_of(ds)
    ds2 = copy(micro, tmp_path / "ds2")
    edit(ds2, lambda d: d["streams"][1]["files"][0].update(rows=1))
    assert re_search(r"manifest.json:streams\[1\].files\[0\].rows: 1 disagrees with files\[\d\].rows", error_of(ds2))


# -- helpers ---------------------------------------------------------------------------------

def re_search(pattern: str, text: str) -> bool:
    import re
    return re.search(pattern, text) is not None


def test_csv_value_error_names_line_and_column(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("symbol,price,tickTS\nAAAAAA,100,5\nBBBBBB,1O0,6\n")
    e = kd.csv_value_error(p, {"symbol": pa.string(), "price": pa.int64(), "tickTS": pa.int64()}, ValueError("x"))
    assert str(e) == f"{p}:3: column price: '1O0' is not an integer"
    p.write_text("symbol,price,tickTS\nAAAAAA,100,99999999999999999999\n")
    e = kd.csv_value_error(p, {"price": pa.int64(), "tickTS": pa.int64()}, ValueError("x"))
    assert str(e).startswith(f"{p}:2: column tickTS: '99999999999999999999' does not fit")


_CELL = st.text(alphabet='ab,"\n\r ', max_size=6)


@fuzz_settings
@given(rows=st.lists(st.lists(_CELL, min_size=2, max_size=2), max_size=8), crlf=st.booleans(),
       blank=st.booleans(), cut=st.integers(1, 7))
def test_csv_record_counter_agrees_with_pyarrow(rows, crlf, blank, cut):
    buf = io.BytesIO()
    pacsv.write_csv(pa.table({"x": [r[0] for r in rows], "y": [r[1] for r in rows]}, schema=pa.schema(
        [("x", pa.string()), ("y", pa.string())])), buf)
    data = buf.getvalue()
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    if blank:
        data += b"\n\n"
    counter = kd.CsvRecordCounter()
    for i in range(0, len(data), cut):
        counter.feed(data[i:i + cut])
    assert counter.records() - 1 == pacsv.read_csv(io.BytesIO(data), parse_options=pacsv.ParseOptions(
        newlines_in_values=True)).num_rows == len(rows)


def test_dataclasses_are_frozen(ticks):
    m = km.read_manifest(ticks)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.format = "csv"


# -- the harness reads datasets through the same reader --------------------------------------

def test_harness_verifies_unless_told_not_to(ticks, tmp_path):
    from harness.dataset import open_dataset
    ds = copy(ticks, tmp_path / "ds")
    edit(ds, lambda m: m["files"][2].update(sha256="f" * 64))
    with pytest.raises(CepkitError, match=r"ticks-00003-of-00003.parquet: sha256 .* \(files\[2\].sha256\)"):
        open_dataset(ds)
    assert open_dataset(ds, verify=False).total_rows == json.loads((ds / "manifest.json").read_text())["total_rows"]


def test_harness_names_the_column_of_a_bad_csv_value(csv_ticks, tmp_path):
    from harness.dataset import iter_events, open_dataset
    ds = copy(csv_ticks, tmp_path / "ds")
    f = km.read_manifest(ds).files[1]
    lines = f.path.read_text().splitlines(keepends=True)
    cells = lines[3].split(",")
    cells[1] = "12x"                                             # price
    lines[3] = ",".join(cells)
    f.path.write_text("".join(lines))
    edit(ds, lambda m: m["files"][1].update(bytes=f.path.stat().st_size, sha256=kd.sha256_of(f.path)))
    with pytest.raises(CepkitError) as e:
        list(iter_events(open_dataset(ds), 1000))
    assert str(e.value) == f"{f.path}:4: column price: '12x' is not an integer"


def test_micro_reference_inputs_name_file_and_column(tmp_path):
    """validator/micro_inputs.py reads through kit.manifest and refuses unreadable columns."""
    from validator.micro_inputs import load_micro_dataset
    ds = tmp_path / "m"
    generate_micro(MicroConfig(streams=1, format="csv", rate=RateConfig(profile="constant", basis_rate_eps=50.0,
                                                                         duration_s=2.0)), ds)
    streams, table = load_micro_dataset(ds)
    assert list(streams) == ["S1"] and table is None and "_pos" in streams["S1"].columns
    f = km.read_manifest(ds).streams[0].files[0]
    lines = f.path.read_text().splitlines(keepends=True)
    cells = lines[2].split(",")
    cells[1] = "oops"                                            # A1 of the second event
    lines[2] = ",".join(cells)
    f.path.write_text("".join(lines))
    with pytest.raises(CepkitError, match=r"S1-00001-of-00001.csv: has \d+ bytes but manifest.json says"):
        load_micro_dataset(ds, verify=False)
    size = f.path.stat().st_size
    edit(ds, lambda m: [e.update(bytes=size, sha256=kd.sha256_of(f.path))
                        for e in (m["files"][0], m["streams"][0]["files"][0])])
    with pytest.raises(CepkitError) as e:
        load_micro_dataset(ds)
    assert str(e.value) == f"{f.path}:A1: expected numbers, got string (line 3: 'oops')"
