"""Benchmarks: fixture-store against the tools a user would otherwise use (python -m bench)."""
