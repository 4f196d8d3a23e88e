"""Files shipped inside the package: the default configs, the XML schemas and the standard suites.

They live in `kit/specs/` (configs/, schemas/, suites/) and are found through
`importlib.resources`, so they are there wherever cepkit is installed (a wheel, an editable
checkout); nothing assumes the repository's layout. The written specs (specs/*.md) stay in the
repository.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from kit.errors import CepkitError

# The standard microbenchmark suites (thesis chapter 4), in the order they are run and listed;
# querygen/suites.py builds each, and kit/specs/suites/ holds each as NAME.xml and NAME-quick.xml.
SUITE_NAMES = ("filtering", "count-windows", "time-windows", "joins", "patterns", "adaptivity", "scalability",
               "ceiling")


def specs_dir() -> Path:
    """kit/specs/ of the installed package (a regular directory: cepkit is never imported from a zip
    when it needs these files)."""
    return Path(str(files("kit").joinpath("specs")))


def suite_file_name(name: str, quick: bool) -> str:
    return f"{name}{'-quick' if quick else ''}.xml"


def suite_path(name: str, quick: bool = False) -> Path:
    """The shipped suite file of a standard suite."""
    if name not in SUITE_NAMES:
        raise CepkitError(f"{name}: unknown suite (valid: {', '.join(SUITE_NAMES)})")
    return specs_dir() / "suites" / suite_file_name(name, quick)


def schema_path(file: str) -> Path:
    """A shipped XML schema (strategies.xsd, workload.xsd)."""
    return specs_dir() / "schemas" / file


def config_names() -> tuple[str, ...]:
    """The shipped configs, by name (quick, standard)."""
    return tuple(sorted(p.stem for p in (specs_dir() / "configs").glob("*.toml")))


def config_path(name: str) -> Path:
    return specs_dir() / "configs" / f"{name}.toml"
