"""Translators: compile neutral workload specs into runnable engine programs.

Each engine is one module with a `translate_pairs` function (and, later, `translate_micro`)
plus one line in `translators.registry.ENGINES`. A translator only writes program text; it never
starts an engine. The generated programs are standalone scripts run by the harness (or by hand).
"""
