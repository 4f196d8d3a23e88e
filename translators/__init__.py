"""Translators: compile neutral workload specs into runnable engine programs.

Each engine is one module with `translate_pairs` and `translate_micro`, plus one line in
`kit.engines.ENGINES` (translators/registry.py imports it). A translator only writes program text;
it never starts an engine. A generated program holds the spec as data and imports only its
engine's runtime package (for PySpark, `spark_runtime`), so it runs under the harness, by hand, or
on a cluster's executors without the rest of cepkit.
"""
