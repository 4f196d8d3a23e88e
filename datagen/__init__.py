"""Data generators: Pairs stock ticks and microbenchmark streams/tables, plus a CSV converter."""
