"""The dataset manifest (`manifest.json`): the one model, writer and reader of a dataset's file list.

Every dataset directory (Pairs ticks, microbenchmark streams, converted CSV; specs/DATA.md,
specs/datagen-micro.md) has a `manifest.json` with `kind = "cepkit.datagen-manifest"` and
`schema_version = 1` that lists its data files with their row counts (and, as the generators
write them, byte sizes and sha256). The generators write it with `write_manifest`; the harness
and the validator read it here, and nowhere else:

- `write_manifest(dir, generator, **fields)` writes the document: kind, schema_version, generator
  and library versions first, then the generator's fields in the order given.
- `load_manifest(dir)` parses the JSON (`kit.jsonfile`: an error names the file and the line),
  checks `kind`, `schema_version`, `format`, `start_epoch_ms` and the file lists (`files`,
  `streams[i].files`, `table`), and confines every listed path, `aux_file` included, to the
  dataset directory: no absolute path, no `..`, no symlink that resolves outside it. It touches
  no data file.
- `read_manifest(dir, verify=True)` also checks the listed files (`kit.datafiles.verify_files`):
  present and regular, byte sizes, Parquet row counts and, with `verify`, sha256 and CSV row
  counts; `verify=False` (the CLI's `--no-verify`, for huge trusted datasets) skips these reads
  of whole files.

Each file is hashed once per process (kit.datafiles keeps results by resolved path, size and
mtime_ns). Nothing is printed; `progress(done, total)` (bytes) is called as a large hashing
proceeds. Every problem is one `CepkitError` line naming the manifest and the key
(`files[3].rows`) or the data file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.datafiles import Progress, verify_files
from kit.errors import CepkitError, at
from kit.jsonfile import read_json_object, write_json

KIND = "cepkit.datagen-manifest"
SCHEMA_VERSION = 1
FILE_NAME = "manifest.json"
FORMATS = ("parquet", "csv")
# What every generator writes besides the header (kind, schema_version, generator, versions).
_REQUIRED = ("format", "start_epoch_ms", "total_rows", "files")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class DataFile:
    """One data file as the manifest lists it."""

    key: str                  # where the manifest lists it: "files[2]", "streams[0].files[1]", "table"
    name: str                 # as listed, relative to the dataset directory
    path: Path                # dataset directory / name (what error messages show)
    rows: int
    sha256: str | None = None
    bytes: int | None = None


@dataclass(frozen=True)
class StreamEntry:
    """A microbenchmark stream: its name, declared columns and files in order."""

    key: str                  # "streams[i]"
    name: str
    columns: tuple | None     # as listed (checked by the readers that need it)
    files: tuple[DataFile, ...]

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)


@dataclass(frozen=True)
class Manifest:
    """A checked manifest: its document and the files it lists."""

    directory: Path
    path: Path                            # the manifest.json
    doc: Mapping                          # the whole JSON object (other keys: generator, config, ...)
    format: str                           # "parquet" or "csv"
    start_epoch_ms: int
    files: tuple[DataFile, ...]           # the top-level `files` list (ticks: the tick files in event order)
    streams: tuple[StreamEntry, ...]      # microbenchmark datasets; empty for tick datasets
    table: DataFile | None                # a microbenchmark dataset's join table
    aux_path: Path | None                 # pairs-aux.json when the manifest names one

    @property
    def kind(self) -> str:
        """"micro" when the manifest lists streams, else "ticks"."""
        return "micro" if self.streams else "ticks"

    @property
    def generator(self) -> str | None:
        g = self.doc.get("generator")
        return g if isinstance(g, str) else None

    def get(self, key: str, default=None):
        return self.doc.get(key, default)

    def error(self, key: str | None, message: str) -> CepkitError:
        """An error located at a key of this manifest."""
        return at(self.path, key, message)

    def data_files(self) -> tuple[DataFile, ...]:
        """Every listed file once, in listing order: top-level files, stream files, the table."""
        seen: dict[str, DataFile] = {}
        for f in (*self.files, *(f for s in self.streams for f in s.files),
                  *((self.table,) if self.table is not None else ())):
            seen.setdefault(f.name, f)
        return tuple(seen.values())

    def rate_profile(self):
        """The recorded rate profile (a `kit.profiles.RateProfile`), or None when the manifest has
        none (a converted dataset); a malformed one is an error at `profile`."""
        from kit.profiles import profile_from_dict

        data = self.doc.get("profile")
        if data is None:
            return None
        if not isinstance(data, dict):
            raise self.error("profile", f"expected an object, got {type(data).__name__}")
        try:
            return profile_from_dict(data)
        except CepkitError as e:
            raise self.error("profile", str(e).removeprefix("profile: ")) from None
        except (OverflowError, RecursionError) as e:
            raise self.error("profile", f"malformed description ({e})") from None


def read_manifest(directory: str | os.PathLike, *, verify: bool = True,
                  progress: Progress | None = None) -> Manifest:
    """Load a dataset's manifest and verify its files (checksums and CSV row counts only when
    `verify`; presence, paths, sizes and Parquet row counts always)."""
    m = load_manifest(directory)
    verify_files(m, checksums=verify, progress=progress)
    return m


# -- writing ---------------------------------------------------------------------------------

def write_manifest(directory: str | os.PathLike, generator: str, **fields) -> dict:
    """Write `directory/manifest.json` and return its document.

    The header (kind, schema_version, `generator`, the versions of the writing libraries) comes
    first, then `fields` in the order given: each generator keeps its documented key order, so the
    same inputs give a byte-identical manifest. `fields` holds at least format, start_epoch_ms,
    total_rows and files."""
    clash = sorted({"kind", "schema_version", "versions"} & fields.keys())
    missing = [k for k in _REQUIRED if k not in fields]
    if clash or missing:
        raise TypeError(f"write_manifest: header keys {clash} given, or fields {missing} missing")
    doc = {"kind": KIND, "schema_version": SCHEMA_VERSION, "generator": generator, "versions": _versions(),
           **fields}
    write_json(Path(directory) / FILE_NAME, doc)
    return doc


def _versions() -> dict:
    # Recorded because the data files' bytes (and so their sha256) depend on these libraries.
    import numpy
    import pyarrow

    import kit
    return {"cepkit": kit.__version__, "numpy": numpy.__version__, "pyarrow": pyarrow.__version__}


# -- the document ------------------------------------------------------------------------------

def load_manifest(directory: str | os.PathLike) -> Manifest:
    """Parse and check `directory/manifest.json`; reads no data file."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CepkitError(f"{directory}: dataset directory not found")
    mpath = directory / FILE_NAME
    doc = read_json_object(mpath, missing="not found: not a cepkit dataset directory", what="a manifest file",
                           kind="manifest")

    kind = doc.get("kind")
    if kind != KIND:
        raise at(mpath, "kind", f"expected {KIND!r}, got {_show(kind)}")
    version = doc.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise at(mpath, "schema_version", f"expected {SCHEMA_VERSION}, got {_show(version)}")
    fmt = doc.get("format")
    if fmt not in FORMATS:
        raise at(mpath, "format", f"expected 'parquet' or 'csv', got {_show(fmt)}")
    start = doc.get("start_epoch_ms")
    if type(start) is not int:
        raise at(mpath, "start_epoch_ms", f"expected an integer (epoch ms), got {_show(start)}")
    if not 0 <= start < 1 << 63:
        raise at(mpath, "start_epoch_ms", f"{start} is outside the epoch-ms range [0, 2^63)")

    root = _resolved_dir(directory)
    lister = _Lister(directory, root, mpath, fmt)
    streams: tuple[StreamEntry, ...] = ()
    if "streams" in doc:
        streams = _streams(lister, doc["streams"])
        files = lister.files(doc["files"], "files", allow_empty=True) if doc.get("files") is not None else ()
    else:
        files = lister.files(doc.get("files"), "files")
    table = None
    if doc.get("table") is not None:
        table = lister.file(doc["table"], "table")
    _check_consistent(mpath, (*files, *(f for s in streams for f in s.files), *((table,) if table else ())))

    total = doc.get("total_rows")
    if total is not None and (type(total) is not int or total < 0):
        raise at(mpath, "total_rows", f"expected a row count (an integer >= 0), got {_show(total)}")

    aux = doc.get("aux_file")
    aux_path = None
    if aux is not None:
        if not isinstance(aux, str):
            raise at(mpath, "aux_file", f"expected a file name, got {_show(aux)}")
        aux_path = lister.inside(aux, "aux_file")
    return Manifest(directory, mpath, doc, fmt, start, files, streams, table, aux_path)


def _show(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _resolved_dir(directory: Path) -> Path:
    try:
        return directory.resolve(strict=True)
    except (OSError, RuntimeError) as e:
        raise CepkitError(f"{directory}: cannot resolve the dataset directory: {e}") from None


class _Lister:
    """Checks file entries and confines their paths to the dataset directory."""

    def __init__(self, directory: Path, root: Path, mpath: Path, fmt: str):
        self.directory, self.root, self.mpath, self.fmt = directory, root, mpath, fmt

    def inside(self, name, key: str) -> Path:
        if not isinstance(name, str) or not name or "\x00" in name:
            raise at(self.mpath, key, f"expected a file name inside the dataset directory, got {_show(name)}")
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise at(self.mpath, key, f"must be a file inside the dataset directory, got {_show(name)}")
        try:
            real = (self.root / rel).resolve(strict=False)
        except (OSError, RuntimeError) as e:       # a symlink loop
            raise at(self.mpath, key, f"{name!r} cannot be resolved: {e}") from None
        if real == self.root or not real.is_relative_to(self.root):
            raise at(self.mpath, key, f"must be a file inside the dataset directory, but {name!r} "
                                      f"resolves to {real}")
        return self.directory / rel

    def file(self, entry, key: str) -> DataFile:
        if not isinstance(entry, dict):
            raise at(self.mpath, key, "expected {\"path\": relative file name, \"rows\": count, ...}")
        name = entry.get("path")
        path = self.inside(name, f"{key}.path")
        if not name.endswith(f".{self.fmt}"):
            raise at(self.mpath, f"{key}.path", f"{name!r} does not end in .{self.fmt} (format is {self.fmt})")
        rows = entry.get("rows")
        if type(rows) is not int or rows < 0:
            raise at(self.mpath, f"{key}.rows", f"expected a row count (an integer >= 0), got {_show(rows)}")
        sha = entry.get("sha256")
        if sha is not None and (not isinstance(sha, str) or not _SHA256.fullmatch(sha)):
            raise at(self.mpath, f"{key}.sha256", f"expected 64 lowercase hex digits, got {_show(sha)}")
        size = entry.get("bytes")
        if size is not None and (type(size) is not int or size < 0):
            raise at(self.mpath, f"{key}.bytes", f"expected a byte count (an integer >= 0), got {_show(size)}")
        return DataFile(key, name, path, rows, sha, size)

    def files(self, entries, key: str, allow_empty: bool = False) -> tuple[DataFile, ...]:
        if not isinstance(entries, list) or (not entries and not allow_empty):
            raise at(self.mpath, key, "expected a non-empty list of files")
        out = [self.file(e, f"{key}[{i}]") for i, e in enumerate(entries)]
        seen: dict[str, str] = {}
        for f in out:
            if f.name in seen:
                raise at(self.mpath, f.key, f"{f.name!r} is listed twice (also at {seen[f.name]})")
            seen[f.name] = f.key
        return tuple(out)


def _streams(lister: _Lister, entries) -> tuple[StreamEntry, ...]:
    mpath = lister.mpath
    if not isinstance(entries, list) or not entries:
        raise at(mpath, "streams", "expected a non-empty list of streams")
    out, names = [], set()
    for i, s in enumerate(entries):
        key = f"streams[{i}]"
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not s["name"]:
            raise at(mpath, f"{key}.name", "expected a stream name")
        if s["name"] in names:
            raise at(mpath, f"{key}.name", f"stream {s['name']!r} is listed twice")
        names.add(s["name"])
        cols = s.get("columns")
        if cols is not None and (not isinstance(cols, list) or not all(isinstance(c, str) for c in cols)):
            raise at(mpath, f"{key}.columns", f"expected a list of column names, got {_show(cols)}")
        out.append(StreamEntry(key, s["name"], tuple(cols) if cols is not None else None,
                               lister.files(s.get("files"), f"{key}.files")))
    return tuple(out)


def _check_consistent(mpath: Path, files) -> None:
    """A file listed in several places (micro: `files` and `streams[i].files`) says the same."""
    first: dict[str, DataFile] = {}
    for f in files:
        g = first.setdefault(f.name, f)
        if g is f:
            continue
        for attr in ("rows", "sha256", "bytes"):
            a, b = getattr(g, attr), getattr(f, attr)
            if a is not None and b is not None and a != b:
                raise at(mpath, f"{f.key}.{attr}", f"{_show(b)} disagrees with {g.key}.{attr} ({_show(a)})")
