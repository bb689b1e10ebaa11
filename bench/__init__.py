"""Benchmarks: python bench/<name>.py (see each module's docstring)."""
