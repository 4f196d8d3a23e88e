"""Every file a cepkit command writes, the command that reads it next accepts (issue 45, item 5:
"a file one cepkit command writes that the next one refuses"), as a class.

Each file kind has one writer and one reader; the property over each pair is read(write(x)) == x
for every x its model accepts, with edge values drawn on purpose: integers at and past the 32-
and 64-bit bounds, floats from subnormal to 1.8e308 with -0.0, nan and inf, text with XML's
special characters, control characters, lone surrogates, line breaks, words the readers give a
meaning ("auto", "none"), long strings, every value of every enumeration, optional fields empty.
A value the model refuses is not drawn again; one it accepts must come back equal:

| file kind | writer | reader (the next command) |
|---|---|---|
| config (`config.toml` of a run, `cepkit config show`) | `write_config`, `Config.to_toml` | `load_config` (`-c FILE`) |
| strategies, workload, suite XML | `to_xml` / `write_spec` (querygen) | `parse_spec` / `read_spec` (querygen check, translate, validate, micro) |
| `pairs-aux.json` | `write_aux` (datagen) | `load_aux` (querygen pairs / check --aux, validate pairs) |
| `manifest.json` | `write_manifest` (datagen pairs / micro / convert) | `load_manifest` (validate, translate micro --data, pairs --data) |
| JSON documents: run.json, summary.json, search.json, repeat.json, compare.json, validation.json, output-log.json, cluster.json, results files | `kit.jsonfile.write_json` / `dumps_json`, the one JSON writer | `kit.jsonfile.read_json_object` and each kind's checks |
| `cluster.json` | `ClusterInfo.to_dict` (cluster start) | `read_cluster_info` (cluster status / stop) |

and the chains through the command line: `querygen pairs` (its seed from the auxiliary file or
`--seed`) -> `querygen check --aux`; `querygen micro --suite all` -> `querygen check` ->
`translate micro`; `config show` -> `-c`. A source scan holds every JSON document writer to the
one writer (`test_every_json_document_goes_through_the_one_writer`).

Budgets as tests/fuzz.py's (derandomized, a few dozen examples each); `-m slow` draws more.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import typing
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kit.config import Config, load_config, write_config
from kit.config.loading import _CHOICES
from kit.errors import CepkitError
from kit.shipped import SUITE_NAMES, suite_path
from kit.workload import (AVAILABLE_FUNDS_CENTS, BANDS_MULTIPLIERS, CONSUMPTION_POLICIES, NUM_PERIODS,
                          PERIOD_LENGTHS_S, STOP_LOSS_PERCS, Correlation, PairsAux, PairsStrategy, StrategySet, Suite,
                          parse_spec, read_spec, read_suite, to_xml, write_spec)
from kit.workload.aux import SYMBOL_RE, load_aux, write_aux
from kit.workload.common import OPS
from kit.workload.queries import SHARING, TABLE_STORAGE
from kit.profiles import PROFILE_NAMES
from tests.fuzz import fuzz_settings, run_cli, slow_settings
from tests.helpers import fresh_dir

pytestmark = pytest.mark.usefixtures("memory_cap")   # long texts and huge numbers: a regression fails, the machine stays

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = settings(fuzz_settings, max_examples=min(60, fuzz_settings.max_examples))

# -- the edge values ---------------------------------------------------------------------------

INT_EDGES = [0, 1, 2, 5, 7, 30, 60, 100, 1000, 2**31 - 2, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**62, 2**63 - 1,
             2**63, 2**64, 10**30, -1, -(2**31), -(2**63) - 1]
FLOAT_EDGES = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1e-300, 1e-9, 0.001, 0.01, 0.1, 0.5, 1.0, 1.5, 100.0,
               100.5, 1e8, 1e8 + 1, 1e12, 1e20, 1e300, 1.7976931348623157e308, -1.0, -1e20, math.inf, -math.inf,
               math.nan]
TEXT_EDGES = ["", " ", "a<b>&\"'c", "&amp;]]>", "\r\n\t", "\r", " lead and trail ", "é漢字🙂", "\u2028\u0085x",
              "\x00", "x\x01\x1f\x7f", "\ud800", "a\udfffb", "\ufffe\uffff", "x" * 5000, "auto", "none", "None",
              "AUTO", "#", "=", "[run]"]
INTS = st.one_of(st.sampled_from(INT_EDGES), st.integers(0, 1000), st.integers(-(2**70), 2**70))
FLOATS = st.one_of(st.sampled_from(FLOAT_EDGES), st.floats(0, 1000), st.floats())
TEXT = st.one_of(st.sampled_from(TEXT_EDGES), st.text(max_size=40))


def edge(draw, value, field: str, choices: dict[str, tuple]):
    """An edge value of `value`'s type (or one of the field's `choices`)."""
    if field in choices:
        return draw(st.sampled_from(choices[field]))
    if isinstance(value, bool):
        return draw(st.booleans())
    if isinstance(value, int):
        return draw(INTS)
    if isinstance(value, float):
        return draw(FLOATS)
    if isinstance(value, str):
        return draw(TEXT)
    return value


def some(draw, keys) -> set:
    """One to three of `keys`, the fields an example varies (more would rarely all be accepted)."""
    return draw(st.sets(st.sampled_from(sorted(keys)), min_size=1, max_size=3))


def accepted(build):
    """`build()`, or the example is not one the model accepts (drawn again)."""
    try:
        return build()
    except CepkitError:
        assume(False)


# -- specs: strategies, workloads, suites ------------------------------------------------------

SHIPPED = {name: read_suite(suite_path(name, True)) for name in SUITE_NAMES if name != "scalability"}
SPEC_CHOICES = {"Load.profile": PROFILE_NAMES, "Pattern.consumption": CONSUMPTION_POLICIES,
                "TableJoin.storage": TABLE_STORAGE, "Comparison.op": tuple(OPS), "QuerySet.sharing": SHARING}
# The strings that are names the model checks by pattern (ids, streams, fields) stay as shipped.
SPEC_TEXT = {"Workload.description", "Suite.description", "Param.value"}


def _spec_keys(obj, out: set) -> set:
    """The "Class.field" names of `obj`'s fields that `vary` may change."""
    if isinstance(obj, tuple):
        for x in obj:
            _spec_keys(x, out)
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            key, v = f"{type(obj).__name__}.{f.name}", getattr(obj, f.name)
            if key in SPEC_CHOICES or key in SPEC_TEXT or key == "Load.duration_ms" \
                    or isinstance(v, (int, float)) and not dataclasses.is_dataclass(v):
                out.add(key)
            _spec_keys(v, out)
    return out


def vary(draw, obj, memo: dict):
    """`obj` (a spec dataclass) with the fields `memo` names set to the values it holds: one
    value per (class, field), so that queries that must be alike (sharing="similar") stay alike."""
    if isinstance(obj, tuple):
        return tuple(vary(draw, x, memo) for x in obj)
    if not dataclasses.is_dataclass(obj):
        return obj
    changes = {}
    for f in dataclasses.fields(obj):
        key, v = f"{type(obj).__name__}.{f.name}", getattr(obj, f.name)
        if key in memo:
            changes[f.name] = memo[key]
        elif dataclasses.is_dataclass(v) or isinstance(v, tuple) and v and dataclasses.is_dataclass(v[0]):
            changes[f.name] = vary(draw, v, memo)
    return accepted(lambda: dataclasses.replace(obj, **changes))


def varied(draw, obj):
    memo = {}
    for key in some(draw, _spec_keys(obj, set())):
        cls, name = key.split(".")
        sample = _first_value(obj, cls, name)
        memo[key] = draw(st.one_of(st.none(), INTS)) if key == "Load.duration_ms" else \
            edge(draw, sample, key, SPEC_CHOICES)
    return vary(draw, obj, memo)


def _first_value(obj, cls: str, name: str):
    if isinstance(obj, tuple):
        for x in obj:
            v = _first_value(x, cls, name)
            if v is not None:
                return v
    elif dataclasses.is_dataclass(obj):
        if type(obj).__name__ == cls:
            return getattr(obj, name)
        for f in dataclasses.fields(obj):
            v = _first_value(getattr(obj, f.name), cls, name)
            if v is not None:
                return v
    return None


@st.composite
def workloads(draw):
    suite = SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))]
    return varied(draw, draw(st.sampled_from(suite.workloads)))


@st.composite
def suites(draw):
    ws = draw(st.lists(workloads(), min_size=1, max_size=2, unique_by=lambda w: w.name))
    return accepted(lambda: Suite(draw(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)),
                                  draw(st.booleans()), tuple(ws), draw(TEXT)))


SYMBOLS = st.from_regex(SYMBOL_RE, fullmatch=True)


@st.composite
def strategy_sets(draw):
    n = draw(st.integers(1, 6))
    items = []
    for i in range(n):
        s1, s2 = draw(st.lists(SYMBOLS, min_size=2, max_size=2, unique=True))
        items.append(accepted(lambda: PairsStrategy(
            f"st_{i + 1:05d}", f"u_{i // 5 + 1:05d}", draw(st.sampled_from(AVAILABLE_FUNDS_CENTS)), s1, s2,
            draw(st.sampled_from(PERIOD_LENGTHS_S)), draw(st.sampled_from(NUM_PERIODS)),
            draw(st.sampled_from(BANDS_MULTIPLIERS)), draw(st.sampled_from(STOP_LOSS_PERCS)))))
    return accepted(lambda: StrategySet(draw(INTS), draw(INTS), tuple(items)))


def _spec_round_trip(spec, tmp_path) -> None:
    from kit.config import with_settings

    data = to_xml(spec)          # a model that accepts what XML cannot hold fails here
    assert parse_spec(data, "spec.xml") == spec
    path = write_spec(spec, fresh_dir(tmp_path) / "spec.xml")
    assert read_spec(path) == spec
    # `cepkit micro` turns each workload into datagen's config: a value the config refuses would be
    # refused there, late, naming the config key and not the spec.
    for w in spec.workloads if isinstance(spec, Suite) else (spec,) if hasattr(spec, "micro_settings") else ():
        with_settings(Config(), w.micro_settings())


@EXAMPLES
@given(spec=st.one_of(workloads(), suites()))
def test_every_workload_and_suite_the_model_accepts_reads_back_equal(tmp_path, spec):
    _spec_round_trip(spec, tmp_path)


@EXAMPLES
@given(spec=strategy_sets())
def test_every_strategies_file_the_model_accepts_reads_back_equal(tmp_path, spec):
    _spec_round_trip(spec, tmp_path)


@pytest.mark.slow
@slow_settings
@given(spec=st.one_of(workloads(), suites(), strategy_sets()))
def test_specs_read_back_equal_slow(tmp_path, spec):
    _spec_round_trip(spec, tmp_path)


# -- the auxiliary file, and querygen's chain from it ------------------------------------------

@st.composite
def auxes(draw):
    symbols = draw(st.lists(SYMBOLS, min_size=2, max_size=8, unique=True))
    markets = draw(st.integers(1, len(symbols) // 2))
    listed = tuple((s, i % markets) for i, s in enumerate(symbols))
    pairs = tuple(Correlation(listed[i][0], listed[i + markets][0], listed[i][1])
                  for i in range(0, len(listed) - markets, 2 * markets) if i + markets < len(listed))
    assume(pairs)
    return accepted(lambda: PairsAux(
        scale_factor=draw(st.one_of(st.integers(1, 3), INTS)), markets=markets,
        num_strategies=draw(st.integers(1, len(pairs))), max_strategies_per_pair=draw(st.integers(1, 10)),
        seed=draw(st.one_of(st.none(), st.sampled_from(INT_EDGES))), symbols=listed, correlations=pairs,
        correlation=draw(st.one_of(st.none(), FLOATS))))


@settings(EXAMPLES, max_examples=min(25, EXAMPLES.max_examples))
@given(aux=auxes())
def test_every_auxiliary_file_reads_back_and_querygen_takes_it(tmp_path, aux):
    """`pairs-aux.json` reads back equal, and `querygen pairs` (its seed the file's by default)
    writes strategies that `querygen check --aux` accepts."""
    d = fresh_dir(tmp_path)
    write_aux(d, aux)
    assert load_aux(d) == aux
    out = d / "strategies.xml"
    code, o, err = run_cli(["querygen", "pairs", "--aux", str(d), "--out", str(out)])
    assert code in (0, 2) and "Traceback" not in o + err, err
    if code == 0:
        code, o, err = run_cli(["querygen", "check", str(out), "--aux", str(d)])
        assert code == 0, f"querygen pairs wrote {out}, which querygen check refuses: {err}"


@pytest.mark.parametrize("seed", [0, 2**63 - 1, 2**63, 2**64 + 5])
def test_a_strategies_file_querygen_writes_for_any_seed_it_takes_is_one_check_accepts(tmp_path, seed):
    aux = PairsAux(1, 1, 1, 10, None, (("AAA", 0), ("BBB", 0)), (Correlation("AAA", "BBB", 0),))
    write_aux(tmp_path, aux)
    out = tmp_path / "s.xml"
    code, o, err = run_cli(["querygen", "pairs", "--aux", str(tmp_path), "--seed", str(seed), "--out", str(out)])
    if code == 2:       # refused up front, naming the option
        assert "--seed" in err and not out.exists()
        return
    assert code == 0, err
    code, o, err = run_cli(["querygen", "check", str(out), "--aux", str(tmp_path)])
    assert code == 0, f"querygen pairs --seed {seed} wrote a file querygen check refuses: {err}"


# -- the config --------------------------------------------------------------------------------

CONFIG_CHOICES = {f"{cls}.{name}": choices for (cls, name), choices in
                  ((k.split("."), v) for k, v in _CHOICES.items())}


def _config_fields(section, prefix: str = "") -> list[str]:
    out = []
    for f in dataclasses.fields(section):
        v = getattr(section, f.name)
        out += _config_fields(v, f"{prefix}{f.name}.") if dataclasses.is_dataclass(v) else [prefix + f.name]
    return out


def _vary_section(draw, section, chosen: set, prefix: str = ""):
    hints = typing.get_type_hints(type(section))
    changes = {}
    for f in dataclasses.fields(section):
        v, tp = getattr(section, f.name), hints[f.name]
        key = f"{type(section).__name__}.{f.name}"
        if dataclasses.is_dataclass(v):
            changes[f.name] = _vary_section(draw, v, chosen, f"{prefix}{f.name}.")
            continue
        if prefix + f.name not in chosen:
            continue
        optional = type(None) in typing.get_args(tp)
        base = next((a for a in typing.get_args(tp) if a is not type(None)), tp) if optional else tp
        if optional and draw(st.integers(0, 3)) == 0:
            changes[f.name] = None
        elif key in CONFIG_CHOICES:
            changes[f.name] = draw(st.sampled_from(CONFIG_CHOICES[key]))
        elif base is bool:
            changes[f.name] = draw(st.booleans())
        elif base is int:
            changes[f.name] = draw(INTS)
        elif base is float:
            changes[f.name] = draw(st.one_of(FLOATS, INTS))
        elif base is str:
            changes[f.name] = draw(TEXT)
        else:           # tuple[str, ...]
            changes[f.name] = tuple(draw(st.lists(TEXT, max_size=3)))
    return accepted(lambda: dataclasses.replace(section, **changes))


@st.composite
def configs(draw):
    return _vary_section(draw, Config(), some(draw, _config_fields(Config())))


def _config_round_trip(tmp_path, cfg: Config) -> None:
    d = fresh_dir(tmp_path)
    write_config(cfg, d / "config.toml")
    assert load_config(d / "config.toml") == cfg
    code, out, err = run_cli(["config", "show", "-c", str(d / "config.toml")])
    assert code == 0, err
    (d / "shown.toml").write_text(out, encoding="utf-8")
    assert load_config(d / "shown.toml") == cfg


@EXAMPLES
@given(cfg=configs())
def test_every_config_the_model_accepts_reads_back_equal(tmp_path, cfg):
    """A run's `config.toml` and `cepkit config show`'s text, given back with `-c`."""
    _config_round_trip(tmp_path, cfg)


@pytest.mark.slow
@slow_settings
@given(cfg=configs())
def test_configs_read_back_equal_slow(tmp_path, cfg):
    _config_round_trip(tmp_path, cfg)


@pytest.mark.parametrize("key", ["worker_python", "advertised_host"])
@pytest.mark.parametrize("word", ["auto", "none", "None", "AUTO"])
def test_an_optional_text_is_never_a_word_that_reads_back_as_unset(tmp_path, key, word):
    """`auto`/`none` is how the command line unsets an optional key; the file reader reads it so
    too, so a config holding it as text would not come back: the model refuses it."""
    from kit.config import FieldError

    with pytest.raises(FieldError) as e:
        dataclasses.replace(Config(), run=dataclasses.replace(Config().run, **{key: word}))
    assert e.value.field_name == key


# -- JSON documents ----------------------------------------------------------------------------

JSON_LEAF = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT)
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


def _as_read(v):
    """What a reader gets back for `v`: a non-finite number is null (JSON has no other spelling)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _as_read(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_as_read(x) for x in v]
    return v


def _same(a, b) -> bool:
    """Equal, telling -0.0 from 0.0 apart from nothing else (JSON keeps the sign)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@EXAMPLES
@given(doc=st.dictionaries(TEXT, JSON, max_size=6))
def test_every_json_document_the_one_writer_writes_reads_back(tmp_path, doc):
    from kit.jsonfile import dumps_json, read_json_object, write_json

    path = fresh_dir(tmp_path) / "doc.json"
    write_json(path, doc)
    assert _same(read_json_object(path), _as_read(doc))
    assert dumps_json(doc) == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("where", ["resources.mean_cpu_percent", "latency.p99_ms", "timings.duration_s"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_run_record_with_a_non_finite_number_is_read_by_compare(tmp_path, where, value):
    """run.json is written by the harness (harness.run_finish.write_json) and read by `cepkit
    compare`; a number that is not finite (an empty mean, a rate over no time) was written as
    NaN, which no JSON reader takes: the reader refused the run."""
    from harness.run_finish import write_json
    from validator.compare_runs import engine_record

    doc = {"kind": "cepkit.engine-run", "schema_version": 1, "status": "completed",
           "resources": {"mean_cpu_percent": 12.5}, "latency": {"p99_ms": 3.0}, "timings": {"duration_s": 9.0}}
    head, leaf = where.split(".")
    doc[head][leaf] = value
    write_json(tmp_path / "run.json", doc)
    assert engine_record(tmp_path / "run.json")[head][leaf] is None


def test_a_micro_summary_with_a_non_finite_number_is_read_back(tmp_path):
    """summary.json of `cepkit micro` (write_summary), read by `cepkit compare`, with a mean CPU
    that is not a number (a run with no sample)."""
    from cepkit_app.pipelines.micro_summary import WorkloadResult, write_summary
    from kit.jsonfile import read_json_object

    suite = SHIPPED["filtering"]
    w = suite.workloads[0]
    result = WorkloadResult(w.name, {}, len(w.queries), "completed", "", "PASSED", 10, 100.0, 0, None, None, 10.0,
                            math.nan, "")
    write_summary(suite, [result], tmp_path)
    assert read_json_object(tmp_path / "summary.json")["workloads"][0]["mean_cpu_percent"] is None


# Where a JSON text is not a document a reader takes from a file: the wire (frames and lines
# between the kit's own processes, which parse them with Python's json), a child's command
# line, an engine's settings.
NOT_DOCUMENTS = {
    "kit/jsonfile.py",              # the one writer
    "harness/driver.py",            # status lines on the driver's stdout, read by harness/process.py
    "harness/process.py",           # the driver's --config-json argument
    "harness/engine_process.py",    # the engine's event lines, copied to logs/engine.stdout.jsonl
    "harness/flink_cluster.py",     # a child's code string and Flink config values
    "harness/versions.py",          # a child's code string
    "kit/wire/protocol.py",         # the feed's and sink's frames
    "kit/wire/connection.py",
    "kit/wire/sink_client.py",
    "kit/wire/feed_client.py",
    "harness/server.py",
}
WRITER_DIRS = ("kit", "datagen", "querygen", "validator", "harness", "cepkit_app", "benchmarks")


def test_every_json_document_goes_through_the_one_writer():
    """No json.dump/json.dumps outside kit.jsonfile writes a document: the writers that did
    wrote NaN (run.json, output-log.json, summary.json, search.json, validation.json) that every
    reader refuses, or crashed on it at the end of a run (allow_nan=False)."""
    found = []
    for d in WRITER_DIRS:
        for path in sorted((ROOT / d).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in NOT_DOCUMENTS:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in ("dump", "dumps") and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "json"):
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"JSON documents written without kit.jsonfile.dumps_json/write_json: {found}"


# -- manifest.json -----------------------------------------------------------------------------

NAME_CHARS = "abcXYZ019-_.é漢 "


@st.composite
def manifest_fields(draw):
    fmt = draw(st.sampled_from(("parquet", "csv")))
    names = draw(st.lists(st.text(NAME_CHARS, min_size=1, max_size=12).filter(lambda n: n.strip(". ")),
                          min_size=1, max_size=4, unique=True))

    def entry(name):
        return {"path": f"{name}.{fmt}", "rows": draw(st.integers(0, 2**63 - 1)),
                **({"bytes": draw(st.integers(0, 2**63 - 1))} if draw(st.booleans()) else {}),
                **({"sha256": draw(st.from_regex(r"[0-9a-f]{64}", fullmatch=True))} if draw(st.booleans()) else {})}

    files = [entry(n) for n in names]
    fields = {"format": fmt, "start_epoch_ms": draw(st.integers(0, 2**63 - 1)),
              "total_rows": draw(st.integers(0, 2**63 - 1)), "files": files,
              "config": draw(st.dictionaries(TEXT, JSON, max_size=3)), "note": draw(TEXT)}
    if draw(st.booleans()):
        fields["streams"] = [{"name": "S1", "columns": ["ID", "TS"], "files": files}]
    return fields


@EXAMPLES
@given(fields=manifest_fields(), generator=TEXT)
def test_every_manifest_the_one_writer_writes_reads_back(tmp_path, fields, generator):
    """`write_manifest` (datagen pairs, micro, convert) -> `load_manifest` (validate, translate
    micro --data, pairs --data): the document comes back whole, its files as listed."""
    from kit.manifest import load_manifest, write_manifest

    d = fresh_dir(tmp_path)
    doc = write_manifest(d, generator, **fields)
    m = load_manifest(d)
    assert _same(dict(m.doc), _as_read(doc))
    assert [(f.name, f.rows, f.bytes, f.sha256) for f in m.files] == \
        [(f["path"], f["rows"], f.get("bytes"), f.get("sha256")) for f in fields["files"]]


# -- cluster.json ------------------------------------------------------------------------------

@settings(EXAMPLES, max_examples=min(20, EXAMPLES.max_examples))
@given(host=TEXT, pid=st.one_of(st.integers(1, 2**31 - 1), INTS), started=INTS, token=st.one_of(st.none(), TEXT))
def test_every_cluster_record_reads_back(tmp_path, host, pid, started, token):
    from harness.cluster_spec import ClusterInfo, read_cluster_info
    from kit.jsonfile import write_json

    d = fresh_dir(tmp_path)
    info = accepted(lambda: ClusterInfo(d, "spark://127.0.0.1:7077", "http://127.0.0.1:8080", host, pid, (pid,),
                                        d / "master.log", (d / "worker-1.log",), started, "spark", token))
    write_json(d / "cluster.json", info.to_dict())
    assert read_cluster_info(d) == info


# -- the chains through the command line -------------------------------------------------------

def test_querygen_micro_suites_are_checked_and_translated(tmp_path):
    out = tmp_path / "suites"
    code, o, err = run_cli(["querygen", "micro", "--suite", "all", "--quick", "--out", str(out)])
    assert code == 0, err
    files = sorted(out.glob("*.xml"))
    assert len(files) == len(SUITE_NAMES)
    code, o, err = run_cli(["querygen", "check", *map(str, files)])
    assert code == 0, err
    for f in files:
        w = read_suite(f).workloads[0]
        if w.name.startswith("scalability"):
            continue        # 170 queries: slow to translate, the same query kinds as the others
        code, o, err = run_cli(["translate", "micro", "--spec", str(f), "--workload", w.name,
                                "--out", str(tmp_path / f"{w.name}.py")])
        assert code == 0, f"{f}: {err}"


@pytest.mark.parametrize("sets", [
    ["micro.start_epoch_ms=7258118400000", "micro.zipf_s=100.0", "micro.max_id=1000",
     "micro.seed=9223372036854775807", "micro.table_rows=3", "micro.table_attributes=1000"],
    ["micro.start_epoch_ms=0", 'micro.format="csv"', "micro.max_id=2147483647", 'micro.rate.arrivals="constant"'],
    # A CSV dataset with a join table (T.csv), which translate refused as "not Parquet".
    ['micro.format="csv"', "micro.table_rows=5", "micro.table_attributes=2"],
])
def test_datagen_micro_at_the_edges_is_validated_and_its_config_read_back(tmp_path, sets):
    """`datagen micro` with settings at their bounds -> `validate micro` and `translate micro
    --data` take the dataset, and `-c` takes the config.toml datagen wrote beside it."""
    data = tmp_path / "data"
    argv = ["datagen", "micro", "--streams", "1", "--attributes", "5", "--profile", "constant",
            "--set", "micro.rate.basis_rate_eps=200", "--set", "micro.rate.duration_s=1", "--out", str(data)]
    code, o, err = run_cli(argv + [a for s in sets for a in ("--set", s)])
    assert code == 0, err
    workload = read_suite(suite_path("filtering", True)).workloads[0].name
    code, o, err = run_cli(["validate", "micro", "--spec", "filtering-quick", "--workload", workload, "--data",
                            str(data), "--out", str(tmp_path / "report")])
    assert code == 0, err
    code, o, err = run_cli(["translate", "micro", "--spec", "filtering-quick", "--workload", workload, "--data",
                            str(data), "--out", str(tmp_path / "program.py")])
    assert code == 0, err
    code, o, err = run_cli(["config", "show", "-c", str(data / "config.toml")])
    assert code == 0, err


def test_a_config_and_a_spec_datagen_would_refuse_are_refused_at_their_key(tmp_path):
    """A Zipf law over more than MAX_ZIPF_ID IDs: `config show` took it and `datagen micro`
    refused it (and `cepkit micro` a spec's Dataset with it, naming --set rather than the spec)."""
    from kit.config import MAX_ZIPF_ID
    from kit.workload import Dataset, SpecError

    code, out, err = run_cli(["config", "show", "--set", "micro.zipf_s=1.0", "--set", f"micro.max_id={MAX_ZIPF_ID + 1}"])
    assert code == 2 and "micro.max_id" in err, err
    with pytest.raises(SpecError, match="maxId"):
        Dataset(max_id=MAX_ZIPF_ID + 1, zipf_s=1.0)
