"""The engine's runtime ships: a generated program imports and plans with nothing of cepkit but the
runtime zip (what executors get with --py-files), and the zip is the same bytes every time."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile

from harness.runtime_archive import runtime_archive_bytes, write_runtime_archive
from kit.config import PLANS
from kit.engines import ENGINES
from kit.shipped import suite_path
from kit.workload import PairsStrategy, StrategySet, read_suite
from translators.registry import engine_module
from translators.request import PairsTranslation
from translators.request import MicroTranslation

SPARK = ENGINES["spark"].runtime_packages


def test_the_zip_holds_the_runtime_packages_and_is_reproducible(tmp_path):
    path = write_runtime_archive(SPARK, tmp_path / "runtime.zip")
    names = set(zipfile.ZipFile(path).namelist())
    assert {"spark_runtime/app.py", "runtime_common/micro_cores/pattern.py", "kit/records.py",
            "kit/wire/feed_client.py"} <= names
    assert not any(n.startswith(("harness/", "translators/", "validator/", "cepkit_app/")) for n in names)
    assert path.read_bytes() == runtime_archive_bytes(SPARK)


def test_programs_import_and_plan_from_the_zip_alone(tmp_path):
    zip_path = write_runtime_archive(SPARK, tmp_path / "runtime.zip")
    spark = engine_module("spark")
    strategies = StrategySet(1, 7, (PairsStrategy("st_00001", "u_00001", 1_000_000, "SYMA", "SYMB", 5, 5, 1.2, 0.1),))
    programs = [spark.translate_pairs(PairsTranslation(strategies, plan)) for plan in PLANS]
    for name in ("patterns", "joins", "count-windows"):
        w = read_suite(suite_path(name, quick=True)).workloads[0]
        programs.append(spark.translate_micro(MicroTranslation(w, table_path=tmp_path / "t.parquet")))
    for i, text in enumerate(programs):
        (tmp_path / f"p{i}.py").write_text(text)
    # -S: no site, so no editable install of cepkit; the libraries' directory, then the zip.
    check = (f"import sys, runpy; sys.path[:0] = [{str(zip_path)!r}, {sysconfig.get_paths()['purelib']!r}]\n"
             "for name in ('harness', 'translators', 'cepkit_app'):\n"
             "    try:\n        __import__(name)\n    except ImportError:\n        pass\n"
             "    else:\n        raise SystemExit(f'{name} is importable: the check proves nothing')\n"
             f"for i in range({len(programs)}):\n"
             "    ns = runpy.run_path(f'p{i}.py')\n"
             "    assert callable(ns['build'])\n"
             "import spark_runtime.app, spark_runtime.source, spark_runtime.micro_plan, spark_runtime.pairs_plan\n"
             "assert spark_runtime.app.__file__.startswith(sys.path[0]), spark_runtime.app.__file__\n")
    proc = subprocess.run([sys.executable, "-S", "-c", check], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
