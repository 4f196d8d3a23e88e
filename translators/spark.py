"""The PySpark (Structured Streaming) translator.

`translate_pairs` writes a standalone program (templates/pyspark_pairs.py.j2) holding the
strategies as a literal table, the Pairs logic as a pandas stateful processor and the streaming
plan for the chosen plan mode. The program's `build(spark, events)` is what the harness's Spark
runtime (harness/spark_app.py) calls; see specs/ENGINE_RUN.md for that contract.
"""

from __future__ import annotations

from kit import __version__
from translators.render import render
from translators.request import PairsTranslation

ENGINE = "pyspark"


def translate_pairs(req: PairsTranslation) -> str:
    spec = req.strategies
    return render("pyspark_pairs.py.j2", strategies=spec.strategies, plan=req.plan,
                  scale_factor=spec.scale_factor, seed=spec.seed, version=__version__,
                  source_name=req.source_name, source_sha256=req.source_sha256 or "-" * 16)


def translate_micro(req):
    """A microbenchmark workload (translators/spark_micro.py)."""
    from translators.spark_micro import translate_micro as translate

    return translate(req)
