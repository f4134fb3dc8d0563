"""Benchmarks; see README.md."""
