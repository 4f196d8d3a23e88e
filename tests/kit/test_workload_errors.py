"""Malformed spec and auxiliary files: each gives one line naming the file, the line and the problem."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kit.errors import CepkitError
from kit.workload import load_aux, read_spec, read_strategies, read_workload, to_xml
from tests.helpers import TESTS_DIR

DATA = TESTS_DIR / "data" / "querygen"
AUX = DATA / "aux-small.json"

# file, checked against aux-small.json?, line, message
MALFORMED = [
    ("strategies-num-periods.xml", False, 14, "numPeriods must be one of 5,6,7,8,9,10,15,20,25,30, got 4"),
    ("strategies-bands.xml", False, 5, "bandsMultiplier must be one of 1.2,1.5,1.8,2.0, got 1.25"),
    ("strategies-funds-dollars.xml", False, 6, "availableFunds must be one of 1000000,2000000,5000000, got 10000"),
    ("strategies-period-text.xml", False, 12, "periodLength must be an integer, got 'ten'"),
    ("strategies-missing-attr.xml", False, 9, "<PairsStrategy> is missing the required attribute stopLossPerc"),
    ("strategies-extra-attr.xml", False, 7, "<PairsStrategy> does not take the attribute price"),
    ("strategies-alias-dash.xml", False, 3, "alias must look like st_00001, got 'st-00001'"),
    ("strategies-duplicate-alias.xml", False, 4, "duplicate alias st_00001"),
    ("strategies-six-per-user.xml", False, 8, "user u_00001 has more than 5 strategies"),
    ("strategies-schema-version.xml", False, 2, "schema_version must be 1, got 2"),
    ("strategies-unknown-symbol.xml", True, 10, "symbol1 ZZZZZZ is not a symbol of the auxiliary file"),
    ("strategies-uncorrelated.xml", True, 11, "CCCCCC/KKKKKK is not a correlated pair of the auxiliary file"),
    ("strategies-truncated.xml", False, 7, "malformed XML: Premature end of data in tag Strategies line 2"),
    ("empty.xml", False, 1, "malformed XML: Document is empty"),
    ("unknown-root.xml", False, 2, "unknown root element <Queries> (expected <Strategies>, <Workload>, <Suite>)"),
    ("workload-unknown-stream.xml", False, 20, "query j1: unknown input stream S3"),
    ("workload-missing-field.xml", False, 10, "query q2: input S1 has no field A9"),
    ("workload-no-table.xml", False, 23, "query j3: the dataset has no table T (set tableRows > 0)"),
    ("workload-range-slide.xml", False, 13, "rangeMs (10500) must be a multiple of slideMs (1000)"),
    ("workload-slide-rows.xml", False, 10, "slide must be <= rows (10), got 20"),
    ("workload-consumption.xml", False, 24,
     "consumption must be one of all-all,all-one,one-all,one-one, got chronicle"),
    ("workload-median-two-level.xml", False, 17,
     "MEDIAN cannot be computed in two levels (allowed: SUM,AVG,MAX,MIN,STDEV,COUNT)"),
    ("workload-negative-rate.xml", False, 5, "rateEps must be > 0, got -5.0"),
    ("workload-identical.xml", False, 10, "query q2 differs from q1 in more than its id (sharing=identical)"),
    ("workload-duplicate-id.xml", False, 10, "duplicate query id q1"),
    ("workload-qualified-select.xml", False, 7, "select: 'S1.ID' must not be qualified here"),
    ("workload-nan-value.xml", False, 8, "value must be a finite number, got 'NaN'"),
    ("doctype-entity.xml", False, 1, "a DOCTYPE is not allowed in spec files"),
]


@pytest.mark.parametrize("name, with_aux, line, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file_gives_one_located_line(name, with_aux, line, message):
    path = DATA / name
    with pytest.raises(CepkitError) as e:
        read_spec(path, aux=load_aux(AUX) if with_aux else None)
    assert str(e.value) == f"{path}:{line}: {message}"
    assert "\n" not in str(e.value)


def test_the_valid_fixtures_parse_and_are_canonical():
    strategies = read_strategies(DATA / "strategies-valid.xml", aux=load_aux(AUX))
    assert len(strategies) == 25 and strategies.seed == 3
    workload = read_workload(DATA / "workload-valid.xml")
    assert [q.KIND for q in workload.queries] == ["Filter", "CountWindowAggregation", "TimeWindowAggregation",
                                                   "TwoLevelAggregation", "WindowJoin", "TableJoin", "Pattern"]
    for name, spec in (("strategies-valid.xml", strategies), ("workload-valid.xml", workload)):
        assert (DATA / name).read_bytes() == to_xml(spec)


@pytest.mark.parametrize("old, new, line, message", [
    ('<Dataset streams="2" attributes="2" maxId="50" tableRows="50" tableAttributes="3" zipfS="0.0" seed="7"/>\n',
     "", 4, "unexpected element <Load> here (expected Param, Dataset)"),
    ("<TableJoin ", "<Lookup ", 23, "unexpected element <Lookup> here"),
    ('<Event alias="a" stream="S1"/>\n', "", 24, "<Pattern> is missing a child element (expected Event)"),
    ('select="ID A1 A2"', 'select=""', 7, "select must not be empty"),
    ('maxId="50"', 'maxId="0"', 4, "maxId must be >= 1, got 0"),
    ('input="S1" select', 'input="X1" select', 7, "input must be a stream name S1, S2, ..., got 'X1'"),
    ('metrics="throughput memory"', 'metrics="speed"', 2,
     "metrics must be one of throughput,memory,max-latency,latency-degradation,recovery-time,"
     "post-peak-latency-variation, got speed"),
    ('<Workload kind', '<Workload xmlns="urn:x" kind', 2,
     "unknown root element <{urn:x}Workload> (expected <Strategies>, <Workload>, <Suite>)"),
])
def test_schema_messages_read_like_the_model(old, new, line, message):
    from kit.workload import parse_spec
    text = (DATA / "workload-valid.xml").read_text()
    assert old in text
    with pytest.raises(CepkitError) as e:
        parse_spec(text.replace(old, new, 1).encode(), "w.xml")
    assert str(e.value) == f"w.xml:{line}: {message}"


def test_figure_b2_layout_is_accepted():
    """Attributes on their own lines, an explicit end tag, comments: only the values matter."""
    from kit.workload import parse_spec
    text = b"""<?xml version="1.0"?>
<Strategies kind="cepkit.strategies" schema_version="1" scaleFactor="1" seed="0">
  <!-- Figure B.2, with Table B.1's bandsMultiplier and the owner added -->
  <PairsStrategy
    alias="st_00001"
    availableFunds="1000000"
    symbol1="MCBEIV"
    symbol2="AYFBLW"
    periodLength="20"
    numPeriods="5"
    bandsMultiplier="1.2"
    stopLossPerc="0.3"
    user="u_00001">
  </PairsStrategy>
</Strategies>
"""
    s = parse_spec(text, "fig-b2.xml").strategies[0]
    assert (s.alias, s.available_funds, s.symbol1, s.symbol2, s.period_length, s.num_periods, s.bands_multiplier,
            s.stop_loss_perc, s.user) == ("st_00001", 1_000_000, "MCBEIV", "AYFBLW", 20, 5, 1.2, 0.3, "u_00001")
    with pytest.raises(CepkitError) as e:
        parse_spec(text.replace(b'"1.2"', b'"1.25"'), "fig-b2.xml")
    assert str(e.value) == "fig-b2.xml:13: bandsMultiplier must be one of 1.2,1.5,1.8,2.0, got 1.25"


def test_symbol_errors_need_the_aux_file():
    # without the dataset, an unknown but well-formed symbol cannot be told apart
    assert len(read_spec(DATA / "strategies-unknown-symbol.xml")) == 25


@pytest.mark.parametrize("name, message", [
    ("aux-bad-json.json", ":3: invalid JSON: Expecting property name enclosed in double quotes"),
    ("aux-count-mismatch.json", ": num_symbols is 13 but 12 are listed"),
    ("missing.json", ": auxiliary file not found"),
])
def test_bad_aux_files(name, message):
    with pytest.raises(CepkitError) as e:
        load_aux(DATA / name)
    assert str(e.value) == f"{DATA / name}{message}"


def test_missing_spec_file(tmp_path):
    with pytest.raises(CepkitError) as e:
        read_spec(tmp_path / "nope.xml")
    assert str(e.value) == f"{tmp_path / 'nope.xml'}: file not found"


@pytest.mark.parametrize("args, message", [
    (["check", str(DATA / "strategies-num-periods.xml")],
     f"{DATA / 'strategies-num-periods.xml'}:14: numPeriods must be one of 5,6,7,8,9,10,15,20,25,30, got 4"),
    (["check", str(DATA / "strategies-uncorrelated.xml"), "--aux", str(AUX)],
     f"{DATA / 'strategies-uncorrelated.xml'}:11: CCCCCC/KKKKKK is not a correlated pair of the auxiliary file"),
    (["pairs", "--aux", str(DATA / "aux-bad-json.json")],
     f"{DATA / 'aux-bad-json.json'}:3: invalid JSON: Expecting property name enclosed in double quotes"),
])
def test_cli_exits_2_with_one_line_and_no_traceback(args, message):
    res = subprocess.run([sys.executable, "-m", "cepkit_app.cli", "querygen", *args], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr == f"cepkit: error: {message}\n"
    assert res.stdout == ""


def test_a_strategies_scale_factor_beyond_the_model_is_refused(tmp_path):
    """Fuzz finding: scaleFactor="1000000000" was accepted by `querygen check`."""
    good = next(DATA.glob("strategies-*.xml")).read_text()
    import re
    bad = tmp_path / "big.xml"
    bad.write_text(re.sub(r'scaleFactor="[0-9]+"', 'scaleFactor="1000000000"', good, count=1))
    with pytest.raises(CepkitError, match="scaleFactor must be <= 10000") as e:
        read_strategies(bad)
    assert str(bad) in str(e.value)


def test_a_binary_aux_file_is_one_line(tmp_path):
    """Fuzz finding: `querygen pairs --aux BINARY` ended in a UnicodeDecodeError traceback."""
    bad = tmp_path / "pairs-aux.json"
    bad.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(CepkitError, match="not UTF-8") as e:
        load_aux(bad)
    assert str(bad) in str(e.value)
