"""What a config asks of a file's parameters: their bytes within the caps, then exactly their
names and shapes, checked before any tensor is read (the .npz, Hugging Face and GGUF loaders
all check through here)."""

from __future__ import annotations

import math

import numpy as np

from tinygpt.caps import MAX_MODEL_BYTES
from tinygpt.network.model import GPTConfig, parameter_shapes  # the one list of names
from tinygpt.safe_io import CheckpointError


def expected_shapes(config: GPTConfig, where: str, *, stored: int | None, itemsize: int = 4
                    ) -> dict[str, tuple[int, ...]]:
    """The parameter shapes of `config`, once its size is known to fit: at most
    MAX_MODEL_BYTES loaded (`itemsize` bytes a number), and no more numbers than the file's
    `stored` bytes hold at 2 bytes each (float16, the smallest float a file may store; None
    for a quantized file, which stores less).

    Checked before any tensor is read. Listing the names is itself bounded: GPTConfig caps
    the layers (tinygpt.caps.MAX_LAYERS), so a config of 1e9 layers never gets here."""
    shapes = parameter_shapes(config)
    numbers = sum(math.prod(s) for s in shapes.values())
    if numbers * itemsize > MAX_MODEL_BYTES:
        raise CheckpointError(f"{where}: the config describes {numbers * itemsize:,} bytes of "
                              f"parameters; the limit is {MAX_MODEL_BYTES:,} (tinygpt.caps)")
    if stored is not None and 2 * numbers > stored:
        raise CheckpointError(f"{where}: the config describes {numbers:,} parameters, more "
                              f"than the weights' {stored:,} bytes can hold")
    return shapes


def check_names_and_shapes(params: dict[str, np.ndarray], config: GPTConfig,
                           where: str) -> None:
    """Exactly the expected names and shapes: read from headers, nothing is computed."""
    expected = parameter_shapes(config)
    missing = [n for n in expected if n not in params]
    if missing:
        raise CheckpointError(f"{where}: missing parameter array(s) {missing[:5]}")
    extra = sorted(set(params) - set(expected))
    if extra:
        raise CheckpointError(f"{where}: unexpected array(s) {extra[:5]}")
    for name, shape in expected.items():
        if params[name].shape != shape:
            raise CheckpointError(f"{where}: {name} has shape {params[name].shape}, "
                                  f"expected {shape}")
