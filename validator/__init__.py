"""Validator: independent reference answers, correctness report, latency metrics, pscore."""
