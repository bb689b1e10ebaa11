"""tinygpt.checkpoint.shapes: the bytes a config asks for, and the names and shapes a file
must hold, refused with a clear message before any tensor is read."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tinygpt.caps import MAX_MODEL_BYTES
from tinygpt.checkpoint.shapes import check_names_and_shapes, expected_shapes
from tinygpt.network.model import GPTConfig, parameter_shapes
from tinygpt.safe_io import CheckpointError

SMALL = GPTConfig(vocab_size=32, n_ctx=8, n_embd=16, n_head=2, n_layer=2)


def ghosts(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Arrays of the given shapes that take no memory (as the GGUF loader checks them)."""
    return {name: np.broadcast_to(np.float32(0), shape) for name, shape in shapes.items()}


def test_expected_shapes_are_the_configs_and_fit():
    numbers = sum(math.prod(s) for s in parameter_shapes(SMALL).values())
    assert expected_shapes(SMALL, "f", stored=2 * numbers) == parameter_shapes(SMALL)
    assert expected_shapes(SMALL, "f", stored=None) == parameter_shapes(SMALL)  # quantized


def test_a_file_too_small_for_its_config_is_refused():
    numbers = sum(math.prod(s) for s in parameter_shapes(SMALL).values())
    with pytest.raises(CheckpointError, match="more than the weights' "):
        expected_shapes(SMALL, "f", stored=2 * numbers - 1)


def test_a_config_over_the_model_bytes_is_refused_before_any_read():
    big = GPTConfig(vocab_size=2**20, n_ctx=8, n_embd=4096, n_head=32, n_layer=1)
    assert 2**20 * 4096 * 4 > MAX_MODEL_BYTES // 2  # the embedding alone is half the cap
    with pytest.raises(CheckpointError, match="the limit is"):
        expected_shapes(big, "big.gguf", stored=None, itemsize=8)


def test_names_and_shapes_exactly():
    shapes = parameter_shapes(SMALL)
    check_names_and_shapes(ghosts(shapes), SMALL, "f")
    missing = dict(shapes)
    missing.pop("ln_f.gamma")
    with pytest.raises(CheckpointError, match=r"missing parameter array\(s\) \['ln_f.gamma'\]"):
        check_names_and_shapes(ghosts(missing), SMALL, "f")
    with pytest.raises(CheckpointError, match="unexpected array"):
        check_names_and_shapes(ghosts({**shapes, "extra": (1,)}), SMALL, "f")
    with pytest.raises(CheckpointError, match="ln_f.gamma has shape"):
        check_names_and_shapes(ghosts({**shapes, "ln_f.gamma": (3,)}), SMALL, "f")
