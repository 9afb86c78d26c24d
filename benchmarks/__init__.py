"""Benchmarks for the performance targets: seeded cluster generators, the targets, the growth study.

Run `python -m benchmarks` from the repository root (see `benchmarks/run.py`).
"""
