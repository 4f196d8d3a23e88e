"""XSD validation of spec files with lxml, reported as one short line per file.

libxml2's messages are long and name XSD machinery ("[facet 'enumeration'] The value '4' is not
an element of the set {...}"); `explain` rewrites the common ones into the words the model uses
("numPeriods must be one of 5,6,...,30, got 4"), so a user sees the same sentence whichever layer
caught the mistake. Unrecognised messages are passed through, trimmed.
"""

from __future__ import annotations

import functools
import re

from lxml import etree

from kit.shipped import schema_path

XS = "{http://www.w3.org/2001/XMLSchema}"
# Root element -> schema file.
ROOT_SCHEMAS = {"Strategies": "strategies.xsd", "Workload": "workload.xsd", "Suite": "workload.xsd"}

_BASE_WORDS = {"int": "an integer", "long": "an integer", "integer": "an integer", "double": "a number",
               "decimal": "a number", "boolean": "true or false", "string": "a string", "NCName": "a name"}


@functools.lru_cache(maxsize=None)
def _schema_doc(file: str) -> etree._ElementTree:
    return etree.parse(str(schema_path(file)))


@functools.lru_cache(maxsize=None)
def schema(file: str) -> etree.XMLSchema:
    return etree.XMLSchema(_schema_doc(file))


def _type_words(file: str, type_name: str) -> str:
    """'an integer' for a simple type derived from xs:int, and so on down to the built-in base."""
    doc = _schema_doc(file)
    seen = set()
    while type_name not in seen:
        seen.add(type_name)
        local = type_name.split(":")[-1]
        if type_name.startswith("xs:"):
            return _BASE_WORDS.get(local, f"a valid {local}")
        simple = doc.find(f"{XS}simpleType[@name='{local}']")
        if simple is None:
            break
        if simple.find(f".//{XS}list") is not None:
            return "a space-separated list of valid names"
        restriction = simple.find(f"{XS}restriction")
        if restriction is None or restriction.get("base") is None:
            break
        type_name = restriction.get("base")
    return f"a valid {type_name.split(':')[-1]}"


@functools.lru_cache(maxsize=None)
def _pattern_words(file: str) -> dict[str, str]:
    """Pattern -> what it means, from the `xs:documentation` of the simple type that declares it."""
    out = {}
    for simple in _schema_doc(file).iter(f"{XS}simpleType"):
        doc = simple.find(f"{XS}annotation/{XS}documentation")
        pattern = simple.find(f".//{XS}pattern")
        if doc is not None and pattern is not None:
            out[pattern.get("value")] = " ".join(doc.text.split())
    return out


def _set_items(text: str) -> str:
    """"'5', '6', '7'" (libxml2's rendering of an enumeration) -> "5,6,7"."""
    return ",".join(x.strip().strip("'") for x in text.split(","))


def _pattern_message(m, attr: str, file: str) -> str:
    words = _pattern_words(file).get(m["p"])
    return f"{attr} must {words}, got {m['v']!r}" if words else f"{attr} must match {m['p']}, got {m['v']!r}"


_ELEM_ATTR = re.compile(r"Element '(?P<elem>[^']+)'(?:, attribute '(?P<attr>[^']+)')?: (?P<rest>.*)", re.S)
_RULES: list[tuple[re.Pattern, object]] = [
    (re.compile(r"\[facet 'enumeration'\] The value '(?P<v>.*)' is not an element of the set \{(?P<set>.*)\}\.?"),
     lambda m, e, a, f: f"{a} must be one of {_set_items(m['set'])}, got {m['v']}"),
    (re.compile(r"\[facet 'minInclusive'\] The value '(?P<v>.*)' is less than the minimum value allowed "
                r"\('(?P<b>.*)'\)\.?"),
     lambda m, e, a, f: f"{a} must be >= {m['b']}, got {m['v']}"),
    (re.compile(r"\[facet 'maxInclusive'\] The value '(?P<v>.*)' is greater than the maximum value allowed "
                r"\('(?P<b>.*)'\)\.?"),
     lambda m, e, a, f: f"{a} must be <= {m['b']}, got {m['v']}"),
    (re.compile(r"\[facet 'minExclusive'\] The value '(?P<v>.*)' must be greater than '(?P<b>.*)'\.?"),
     lambda m, e, a, f: f"{a} must be > {m['b']}, got {m['v']}"),
    (re.compile(r"\[facet 'minLength'\] The value (?:'.*' )?has a length of '0'.*", re.S),
     lambda m, e, a, f: f"{a} must not be empty"),
    (re.compile(r"\[facet 'pattern'\] The value '(?P<v>.*)' is not accepted by the pattern '(?P<p>.*)'\.?"),
     lambda m, e, a, f: _pattern_message(m, a, f)),
    (re.compile(r"The value '(?P<v>.*)' does not match the fixed value constraint '(?P<b>.*)'\.?"),
     lambda m, e, a, f: f"{a} must be {m['b']}, got {m['v']}"),
    (re.compile(r"'(?P<v>.*)' is not a valid value of the (?:atomic|list) type '(?P<t>[^']+)'\.?"),
     lambda m, e, a, f: f"{a} must be {_type_words(f, m['t'])}, got {m['v']!r}"),
    (re.compile(r"The attribute '(?P<a>[^']+)' is required but missing\.?"),
     lambda m, e, a, f: f"<{e}> is missing the required attribute {m['a']}"),
    (re.compile(r"The attribute '(?P<a>[^']+)' is not allowed\.?"),
     lambda m, e, a, f: f"<{e}> does not take the attribute {m['a']}"),
    (re.compile(r"This element is not expected\. Expected is (?:one of )?\( (?P<x>.*) \)\.?"),
     lambda m, e, a, f: f"unexpected element <{e}> here (expected {m['x']})"),
    (re.compile(r"This element is not expected\.?"),
     lambda m, e, a, f: f"unexpected element <{e}> here"),
    (re.compile(r"Missing child element\(s\)\. Expected is (?:one of )?\( (?P<x>.*) \)\.?"),
     lambda m, e, a, f: f"<{e}> is missing a child element (expected {m['x']})"),
    (re.compile(r"Character content other than whitespace is not allowed.*|Character content is not allowed.*"),
     lambda m, e, a, f: f"<{e}> must not contain text"),
    (re.compile(r"Duplicate key-sequence \['(?P<v>.*)'\] in unique identity-constraint '(?P<c>[^']+)'\.?"),
     lambda m, e, a, f: f"duplicate {m['c'].replace('-', ' ')} {m['v']}"),
]


def explain(message: str, file: str) -> str:
    """One readable sentence for a libxml2 schema-validation message."""
    m = _ELEM_ATTR.match(message.strip())
    if not m:
        return message.strip().rstrip(".")
    elem, attr, rest = m["elem"], m["attr"], m["rest"].strip()
    for pattern, build in _RULES:
        r = pattern.fullmatch(rest)
        if r:
            return build(r, elem, attr, file)
    return f"<{elem}>{' ' + attr if attr else ''}: {rest.rstrip('.')}"


def first_error(tree: etree._ElementTree, file: str) -> tuple[int, str] | None:
    """Validate `tree` against `file`; the line and explanation of the first error, or None."""
    s = schema(file)
    try:
        if s.validate(tree):
            return None
    except etree.XMLSchemaValidateError as e:
        return 1, f"cannot be checked against {file}: {e}"
    err = s.error_log[0]
    return err.line, explain(err.message, file)
