"""Fixtures of the modern folders' tests: the app serving a random Llama-shaped and a
Qwen2-shaped folder beside tiny.npz (tests/pages/modern_folders.py)."""

from tests.pages.modern_folders import modern_models, modern_models_dir  # noqa: F401
