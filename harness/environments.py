"""The Python environment each engine's programs run in (kit.engines `environment`).

Spark runs in cepkit's own interpreter. An engine whose packages clash with it (PyFlink pins
pandas, pyarrow and py4j apart from PySpark) has its own virtual environment beside the checkout
(`.venv-flink`), made on first use by `scripts/setup.sh --engine NAME`; only the engine program
runs there, the harness and the validator stay here. `CEPKIT_<ENGINE>_PYTHON` (for instance
`CEPKIT_FLINK_PYTHON`) names another interpreter, e.g. for an installed wheel without a checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.runtime_archive import package_dir
from kit.engines import ENGINES, engine_name
from kit.errors import CepkitError


def checkout_root() -> Path:
    """The directory holding cepkit's packages (a checkout's root, or site-packages)."""
    return package_dir("kit").parent


def _setup_script() -> Path | None:
    script = checkout_root() / "scripts" / "setup.sh"
    return script if script.is_file() else None


def engine_python(engine: str, *, set_up: bool = True, say=None) -> str:
    """The interpreter the programs of `engine` run with; the engine's environment is made first
    when it is missing and this is a checkout (`set_up`), else a one-line CepkitError says how."""
    name = engine_name(engine)
    environment = ENGINES[name].environment
    if environment == "main":
        return sys.executable
    var = f"CEPKIT_{name.upper()}_PYTHON"
    if os.environ.get(var):
        python = Path(os.environ[var])
        if not python.is_file():
            raise CepkitError(f"{var}: {python}: no such interpreter")
        return str(python)
    python = checkout_root() / environment / "bin" / "python"
    if python.is_file():
        return str(python)
    script = _setup_script()
    if script is None or not set_up:
        raise CepkitError(f"the {name} engine's environment is missing ({python}): run "
                          f"`scripts/setup.sh --engine {name}` in a checkout, or set {var}")
    if say is not None:
        say(f"setting up the {name} engine's environment ({environment}, first use: a few minutes)")
    done = subprocess.run(["bash", str(script), "--engine", name], stdout=sys.stderr)
    if done.returncode != 0 or not python.is_file():
        raise CepkitError(f"{script} --engine {name} failed (exit code {done.returncode}); see its output above")
    return str(python)
