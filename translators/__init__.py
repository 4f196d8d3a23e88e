"""Translators: compile neutral workload specs into runnable engine programs (PySpark)."""
