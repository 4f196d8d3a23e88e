"""Rendering program templates with jinja2, and checking that what comes out is tidy Python."""

from __future__ import annotations

import ast
import pprint
from functools import lru_cache

import jinja2

from kit.errors import CepkitError

MAX_LINE = 120


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("translators", "templates"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["repr"] = repr
    # Literals too long for one line (query dicts) are wrapped the way a person would.
    env.filters["pformat"] = lambda v, width=110: pprint.pformat(v, width=width, sort_dicts=False)
    env.filters["wrapstr"] = wrap_str
    env.filters["wrapsql"] = wrap_sql
    return env


def sql_words(sql: str) -> list[str]:
    """`sql` split at the spaces outside its quotes ('...' literals, `...` names, doubled quotes
    inside them included), so no word breaks a literal such as INTERVAL '0 00:10:00.000'."""
    words, cur, quote = [], "", None
    for ch in sql:
        if quote is None and ch.isspace():
            if cur:
                words.append(cur)
            cur = ""
            continue
        cur += ch
        if quote is None and ch in "'`":
            quote = ch
        elif ch == quote:
            quote = None        # a doubled quote closes and reopens: the same word goes on
    if quote is not None:
        raise CepkitError(f"SQL has an unclosed {quote}: {sql[:80]}")
    if cur:
        words.append(cur)
    return words


def wrap_sql(sql: str, width: int = 92) -> str:
    """`sql` on lines of at most `width` characters (a longer word keeps its own line), broken
    only between words (sql_words): jinja's wordwrap breaks inside quoted literals."""
    lines, cur = [], ""
    for word in sql_words(sql):
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        lines.append(cur)
    return "\n".join(lines)


def wrap_str(text: str, indent: int = 4, width: int = 100) -> str:
    """A string literal, split into adjacent literals of at most `width` characters inside
    parentheses when it is longer (paths in generated programs can be any length)."""
    if len(repr(text)) <= width:
        return repr(text)
    chunks, cur = [], ""
    for ch in text:
        if cur and len(repr(cur + ch)) > width:
            chunks.append(repr(cur))
            cur = ""
        cur += ch
    chunks.append(repr(cur))
    return "(" + ("\n" + " " * indent).join(chunks) + ")"


def render(template: str, **context) -> str:
    """Render `template` and check the result parses, has no long lines or trailing spaces."""
    text = _env().get_template(template).render(**context)
    try:
        ast.parse(text)
    except SyntaxError as e:  # a template bug, not a user error, but say where
        raise CepkitError(f"{template}: generated code does not parse: line {e.lineno}: {e.msg}") from None
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_LINE or line != line.rstrip():
            raise CepkitError(f"{template}: generated line {n} is too long or has trailing spaces")
    return text
