"""The Apache Flink (PyFlink) translator.

`translate_pairs` writes a program (templates/flink_pairs.py.j2) holding the strategies as a
literal table and the plan, wired to the Flink runtime (flink_runtime/pairs.py runs the same Pairs
logic as the Spark plan, runtime_common's, in keyed functions); `translate_micro` writes one
program per workload (translators/flink_micro.py). specs/ENGINES.md is the program's contract.
"""

from __future__ import annotations

from kit import __version__
from translators.render import render
from translators.request import MicroTranslation, PairsTranslation

ENGINE = "flink"


def translate_pairs(req: PairsTranslation) -> str:
    spec = req.strategies
    return render("flink_pairs.py.j2", strategies=spec.strategies, plan=req.plan, buckets=req.buckets,
                  scale_factor=spec.scale_factor, seed=spec.seed, version=__version__,
                  source_name=req.source_name, source_sha256=req.source_sha256 or "-" * 16)


def translate_micro(req: MicroTranslation) -> str:
    """A microbenchmark workload (translators/flink_micro.py)."""
    from translators.flink_micro import translate_micro as translate

    return translate(req)
