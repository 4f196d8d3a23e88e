"""Query generator: neutral XML workload specs (Pairs strategies, microbenchmark queries)."""
