"""tinygpt.caps: the checks every model-file value goes through (counts, finite numbers in
range, real booleans) and the caps derived from what a config expects."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt import caps
from tinygpt.caps import CheckpointError, count, flag, real


@pytest.mark.parametrize("value", [1, 12, caps.MAX_LAYERS, np.int64(7)])
def test_counts_within_their_cap_pass(value):
    assert count(value, "num_hidden_layers", caps.MAX_LAYERS, "m/config.json") == int(value)


@pytest.mark.parametrize("value, why", [
    (10**9, "outside 1 .. 1,024"), (2**62, "outside"), (10**30, "outside"), (0, "outside"),
    (-3, "outside"), (12.0, "not an integer"), (True, "not an integer"), ("12", "not an integer"),
    (None, "not an integer"), ([12], "not an integer"),
])
def test_counts_beyond_their_cap_or_of_another_type_are_refused(value, why):
    with pytest.raises(CheckpointError, match=why) as err:
        count(value, "num_hidden_layers", caps.MAX_LAYERS, "m/config.json")
    assert str(err.value).startswith("m/config.json: num_hidden_layers")
    assert len(str(err.value)) < 120  # a huge value is quoted short


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e400])
def test_numbers_must_be_finite(value):
    with pytest.raises(CheckpointError, match="not a finite number"):
        real(value, "rms_norm_eps", caps.NORM_EPS_RANGE, "c.json")


@pytest.mark.parametrize("value, ok", [
    (1e-6, True), (1, True), (1e-12, True), (0.0, False), (-1e-5, False), (2.0, False),
    (1e-40, False), ("1e-5", False), (False, False), (None, False),
])
def test_numbers_must_lie_in_their_range(value, ok):
    if ok:
        assert real(value, "rms_norm_eps", caps.NORM_EPS_RANGE, "c.json") == float(value)
    else:
        with pytest.raises(CheckpointError, match="rms_norm_eps"):
            real(value, "rms_norm_eps", caps.NORM_EPS_RANGE, "c.json")


@pytest.mark.parametrize("theta, ok", [(10000.0, True), (5e5, True), (3.6e9, True),
                                       (1e308, False), (1.0, False), (0.5, False)])
def test_rope_theta_range_takes_every_real_model(theta, ok):
    if ok:
        assert real(theta, "rope_theta", caps.ROPE_THETA_RANGE, "c.json") == theta
    else:
        with pytest.raises(CheckpointError, match="outside the range"):
            real(theta, "rope_theta", caps.ROPE_THETA_RANGE, "c.json")


@pytest.mark.parametrize("value", ["no", "false", 0, 1, None, [], "true"])
def test_a_flag_is_json_true_or_false_and_nothing_else(value):
    with pytest.raises(CheckpointError, match="is not true or false"):
        flag(value, "tie_word_embeddings", "c.json")
    assert flag(False, "x", "c.json") is False and flag(True, "x", "c.json") is True


def test_derived_caps_grow_with_the_config_and_stop_at_the_global_ones():
    # SmolLM2-135M: 30 layers of 9 arrays and 2 more
    assert caps.max_tensors(272) == 3 * 272 + 16
    assert caps.max_header_bytes(272) < 2 * 2**20  # its real header: 33 KB
    assert caps.max_tensors(10**6) == caps.MAX_TENSORS
    assert caps.max_header_bytes(10**6) == caps.MAX_SAFETENSORS_HEADER
    assert caps.max_merges(128_256) > 280_147  # Llama-3 lists 280,147 merges


def test_the_caps_module_imports_nothing_of_tinygpt():
    """Every part of tinygpt (and a new file format) can use it without an import cycle."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(caps.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in imported if m and m.startswith("tinygpt")]


def shown(value) -> str:
    """A cap as the docs write it: 1,024; 8 GiB; (1e-30, 1]; 2."""
    if isinstance(value, tuple):
        return f"({value[0]:g}, {value[1]:g}]"
    if isinstance(value, int) and value >= 2**30 and value % 2**30 == 0:
        return f"{value // 2**30} GiB"
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def test_the_docs_table_gives_each_cap_its_value():
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs" / "modern_models.md"
    rows = re.findall(r"^\| `([A-Z_]+)`[^|]*\| ([^|]+?) \|", docs.read_text(encoding="utf-8"), re.M)
    assert len(rows) >= 14
    for name, cell in rows:
        assert cell.startswith(shown(getattr(caps, name))), (name, cell)
