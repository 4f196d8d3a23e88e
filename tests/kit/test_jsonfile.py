"""kit.jsonfile: every JSON document reader fails with one line naming the file (and the line)."""

from __future__ import annotations

import pytest

from kit.errors import CepkitError
from kit.jsonfile import read_json_object, write_json


@pytest.mark.parametrize("content, message", [
    (b'{"a": 1,\n "b": }', ":2: invalid JSON: Expecting value"),
    (b'{"a": NaN}', ": invalid JSON: NaN is not a JSON number"),
    (b'{"a":\n"\xff"}', ":2: not UTF-8 text"),
    (b"[1, 2]", ":1: expected a JSON object"),
    (b"[" * 100_000, ": invalid JSON: nested too deeply"),
])
def test_bad_documents_are_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "doc.json"
    path.write_bytes(content)
    with pytest.raises(CepkitError) as e:
        read_json_object(path)
    assert str(e.value) == f"{path}{message}"


def test_missing_file_and_directory_messages_come_from_the_reader(tmp_path):
    with pytest.raises(CepkitError) as e:
        read_json_object(tmp_path / "nope.json", missing="auxiliary file not found")
    assert str(e.value) == f"{tmp_path / 'nope.json'}: auxiliary file not found"
    with pytest.raises(CepkitError) as e:
        read_json_object(tmp_path, what="a manifest file")
    assert str(e.value) == f"{tmp_path}: is a directory, not a manifest file"


def test_written_documents_read_back_in_key_order(tmp_path):
    doc = {"kind": "x", "schema_version": 1, "b": [1, 2.5, None], "a": {"é": "ü"}}
    write_json(tmp_path / "d.json", doc)
    text = (tmp_path / "d.json").read_text()
    assert text.endswith("}\n") and text.isascii()
    back = read_json_object(tmp_path / "d.json")
    assert back == doc and list(back) == list(doc)
