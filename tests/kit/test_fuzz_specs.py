"""Fuzzing spec XML: Pairs strategies and microbenchmark suites (hypothesis; contract in tests/fuzz.py).

Valid files (a generated strategies file, the quick suites of specs/suites/) are mutated: elements
and attributes deleted or duplicated, numbers replaced by nan/inf/huge/negative/zero/words,
truncated, random bytes inserted, entity tricks (internal entities, a billion laughs, an external
entity reading /etc/passwd, a parameter entity). Each mutant goes through

- strategies: `cepkit querygen check FILE` and `cepkit translate pairs --strategies FILE --out ...`;
- suites: `cepkit querygen check FILE` and `cepkit translate micro --spec FILE --workload W --out ...`.

A rejected mutant is one line naming the file (and the line), exit 2, no traceback, nothing changed
and nothing written; an accepted one is checked by `querygen check` and translated (or refused
under the same contract, e.g. a query kind the engine does not translate).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml import etree

from kit.shipped import specs_dir
from tests.fuzz import expect_user_error, fuzz_settings, run_cli, slow_settings

pytestmark = pytest.mark.usefixtures("memory_cap")   # hostile input: a regression fails, the machine stays (tests/conftest.py)

SUITES = {p.name: p.read_bytes() for p in sorted((specs_dir() / "suites").glob("*-quick.xml"))
          if p.name != "scalability-quick.xml"}       # 170 queries: slow to translate per example
NUMBERS = ["nan", "NaN", "inf", "-inf", "INF", "1e999", "-1e999", "-1", "0", "0.0", "-0", "1e-400",
           "9223372036854775808", "-9223372036854775809", "2147483648", "99999999999999999999999", "1.5",
           "0x10", "1_000", " 5 ", "", "abc", "true", "\u0663", "５", "1e300", "1e12", "9223372036854775807"]


@pytest.fixture(scope="module")
def strategies_xml(tmp_path_factory) -> Path:
    from datagen.pairs import generate_pairs
    from kit.workload import load_aux
    from querygen.output import write_strategies
    from tests.helpers import pairs_config

    root = tmp_path_factory.mktemp("strategies")
    generate_pairs(pairs_config(rate={"duration_s": 1.0}), root / "data")
    write_strategies(load_aux(root / "data"), 42, root / "s.xml")
    return root / "s.xml"


ENTITY_TRICKS = [
    # an internal entity used in an attribute
    lambda body: body.replace(b"?>", b'?>\n<!DOCTYPE x [<!ENTITY n "12">]>', 1),
    # a billion laughs
    lambda body: body.replace(b"?>", b'?>\n<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;'
                                     b'&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;'
                                     b'&c;&c;&c;&c;&c;&c;"><!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">]>', 1),
    # an external entity (XXE)
    lambda body: body.replace(b"?>", b'?>\n<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>', 1),
    # a parameter entity pulling a remote DTD
    lambda body: body.replace(b"?>", b'?>\n<!DOCTYPE x [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x.dtd"> %p;]>', 1),
    # an encoding declaration that lies
    lambda body: body.replace(b"UTF-8", b"UTF-16", 1),
]
ENTITY_USES = [b"&n;", b"&e;", b"&xxe;", b"&amp;", b"&#0;", b"&#x110000;", b"&undefined;"]


@st.composite
def mutated_xml(draw, base: bytes) -> bytes:
    kind = draw(st.sampled_from(["tree", "tree", "tree", "truncate", "insert-bytes", "entity"]))
    if kind == "truncate":
        return base[:draw(st.integers(0, len(base) - 1))]
    if kind == "insert-bytes":
        at = draw(st.integers(0, len(base)))
        return base[:at] + draw(st.binary(min_size=1, max_size=6)) + base[at:]
    if kind == "entity":
        body = draw(st.sampled_from(ENTITY_TRICKS))(base)
        # use an entity in some attribute value
        at = body.find(b'="', body.find(b"<", body.find(b"]>") + 1 if b"]>" in body else 0) + 1)
        if at > 0 and draw(st.booleans()):
            body = body[:at + 2] + draw(st.sampled_from(ENTITY_USES)) + body[at + 2:]
        return body
    root = etree.fromstring(base)
    for _ in range(draw(st.integers(1, 3))):
        elements = [e for e in root.iter() if isinstance(e.tag, str)]
        el = draw(st.sampled_from(elements))
        op = draw(st.sampled_from(["del-element", "dup-element", "del-attr", "set-number", "set-number",
                                   "set-text", "rename-attr", "add-attr"]))
        attrs = sorted(el.attrib)
        if op == "del-element" and el is not root:
            el.getparent().remove(el)
        elif op == "dup-element" and el is not root:
            el.addnext(etree.fromstring(etree.tostring(el)))
        elif op in ("del-attr", "rename-attr") and attrs:
            name = draw(st.sampled_from(attrs))
            value = el.attrib.pop(name)
            if op == "rename-attr":
                el.set(name + "X", value)
        elif op == "set-number" and attrs:
            el.set(draw(st.sampled_from(attrs)), draw(st.sampled_from(NUMBERS)))
        elif op == "set-text" and attrs:
            el.set(draw(st.sampled_from(attrs)), draw(st.text(
                alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=10)))
        elif op == "add-attr":
            el.set(draw(st.sampled_from(["foo", "id", "name", "value", "seed"])), draw(st.sampled_from(NUMBERS)))
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


_counter = iter(range(10**9))


def _case(tmp_path: Path, raw: bytes) -> tuple[Path, Path]:
    d = tmp_path / f"case{next(_counter)}"
    d.mkdir()
    spec = d / "spec.xml"
    spec.write_bytes(raw)
    return d, spec


def _check(argv: list[str], case: Path, spec: Path, out: Path) -> None:
    """Either a success that wrote `out`, or the bad-input contract naming the file."""
    code, stdout, stderr = run_cli(argv)
    if code == 0:
        assert "Traceback" not in stdout + stderr
        assert out.is_file()
        out.unlink()
        return
    line = expect_user_error(argv, watch=[case], names=[str(spec)] if _names_spec(stderr, spec) else [])
    # Every refusal must point at a file: the spec (usually) or, for a cross-check, the named workload.
    assert str(spec) in line or "--workload" in line, line


def _names_spec(stderr: str, spec: Path) -> bool:
    return str(spec) in stderr


def check_strategies(tmp_path: Path, raw: bytes) -> None:
    case, spec = _case(tmp_path, raw)
    code, stdout, stderr = run_cli(["querygen", "check", str(spec)])
    if code != 0:
        line = expect_user_error(["querygen", "check", str(spec)], watch=[case], names=[str(spec)])
        assert line.startswith(f"cepkit: error: {spec}")
    else:
        assert "Traceback" not in stdout + stderr
    out = case / "program.py"
    _check(["translate", "pairs", "--strategies", str(spec), "--out", str(out)], case, spec, out)


def check_suite(tmp_path: Path, raw: bytes, workload: str) -> None:
    case, spec = _case(tmp_path, raw)
    code, stdout, stderr = run_cli(["querygen", "check", str(spec)])
    if code != 0:
        line = expect_user_error(["querygen", "check", str(spec)], watch=[case], names=[str(spec)])
        assert line.startswith(f"cepkit: error: {spec}")
    else:
        assert "Traceback" not in stdout + stderr
    out = case / "program.py"
    _check(["translate", "micro", "--spec", str(spec), "--workload", workload, "--out", str(out)], case, spec, out)


def _first_workload(raw: bytes) -> str:
    return etree.fromstring(raw).find("Workload").get("name")


@st.composite
def suite_case(draw) -> tuple[bytes, str]:
    name = draw(st.sampled_from(sorted(SUITES)))
    base = SUITES[name]
    return draw(mutated_xml(base)), _first_workload(base)


@fuzz_settings
@given(data=st.data())
def test_fuzz_strategies(tmp_path, strategies_xml, data):
    check_strategies(tmp_path, data.draw(mutated_xml(strategies_xml.read_bytes())))


@fuzz_settings
@given(case=suite_case())
def test_fuzz_suites(tmp_path, case):
    check_suite(tmp_path, *case)


@pytest.mark.slow
@slow_settings
@given(data=st.data())
def test_fuzz_strategies_slow(tmp_path, strategies_xml, data):
    check_strategies(tmp_path, data.draw(mutated_xml(strategies_xml.read_bytes())))


@pytest.mark.slow
@slow_settings
@given(case=suite_case())
def test_fuzz_suites_slow(tmp_path, case):
    check_suite(tmp_path, *case)


@pytest.mark.parametrize("trick", range(len(ENTITY_TRICKS)))
@pytest.mark.parametrize("use", ENTITY_USES)
def test_entity_tricks_in_a_suite(tmp_path, trick, use):
    base = SUITES["filtering-quick.xml"]
    body = ENTITY_TRICKS[trick](base).replace(b'maxId="100"', b'maxId="' + use + b'"', 1)
    check_suite(tmp_path, body, _first_workload(base))


def test_external_entity_is_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t-value")
    base = SUITES["filtering-quick.xml"]
    body = base.replace(b"?>", b'?>\n<!DOCTYPE Suite [<!ENTITY x SYSTEM "file://' + str(secret).encode() + b'">]>', 1)
    body = body.replace(b'description="', b'description="&x;', 1)
    case, spec = _case(tmp_path, body)
    code, out, err = run_cli(["querygen", "check", str(spec)])
    assert "s3cr3t" not in out + err


@pytest.mark.parametrize("attr, value", [("rateEps", "1e300"), ("durationMs", "9223372036854775807")])
def test_a_load_beyond_the_config_limits_is_refused_at_the_file(tmp_path, attr, value):
    """Fuzz finding: a <Load> accepted rates and durations far beyond the config's LIMITS, so
    `cepkit micro` refused the workload late, naming --set instead of the file and line."""
    import re

    from kit.errors import CepkitError
    from kit.workload import read_suite
    base = SUITES["filtering-quick.xml"].decode()
    spec = tmp_path / "s.xml"
    spec.write_text(re.sub(rf'{attr}="[^"]*"', f'{attr}="{value}"', base, count=1))
    with pytest.raises(CepkitError, match=attr) as e:
        read_suite(spec)
    assert str(spec) in str(e.value)
