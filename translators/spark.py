"""The PySpark (Structured Streaming) translator.

`translate_pairs` writes a program (templates/pyspark_pairs.py.j2) holding the strategies as a
literal table, the plan mode and its number of state keys, wired to the Spark runtime: the plan
(spark_runtime/pairs_plan.py) runs the Pairs logic (pairs_partials, pairs_bucket,
pairs_strategies) in a keyed stateful operator, against the harness by spark_runtime/app.py.
specs/ENGINE_RUN.md is the program's contract.
"""

from __future__ import annotations

from kit import __version__
from kit.errors import CepkitError
from translators.render import render
from translators.request import PairsTranslation

ENGINE = "spark"


def translate_pairs(req: PairsTranslation) -> str:
    if req.trigger == "realtime" and req.plan != "keyed":
        # specs/TRANSLATION.md, "Real-time mode": only the keyed plan has a JVM form
        # (cepkit.spark.PairsRealTime); the others are Python (transformWithStateInPandas).
        raise CepkitError(f"run.trigger = \"realtime\": the {req.plan} Pairs plan has no real-time form on "
                          f"Spark (its strategy logic runs in Python, which real-time mode does not allow); "
                          f"use the keyed plan")
    spec = req.strategies
    return render("pyspark_pairs.py.j2", strategies=spec.strategies, plan=req.plan, buckets=req.buckets,
                  scale_factor=spec.scale_factor, seed=spec.seed, version=__version__,
                  source_name=req.source_name, source_sha256=req.source_sha256 or "-" * 16)


def translate_micro(req):
    """A microbenchmark workload (translators/spark_micro.py)."""
    from translators.spark_micro import translate_micro as translate

    return translate(req)
