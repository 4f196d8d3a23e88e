"""Data flows one way between cepkit's packages; this test keeps it so.

kit imports none of our packages (except its CLI package, the only place that wires everything);
datagen, querygen, validator and translators import only kit; harness may also import translators.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kit.paths import REPO_ROOT

OURS = {"kit", "datagen", "querygen", "translators", "harness", "validator"}
ALLOWED = {
    "kit": {"kit"},
    "datagen": {"kit", "datagen"},
    "querygen": {"kit", "querygen"},
    "validator": {"kit", "validator"},
    "translators": {"kit", "translators"},
    "harness": {"kit", "translators", "harness"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & OURS


def test_packages_import_only_downstream():
    violations = []
    for package, allowed in ALLOWED.items():
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if package == "kit" and "cli" in path.relative_to(REPO_ROOT / "kit").parts:
                continue
            bad = _imports(path) - allowed
            if bad:
                violations.append(f"{path.relative_to(REPO_ROOT)} imports {sorted(bad)}")
    assert not violations, violations


def test_checker_catches_a_violation(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("import os\nfrom harness.run import go\n")
    assert _imports(bad) == {"harness"}
