"""The PySpark (Structured Streaming) translator.

`translate_pairs` writes a program (templates/pyspark_pairs.py.j2) holding the strategies as a
literal table, the plan mode, its number of state keys and the plan family (run.work), wired to
the Spark runtime: the plan (spark_runtime/pairs_plan.py) runs the Pairs logic in a keyed stateful
operator, the Java logic in a JVM transformWithState by default (cepkit.spark.PairsRealTime), the
Python logic in transformWithStateInPandas with run.work = "python", against the harness by
spark_runtime/app.py. specs/ENGINE_RUN.md is the program's contract.
"""

from __future__ import annotations

from kit import __version__
from kit.errors import CepkitError
from translators.render import render
from translators.request import PairsTranslation

ENGINE = "spark"


def translate_pairs(req: PairsTranslation) -> str:
    """A Pairs program: the JVM plan for run.work engine, operators and jvm, the Python plan for
    python; "driver" is refused (Pairs has no plan on the driver)."""
    if req.work not in ("engine", "operators", "jvm", "python"):
        raise CepkitError(f"run.work = {req.work!r}: Spark's Pairs program has no driver plan (its strategies run "
                          "in Spark's keyed operators); use engine, operators or jvm (the JVM plan) or python")
    if req.trigger == "realtime" and req.work == "python":
        raise CepkitError("run.trigger = \"realtime\" with run.work = \"python\": the Python Pairs plan has no "
                          "real-time form on Spark (real-time mode allows no Python in a query); use run.work = "
                          "\"engine\"")
    if req.trigger == "realtime" and req.plan != "keyed":
        # specs/TRANSLATION.md, "Real-time mode": the real-time form is the keyed JVM plan's.
        raise CepkitError(f"run.trigger = \"realtime\": the {req.plan} Pairs plan has no real-time form on "
                          f"Spark (real-time mode runs the keyed plan's JVM form only); use the keyed plan")
    spec = req.strategies
    return render("pyspark_pairs.py.j2", strategies=spec.strategies, plan=req.plan, buckets=req.buckets,
                  work=req.work, scale_factor=spec.scale_factor, seed=spec.seed, version=__version__,
                  source_name=req.source_name, source_sha256=req.source_sha256 or "-" * 16)


def translate_micro(req):
    """A microbenchmark workload (translators/spark_micro.py)."""
    from translators.spark_micro import translate_micro as translate

    return translate(req)
