"""The Apache Flink (PyFlink) translator.

`translate_pairs` writes a program (templates/flink_pairs.py.j2) holding the strategies as a
literal table, the plan and the plan family (run.work), wired to the Flink runtime
(flink_runtime/pairs.py runs the same Pairs logic as the Spark plans, runtime_common's: in Flink's
operators in the JVM by default, in PyFlink keyed functions with run.work = "python");
`translate_micro` writes one program per workload (translators/flink_micro.py). specs/ENGINES.md is
the program's contract.
"""

from __future__ import annotations

from kit import __version__
from kit.errors import CepkitError
from translators.render import render
from translators.request import MicroTranslation, PairsTranslation

ENGINE = "flink"


def translate_pairs(req: PairsTranslation) -> str:
    """A Pairs program: the JVM plan (cepkit.flink.PairsFlink) for every plan family but "python",
    which runs the Python plan (flink_runtime/pairs.py)."""
    spec = req.strategies
    work = req.work
    if work not in ("engine", "operators", "jvm", "python"):
        raise CepkitError(f"run.work = {work!r}: Flink's Pairs program runs the JVM plan (engine, operators, jvm) "
                          "or the Python plan (python)")
    return render("flink_pairs.py.j2", strategies=spec.strategies, plan=req.plan, buckets=req.buckets, work=work,
                  scale_factor=spec.scale_factor, seed=spec.seed, version=__version__,
                  source_name=req.source_name, source_sha256=req.source_sha256 or "-" * 16)


def translate_micro(req: MicroTranslation) -> str:
    """A microbenchmark workload (translators/flink_micro.py)."""
    from translators.flink_micro import translate_micro as translate

    return translate(req)
