"""Fuzzing `cepkit validate pairs` with broken datasets (issue 14): manifests and data files.

The contract (tests/fuzz.py): a bad input is one line naming the file (and the key or column), exit
code 2, no traceback, and no file that existed before is changed (nor a report left behind).

- manifests: a required key deleted or given another type, a file's path made absolute, `..`,
  another file, a directory, missing or a symlink out of the dataset, its sha256 or row count
  changed, the JSON cut short; and (broad) any key anywhere deleted or replaced by junk;
- data files: truncated, a byte flipped, junk appended.

Default budget: `FUZZ_EXAMPLES` (40) per property, fewer for the broad manifest property, whose
cases often pass validation; `-m slow` runs `SLOW_EXAMPLES` of each. Broken engine output logs:
test_fuzz_validate_log.py.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz import expect_user_error, fuzz_settings, run_cli, slow_settings, tree_digest
from tests.helpers import JUNK, fresh_dir, validate_pairs_argv

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

# Properties whose cases often pass validation write a whole report (~0.4 s each): fewer cases.
verdict_settings = settings(fuzz_settings, max_examples=min(16, fuzz_settings.max_examples))


# -- manifests -------------------------------------------------------------------------------

TOP_KEYS = ("kind", "schema_version", "format", "start_epoch_ms", "files")
FILE_KEYS = ("path", "rows", "sha256", "bytes")
PATHS = ("absolute", "absolute-same", "dotdot", "other-tick", "aux", "missing", "directory", "symlink-out",
         "symlink-dir-out", "empty", "nul")


def _invalid_top(key: str, value) -> bool:
    """Does `value` for `key` make the manifest invalid (not merely different)?"""
    if key == "kind":
        return value != "cepkit.datagen-manifest"
    if key == "schema_version":
        return not (type(value) is int and value == 1)
    if key == "format":
        return value != "parquet"           # "csv" is refused too: the files end in .parquet
    if key == "start_epoch_ms":
        return type(value) is not int       # any integer is a valid origin
    return True                             # files: junk is never a list of file entries


def _invalid_file_key(key: str, value, original) -> bool:
    if value == original and type(value) is type(original):
        return False
    if key in ("sha256", "bytes"):
        return value is not None            # null: the manifest gives none (hand-made datasets)
    return True


MANIFEST_MUTATION = st.one_of(
    st.tuples(st.just("delete"), st.sampled_from(TOP_KEYS)),
    st.tuples(st.just("delete-file-key"), st.integers(0, 2), st.sampled_from(("path", "rows"))),
    st.tuples(st.just("retype"), st.sampled_from(TOP_KEYS), JUNK).filter(lambda m: _invalid_top(m[1], m[2])),
    st.tuples(st.just("retype-file-key"), st.integers(0, 2), st.sampled_from(FILE_KEYS), JUNK),
    st.tuples(st.just("path"), st.integers(0, 2), st.sampled_from(PATHS)),
    st.tuples(st.just("sha256"), st.integers(0, 2), st.integers(0, 63)),
    st.tuples(st.just("rows"), st.integers(0, 2), st.integers(-5, 5).filter(bool)),
    st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),
)


def _mutate_manifest(ds: Path, original: Path, mutation) -> bool:
    """Apply `mutation` to the copy `ds`; False if it turned out harmless (skip the example)."""
    mpath = ds / "manifest.json"
    text = mpath.read_text()
    m = json.loads(text)
    kind = mutation[0]
    if kind == "truncate":
        mpath.write_text(text[:int(mutation[1] * (len(text) - 1))])     # the closing brace is always cut
        return True
    if kind == "delete":
        del m[mutation[1]]
    elif kind == "retype":
        m[mutation[1]] = mutation[2]
    else:
        entry = m["files"][mutation[1]]
        if kind == "delete-file-key":
            del entry[mutation[2]]
        elif kind == "retype-file-key":
            if not _invalid_file_key(mutation[2], mutation[3], entry.get(mutation[2])):
                return False
            entry[mutation[2]] = mutation[3]
        elif kind == "sha256":
            i = mutation[2]
            entry["sha256"] = entry["sha256"][:i] + ("0" if entry["sha256"][i] != "0" else "1") + entry["sha256"][i + 1:]
        elif kind == "rows":
            entry["rows"] = entry["rows"] + mutation[2]
        elif kind == "path":
            entry["path"] = _mutated_path(ds, original, m, mutation[1], mutation[2])
    mpath.write_text(json.dumps(m, indent=2))
    return True


def _mutated_path(ds: Path, original: Path, m: dict, i: int, how: str) -> str:
    name = m["files"][i]["path"]
    other = m["files"][(i + 1) % len(m["files"])]["path"]
    if how == "absolute":
        return str(original / name)                     # the generator's own file, outside the copy
    if how == "absolute-same":
        return str(ds / name)                           # the very file, but absolute
    if how == "dotdot":
        return f"../{original.name}/{name}"
    if how == "other-tick":
        return other                                    # listed twice
    if how == "aux":
        return "pairs-aux.json"
    if how == "missing":
        return "ticks-99999-of-99999.parquet"
    if how == "directory":
        (ds / "sub.parquet").mkdir()
        return "sub.parquet"
    if how == "symlink-out":
        os.symlink(original / name, ds / "link.parquet")    # identical content, outside the directory
        return "link.parquet"
    if how == "symlink-dir-out":
        os.symlink(original, ds / "elsewhere")
        return f"elsewhere/{name}"
    if how == "empty":
        return ""
    return name + "\x00"


def _check_manifest_mutation(run, tmp_path, mutation, no_verify: bool) -> None:
    data, strategies, _, _ = run
    root = fresh_dir(tmp_path)
    ds = root / "ds"
    shutil.copytree(data, ds)
    if not _mutate_manifest(ds, data, mutation):
        return
    # --no-verify skips checksums only: a changed sha256 is then no error.
    if no_verify and mutation[0] == "sha256":
        return
    argv = validate_pairs_argv(ds, strategies, root / "report", *(["--no-verify"] if no_verify else []))
    expect_user_error(argv, watch=[root, data, strategies], names=["manifest.json"])


@fuzz_settings
@given(mutation=MANIFEST_MUTATION, no_verify=st.booleans())
def test_broken_manifest_is_one_line(run, tmp_path, mutation, no_verify):
    _check_manifest_mutation(run, tmp_path, mutation, no_verify)


@pytest.mark.slow
@slow_settings
@given(mutation=MANIFEST_MUTATION, no_verify=st.booleans())
def test_broken_manifest_is_one_line_slow(run, tmp_path, mutation, no_verify):
    _check_manifest_mutation(run, tmp_path, mutation, no_verify)


def _json_paths(doc, prefix=()) -> list[tuple]:
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out.append(prefix + (k,))
        out += _json_paths(v, prefix + (k,))
    return out


def _check_any_manifest_change(run, tmp_path, data_, no_verify: bool) -> None:
    data, strategies, _, _ = run
    root = fresh_dir(tmp_path)
    ds = root / "ds"
    shutil.copytree(data, ds)
    doc = json.loads((ds / "manifest.json").read_text())
    path = data_.draw(st.sampled_from(_json_paths(doc)))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if data_.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data_.draw(JUNK)
    (ds / "manifest.json").write_text(json.dumps(doc))
    before = tree_digest([ds, data, strategies])
    code, out, err = run_cli(validate_pairs_argv(ds, strategies, root / "report", *(["--no-verify"] if no_verify else [])))
    assert "Traceback" not in out + err
    assert code in (0, 2), (path, out + err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cepkit: error: "), err
        assert not (root / "report").exists()
    assert tree_digest([ds, data, strategies]) == before


@verdict_settings
@given(data_=st.data(), no_verify=st.booleans())
def test_any_manifest_change_is_a_verdict_or_one_line(run, tmp_path, data_, no_verify):
    _check_any_manifest_change(run, tmp_path, data_, no_verify)


@pytest.mark.slow
@slow_settings
@given(data_=st.data(), no_verify=st.booleans())
def test_any_manifest_change_is_a_verdict_or_one_line_slow(run, tmp_path, data_, no_verify):
    _check_any_manifest_change(run, tmp_path, data_, no_verify)


DATA_MUTATION = st.tuples(st.sampled_from(("truncate", "flip", "append")), st.integers(0, 2),
                          st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=20))


def _check_data_mutation(run, tmp_path, mutation, no_verify: bool) -> None:
    data, strategies, _, _ = run
    how, i, where, junk = mutation
    if how == "flip" and no_verify:
        no_verify = False          # unverified, a flipped bit may just be another price: no error to expect
    root = fresh_dir(tmp_path)
    ds = root / "ds"
    shutil.copytree(data, ds)
    name = json.loads((ds / "manifest.json").read_text())["files"][i]["path"]
    raw = bytearray((ds / name).read_bytes())
    at = int(where * len(raw))
    if how == "truncate":
        raw = raw[:at]
    elif how == "flip":
        raw[at] ^= junk[0] or 1
    else:
        raw += junk
    (ds / name).write_bytes(bytes(raw))
    argv = validate_pairs_argv(ds, strategies, root / "report", *(["--no-verify"] if no_verify else []))
    expect_user_error(argv, watch=[root, data, strategies], names=[name])


@fuzz_settings
@given(mutation=DATA_MUTATION, no_verify=st.booleans())
def test_broken_data_file_is_one_line(run, tmp_path, mutation, no_verify):
    _check_data_mutation(run, tmp_path, mutation, no_verify)


@pytest.mark.slow
@slow_settings
@given(mutation=DATA_MUTATION, no_verify=st.booleans())
def test_broken_data_file_is_one_line_slow(run, tmp_path, mutation, no_verify):
    _check_data_mutation(run, tmp_path, mutation, no_verify)
