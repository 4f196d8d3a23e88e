"""Every error about an input names the file, and the key or line where there is one (issue 45,
item 5: "an error about an input that does not name the file"), as a class.

Each reader of a user's input is driven through the command that reads it (in-process, as
tests/fuzz.py's `expect_user_error`: exit code 2, one line `cepkit: error: ...` naming the file,
no traceback, nothing written) with its file broken every way a file can be:

- empty, truncated, a byte that is not UTF-8, a directory or a FIFO in its place (root reads
  every file whatever its mode, so "unreadable" is the directory or the FIFO);
- for documents: another type at the top (a JSON array, a TOML value where a table goes, another
  root element), a required key missing, a key of the wrong type, another `kind`, another
  `schema_version`, a number of 5,000 digits (past Python's limit on converting text to int).

| input | commands |
|---|---|
| config (`-c FILE`), a run's `config.toml` | config show; compare |
| strategies XML | querygen check, translate pairs, validate pairs |
| suite and workload XML | querygen check, translate micro, validate micro |
| dataset `manifest.json`, `pairs-aux.json`, data files (Parquet, CSV) | validate pairs / micro, translate micro --data, querygen pairs / check --aux |
| a CSV to convert | datagen convert |
| output log `output-log.json` and its stream files | validate pairs / micro --log |
| a run's `run.json`, `summary.json`, `search.json`, metrics CSVs | compare |
| `cluster.json` | cluster status |
| DSN file (run.database_dsn), cluster credentials (run.cluster_credentials) | their readers, which a run calls before its engine starts |

The choke points are kit.inputs (regular files only, capped reads), kit.jsonfile
(`read_json_object`, `read_document`: JSON, kind and schema_version), `kit.config.read_config_document`
(TOML configs) and `kit.datafiles.read_data_table` (a whole data file); every case here goes through
one of them, and a source scan holds JSON readers to kit.jsonfile. Runs under the memory cap.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from kit.errors import CepkitError
from kit.shipped import specs_dir, suite_path
from tests.fuzz import expect_user_error, run_cli
from tests.test_fuzz_inputs import MICRO_SPEC, MICRO_WORKLOAD, alarm, micro_run, pairs_run  # noqa: F401 (fixtures)
from tests.validator.test_compare_page import micro_runs  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays

HUGE = "1" + "0" * 5000       # past sys.get_int_max_str_digits() (4300)
FILE_BREAKS = ("empty", "truncated", "not-utf8", "directory", "fifo")
DOC_BREAKS = FILE_BREAKS + ("wrong-type", "missing-key", "wrong-kind", "wrong-version", "huge-number")


# -- breaking a file ---------------------------------------------------------------------------

def _json_break(doc: dict, how: str, key: str, number_key: str):
    if how == "wrong-type":
        return [doc] if key == "<top>" else {**doc, key: [[]]}
    if how == "missing-key":
        return {k: v for k, v in doc.items() if k != key}
    if how == "wrong-kind":
        return {**doc, "kind": "cepkit.something-else"}
    if how == "wrong-version":
        return {**doc, "schema_version": 99}
    raise AssertionError(how)


def _toml_header(text: str, key: str, value: str) -> str:
    """`text` with its top-level `key` set to `value` (added in front when absent)."""
    line = f"{key} = {value}"
    changed, n = re.subn(rf"^{key} = .*$", line, text, count=1, flags=re.M)
    return changed if n else f"{line}\n{text}"


def damage(path: Path, how: str, key: str | None = None, number_key: str | None = None) -> str | None:
    """Break `path` the way `how` says; returns what the error must name besides the file (a key),
    or None."""
    data = path.read_bytes()
    path.unlink()
    if how == "empty":
        path.write_bytes(b"")
    elif how == "truncated":
        path.write_bytes(data[: max(1, len(data) * 3 // 5)])
    elif how == "not-utf8":
        at = 2 if path.suffix == ".csv" else min(len(data) // 3, 40)    # a CSV: inside its header's first name
        path.write_bytes(data[:at] + b"\xff\xfe" + data[at:])
    elif how == "directory":
        path.mkdir()
        (path / "inside").write_text("{}")
    elif how == "fifo":
        os.mkfifo(path)
    elif path.suffix == ".json":
        doc = json.loads(data)
        if how == "huge-number":
            text = json.dumps({**doc, number_key: 0}).replace(f'"{number_key}": 0', f'"{number_key}": {HUGE}', 1)
            path.write_text(text)
            return None
        path.write_text(json.dumps(_json_break(doc, how, key, number_key)))
        return {"wrong-kind": "kind", "wrong-version": "schema_version"}.get(how, None if key == "<top>" else key)
    elif path.suffix == ".toml":
        text = data.decode()
        required = key == "run.engine"      # a run's config.toml must say its engine; a config needs no key
        path.write_text({"wrong-type": "run = 5\n",
                         "missing-key": "[run]\n" if required else "[run]\nno_such_key = 1\n",
                         "wrong-kind": _toml_header(text, "kind", '"cepkit.something-else"'),
                         "wrong-version": _toml_header(text, "schema_version", "99"),
                         "huge-number": f"[run]\nbuckets = {HUGE}\n"}[how])
        return {"wrong-type": "run", "missing-key": "run.engine" if required else "run.no_such_key",
                "wrong-kind": "kind", "wrong-version": "schema_version", "huge-number": None}[how]
    elif path.suffix == ".xml":
        text = data.decode()
        attr = key
        if how == "wrong-type":
            text = re.sub(rf' {attr}="[^"]*"', f' {attr}="many"', text, count=1)
        elif how == "missing-key":
            text = re.sub(rf' {attr}="[^"]*"', "", text, count=1)
        elif how == "wrong-kind":
            text = re.sub(r' kind="[^"]*"', ' kind="cepkit.something-else"', text, count=1)
        elif how == "wrong-version":
            text = re.sub(r' schema_version="[^"]*"', ' schema_version="99"', text, count=1)
        elif how == "huge-number":      # number_key: "Element.attribute"
            element, name = number_key.split(".")
            text, n = re.subn(rf'(<{element} [^>]*{name}=")[^"]*', rf"\g<1>{HUGE}", text, count=1)
            assert n == 1, number_key
        path.write_text(text)
        return {"wrong-kind": "kind", "wrong-version": "schema_version", "huge-number": None}.get(how, attr)
    return None


# -- the inputs --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sustainable_runs(micro_runs, tmp_path_factory) -> dict[str, Path]:  # noqa: F811
    """Two `cepkit micro --sustainable` run directories whose searches found no sustainable step
    (so that they need no engine directory): summary.json and each workload's search.json."""
    run = shutil.copytree(micro_runs["flink"], tmp_path_factory.mktemp("sustainable") / "flink")
    doc = json.loads((run / "summary.json").read_text())
    rows = []
    for row in doc["workloads"]:
        shutil.rmtree(run / row["workload"])
        (run / row["workload"]).mkdir()
        (run / row["workload"] / "search.json").write_text(json.dumps({
            "kind": "cepkit.sustainable-search", "schema_version": 1, "workload": row["workload"],
            "sustainable_eps": None, "confirmed": False,
            "steps": [{"rate_eps": 1000.0, "run_dir": "step-01-explore-1000eps", "sustainable": False}]}))
        rows.append({"workload": row["workload"], "sustainable_eps": None, "confirmed": False, "steps": 1})
    (run / "summary.json").write_text(json.dumps({**doc, "mode": "sustainable", "workloads": rows}))
    other = shutil.copytree(run, run.parent / "spark")
    shutil.copy(micro_runs["spark"] / "config.toml", other / "config.toml")
    code, out, err = run_cli(["compare", str(other), str(run), "--out", str(run.parent / "check")])
    assert code == 0, err
    return {"spark": other, "flink": run}


@pytest.fixture(scope="module")
def inputs(pairs_run, micro_run, micro_runs, sustainable_runs, tmp_path_factory) -> dict:  # noqa: F811
    """Valid inputs of every kind (each case copies what it breaks)."""
    from kit.workload import read_suite, write_spec

    root = tmp_path_factory.mktemp("inputs")
    suite = suite_path("filtering", True)
    workload = write_spec(read_suite(suite).workload(MICRO_WORKLOAD), root / "workload.xml")
    csv_data = root / "micro-csv"
    code, out, err = run_cli(["datagen", "micro", "--seed", "7", "--streams", "1", "--attributes", "5", "--max-id",
                              "100", "--profile", "constant", "--set", "micro.rate.basis_rate_eps=200",
                              "--set", "micro.rate.duration_s=2", "--set", 'micro.format="csv"', "--out", str(csv_data)])
    assert code == 0, err
    from datagen.pairs import generate_pairs
    from tests.helpers import pairs_config

    ticks_csv = root / "pairs-csv"
    generate_pairs(pairs_config(format="csv", rate={"duration_s": 10.0}), ticks_csv)
    cluster = root / "cluster"
    cluster.mkdir()
    (cluster / "cluster.json").write_text(json.dumps({
        "kind": "cepkit.cluster", "schema_version": 1, "engine": "spark", "master_url": "spark://127.0.0.1:1",
        "webui_url": "http://127.0.0.1:1", "host": "127.0.0.1", "pids": {"master": 2**31 - 1, "workers": [2**31 - 1]},
        "logs": {"master": str(cluster / "master.log"), "workers": [str(cluster / "worker-1.log")]},
        "started_ms": 0}))
    return {**pairs_run, "micro": micro_run["data"], "micro_log": micro_run["log"], "micro_csv": csv_data, "ticks_csv": ticks_csv,
            "suite": suite, "workload": workload, "runs": micro_runs, "sustainable": sustainable_runs,
            "cluster": cluster}


def _record(data_file: Path) -> None:
    """The dataset's manifest made to agree with a damaged data file's bytes and sha256, as if it
    had been written so: what is left to refuse is the file's content."""
    import hashlib

    manifest = data_file.parent / "manifest.json"
    doc = json.loads(manifest.read_text())
    body = data_file.read_bytes() if data_file.is_file() else b""
    entries = doc.get("files", []) + [f for s in doc.get("streams", []) for f in s["files"]]
    for entry in entries:
        if entry["path"] == data_file.name:
            entry.update(bytes=len(body), sha256=hashlib.sha256(body).hexdigest())
    manifest.write_text(json.dumps(doc))


def _copy(src: Path, dst: Path) -> Path:
    return shutil.copytree(src, dst) if src.is_dir() else Path(shutil.copy(src, dst))


# Each case: (what the file is, breaks it takes, key to remove or retype, numeric key, the setup:
# (inputs, case directory) -> (argv, the file to break)).
def _validate_micro(i, d, *, data=None, log=None, spec=MICRO_SPEC):
    argv = ["validate", "micro", "--spec", str(spec), "--workload", MICRO_WORKLOAD, "--data", str(data or i["micro"]),
            "--out", str(d / "report")]
    return argv + (["--log", str(log)] if log else [])


def _validate_pairs(i, d, *, data=None, strategies=None, log=None):
    argv = ["validate", "pairs", "--data", str(data or i["data"]), "--strategies", str(strategies or i["strategies"]),
            "--out", str(d / "report"), "--no-verify"]
    return argv + (["--log", str(log)] if log else [])


def _compare(i, d, rel: str, which: str = "runs"):
    run = _copy(i[which]["flink"], d / "run")
    other = i[which]["spark"]
    return ["compare", str(other), str(run), "--out", str(d / "cmp")], run / rel


def _tick_file(i) -> str:
    return sorted(p.name for p in i["data"].glob("*.parquet"))[0]


def _ticks_csv_file(i) -> str:
    return sorted(p.name for p in i["ticks_csv"].glob("*.csv"))[0]


def _micro_csv_file(i) -> str:
    return sorted(p.name for p in i["micro_csv"].glob("*.csv"))[0]


def _log_file(i) -> str:
    return sorted(p.name for p in i["micro_log"].glob("*.parquet"))[0]


CASES = {
    # An empty config is a valid one: every key at its default.
    "config -c": (tuple(b for b in DOC_BREAKS if b != "empty"), None, None,
                  lambda i, d: (["config", "show", "-c", str(d / "c.toml")], _copy(i["config"], d / "c.toml"))),
    "run config.toml (compare)": (DOC_BREAKS, "run.engine", None, lambda i, d: _compare(i, d, "config.toml")),
    "strategies (querygen check)": (DOC_BREAKS, "seed", "Strategies.seed",
                                    lambda i, d: (["querygen", "check", str(d / "s.xml")],
                                                  _copy(i["strategies"], d / "s.xml"))),
    "strategies (translate pairs)": (DOC_BREAKS, "seed", "Strategies.seed",
                                     lambda i, d: (["translate", "pairs", "--strategies", str(d / "s.xml"), "--out",
                                                    str(d / "p.py")], _copy(i["strategies"], d / "s.xml"))),
    "strategies (validate pairs)": (DOC_BREAKS, "seed", "Strategies.seed",
                                    lambda i, d: (_validate_pairs(i, d, strategies=d / "s.xml"),
                                                  _copy(i["strategies"], d / "s.xml"))),
    "suite (querygen check)": (DOC_BREAKS, "maxId", "Where.value",
                               lambda i, d: (["querygen", "check", str(d / "s.xml")], _copy(i["suite"], d / "s.xml"))),
    "suite (translate micro)": (DOC_BREAKS, "maxId", "Where.value",
                                lambda i, d: (["translate", "micro", "--spec", str(d / "s.xml"), "--workload",
                                               MICRO_WORKLOAD, "--out", str(d / "p.py")],
                                              _copy(i["suite"], d / "s.xml"))),
    "workload (validate micro)": (DOC_BREAKS, "maxId", "Where.value",
                                  lambda i, d: (_validate_micro(i, d, spec=d / "w.xml"),
                                                _copy(i["workload"], d / "w.xml"))),
    "manifest (validate pairs)": (DOC_BREAKS, "start_epoch_ms", "start_epoch_ms",
                                  lambda i, d: (_validate_pairs(i, d, data=d / "ds"),
                                                _copy(i["data"], d / "ds") / "manifest.json")),
    "manifest (validate micro)": (DOC_BREAKS, "streams", "start_epoch_ms",
                                  lambda i, d: (_validate_micro(i, d, data=d / "ds"),
                                                _copy(i["micro"], d / "ds") / "manifest.json")),
    "manifest (translate micro --data)": (DOC_BREAKS, "format", "start_epoch_ms",
                                          lambda i, d: (["translate", "micro", "--spec", MICRO_SPEC, "--workload",
                                                         MICRO_WORKLOAD, "--data", str(d / "ds"), "--out",
                                                         str(d / "p.py")], _copy(i["micro"], d / "ds") / "manifest.json")),
    "aux (querygen pairs)": (DOC_BREAKS, "symbols", "scale_factor",
                             lambda i, d: (["querygen", "pairs", "--aux", str(d / "a.json"), "--out", str(d / "s.xml")],
                                           _copy(i["data"] / "pairs-aux.json", d / "a.json"))),
    "aux (querygen check --aux)": (DOC_BREAKS, "correlations", "seed",
                                   lambda i, d: (["querygen", "check", str(i["strategies"]), "--aux", str(d / "a.json")],
                                                 _copy(i["data"] / "pairs-aux.json", d / "a.json"))),
    "aux (validate pairs)": (DOC_BREAKS, "markets", "num_strategies",
                             lambda i, d: (_validate_pairs(i, d, data=d / "ds"),
                                           _copy(i["data"], d / "ds") / "pairs-aux.json")),
    "ticks Parquet (validate pairs)": (FILE_BREAKS, None, None,
                                       lambda i, d: (_validate_pairs(i, d, data=d / "ds"),
                                                     _copy(i["data"], d / "ds") / _tick_file(i))),
    "ticks CSV (validate pairs)": (FILE_BREAKS, None, None,
                                   lambda i, d: (["validate", "pairs", "--data", str(d / "ds"), "--strategies",
                                                  str(i["strategies"]), "--out", str(d / "report")],
                                                 _copy(i["ticks_csv"], d / "ds") / _ticks_csv_file(i))),
    "micro CSV (validate micro)": (("not-utf8", "directory", "fifo", "empty"), None, None,
                                   lambda i, d: (["validate", "micro", "--spec", MICRO_SPEC, "--workload", MICRO_WORKLOAD,
                                                  "--data", str(d / "ds"), "--out", str(d / "report")],
                                                 _copy(i["micro_csv"], d / "ds") / _micro_csv_file(i))),
    "CSV to convert (datagen convert)": (("empty", "not-utf8", "directory", "fifo"), None, None,
                                         lambda i, d: (["datagen", "convert", str(d / "in.csv"), "--kind", "micro",
                                                        "--out", str(d / "ds")],
                                                       _copy(i["micro_csv"] / _micro_csv_file(i), d / "in.csv"))),
    "output log (validate pairs)": (DOC_BREAKS, "streams", "run_start_wall_ms",
                                    lambda i, d: (_validate_pairs(i, d, log=d / "log"),
                                                  _copy(i["log"], d / "log") / "output-log.json")),
    "output log (validate micro)": (DOC_BREAKS, "format", "sim_start_ms",
                                    lambda i, d: (_validate_micro(i, d, log=d / "log"),
                                                  _copy(i["micro_log"], d / "log") / "output-log.json")),
    "output stream (validate micro)": (FILE_BREAKS, None, None,
                                       lambda i, d: (_validate_micro(i, d, log=d / "log"),
                                                     _copy(i["micro_log"], d / "log") / _log_file(i))),
    "run.json (compare)": (DOC_BREAKS, "status", "engine_exit_code",
                           lambda i, d: _compare(i, d, "filter-one/engine/run.json")),
    "micro summary.json (compare)": (DOC_BREAKS, "mode", "schema_version", lambda i, d: _compare(i, d, "summary.json")),
    "search.json (compare)": (DOC_BREAKS, "steps", "sustainable_eps",
                              lambda i, d: _compare(i, d, "filter-one/search.json", "sustainable")),
    "cluster.json (cluster status)": (DOC_BREAKS, "master_url", "started_ms",
                                      lambda i, d: (["cluster", "status", "--dir", str(d / "cl")],
                                                    _copy(i["cluster"], d / "cl") / "cluster.json")),
}
BROKEN = [(case, how) for case, (breaks, *_) in CASES.items() for how in breaks]


@pytest.mark.parametrize("case, how", BROKEN, ids=[f"{c}-{h}" for c, h in BROKEN])
def test_a_broken_input_is_one_line_naming_the_file(inputs, tmp_path, case, how):
    breaks, key, number_key, setup = CASES[case]
    argv, target = setup(inputs, tmp_path)
    named = damage(target, how, key, number_key)
    if target.suffix in (".csv", ".parquet") and (target.parent / "manifest.json").is_file():
        _record(target)
    with alarm(30):         # a FIFO that blocks fails the test instead of hanging it
        line = expect_user_error(argv, watch=[tmp_path], names=[str(target)] + ([named] if named else []))
    assert "internal error" not in line


@pytest.mark.parametrize("how", ["not-utf8", "empty", "fifo"])      # each a whole comparison: a second apiece
@pytest.mark.parametrize("name", ["resources.csv", "backlog.csv"])
def test_a_broken_metrics_file_costs_its_chart_with_a_note_not_the_comparison(inputs, tmp_path, name, how):
    """A run's metrics CSVs are optional to `cepkit compare`: a broken one costs its chart (a note
    naming it), never the comparison, and never a traceback."""
    argv, target = _compare(inputs, tmp_path, f"filter-one/engine/metrics/{name}")
    damage(target, how)
    with alarm(30):
        code, out, err = run_cli(argv)
    assert code == 0 and "Traceback" not in out + err, err
    compared = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert str(target) in json.dumps(compared["notes"]), compared["notes"]


# -- the readers a run calls before its engine starts ----------------------------------------

@pytest.mark.parametrize("how", ["missing", "directory", "fifo", "dev-zero", "not-utf8", "empty", "mode"])
def test_a_dsn_file_that_cannot_be_read_is_one_line_naming_it(tmp_path, how):
    from harness.postgres import read_database_dsn

    path = tmp_path / "dsn"
    if how == "directory":
        path.mkdir()
    elif how == "fifo":
        os.mkfifo(path, 0o600)      # private, as a DSN file must be: what is left is that it is a FIFO
    elif how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how != "missing":
        path.write_bytes({"not-utf8": b"host=x \xff", "empty": b"", "mode": b"host=x password=y"}[how])
        os.chmod(path, 0o644 if how == "mode" else 0o600)
    began = time.monotonic()
    with alarm(10), pytest.raises(CepkitError) as e:
        read_database_dsn(str(path))
    assert time.monotonic() - began < 5, "blocked (a FIFO read as a file waits for a writer)"
    assert str(path) in str(e.value) and "run.database_dsn" in str(e.value) and "\n" not in str(e.value)
    assert "password=y" not in str(e.value)


@pytest.mark.parametrize("how", ["missing", "directory", "fifo", "dev-zero", "mode", "no-secret", "not-utf8"])
def test_cluster_credentials_that_cannot_be_used_are_one_line_naming_the_file(tmp_path, how):
    from harness.cluster_auth import SPARK_DEFAULTS, check_credentials

    creds = tmp_path / "credentials"
    creds.mkdir()
    path = creds / SPARK_DEFAULTS
    if how == "directory":
        path.mkdir()
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how != "missing":
        path.write_bytes({"mode": b"spark.authenticate.secret s", "no-secret": b"spark.x y\n",
                          "not-utf8": b"spark.authenticate.secret \xff\n"}[how])
        os.chmod(path, 0o644 if how == "mode" else 0o600)
    with alarm(10):
        try:
            check_credentials(creds, "spark")
            assert how == "not-utf8", "accepted"      # a secret of any bytes: the engine reads it
            return
        except CepkitError as e:
            message = str(e)
    assert str(path) in message and "\n" not in message


@pytest.mark.parametrize("reader", ["compare", "pscore"])
def test_the_pairs_validation_summary_readers_check_kind_and_version(tmp_path, reader):
    """report/summary.json of a Pairs run (validator/report_page.py writes it; `cepkit compare`
    and the pairs pipeline's pscore lines read it): another kind or schema version is one line
    naming the file and the key."""
    from validator.compare_runs import PAIRS_SUMMARY_KIND, _pairs_summary
    from validator.report_page import pscore_lines_from_summary

    read = _pairs_summary if reader == "compare" else pscore_lines_from_summary
    path = tmp_path / "summary.json"
    for doc, key in (({"kind": "cepkit.x", "schema_version": 1}, "kind"),
                     ({"kind": PAIRS_SUMMARY_KIND, "schema_version": 99}, "schema_version"),
                     ({"kind": PAIRS_SUMMARY_KIND}, "schema_version")):
        path.write_text(json.dumps(doc))
        with pytest.raises(CepkitError, match=re.escape(f"{path}:{key}:")):
            read(path)


def test_every_json_document_reader_goes_through_the_choke_point():
    """The kit reads a JSON document from a file only through kit.jsonfile (regular files,
    capped reads, one line naming the file for every way it cannot be read): a reader of its own
    (`json.loads(path.read_text())`) blocks on a FIFO, reads /dev/zero until the memory is gone
    and ends in a traceback on a 5,000-digit number."""
    import ast

    root = Path(__file__).resolve().parents[1]
    found = []
    for d in ("kit", "datagen", "querygen", "validator", "harness", "cepkit_app"):
        for path in sorted((root / d).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("load", "loads") and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "json" and node.args
                        and "read_text" in ast.unparse(node.args[0]) + ("open(" if node.func.attr == "load" else "")):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not found, f"JSON files read without kit.jsonfile.read_json_object: {found}"
