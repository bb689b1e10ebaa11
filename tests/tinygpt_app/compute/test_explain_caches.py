"""tinygpt_app.compute.explain_caches: occlusion runs by itself on a click only when it costs
what a click may (a quarter of a forward of the prompt, or a few billion multiply-adds)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.compute uses streamlit's caches")

from tinygpt import GPT, GPTConfig  # noqa: E402
from tinygpt_app.compute import explain_caches  # noqa: E402

GPT2_SMALL = GPTConfig(vocab_size=50257, n_ctx=1024, n_embd=768, n_head=12, n_layer=12)


class ShapeOnly(GPT):
    """GPT-2 small's parameter count without its 500 MB of weights: occlusion's cost needs
    only the count."""

    def __init__(self, config: GPTConfig, count: int) -> None:
        self.config, self._count = config, count

    def num_parameters(self) -> int:
        return self._count


@dataclass
class Subject:
    model: GPT
    n: int
    position: int


def gpt2_small_subject(position: int, n: int = 200) -> Subject:
    return Subject(ShapeOnly(GPT2_SMALL, 124_439_808), n, position)


def test_occlusion_waits_for_a_click_where_a_position_move_could_not_afford_it():
    """GPT-2 small, a 200-token prompt (bench/gpt2_pages.py): near the start occlusion is a
    few prompts of a few tokens; at position 9 it was 0.75 forwards, at 27 four."""
    assert explain_caches.occlusion_runs_itself(gpt2_small_subject(3))
    for position in (9, 27, 40, 199):
        subject = gpt2_small_subject(position)
        macs, forwards = explain_caches.occlusion_cost(subject)
        assert forwards > explain_caches.AUTO_OCCLUSION_FORWARDS
        assert not explain_caches.occlusion_runs_itself(subject)


def test_a_small_models_occlusion_runs_by_itself():
    """The shipped model's size (4.3 million parameters): cheap at position 20 of a
    40-token prompt (1.8 billion multiply-adds), though that is ten of its forwards."""
    tiny = Subject(ShapeOnly(GPT2_SMALL, 4_273_664), n=40, position=20)
    macs, forwards = explain_caches.occlusion_cost(tiny)
    assert forwards > explain_caches.AUTO_OCCLUSION_FORWARDS
    assert macs <= explain_caches.AUTO_OCCLUSION_MACS
    assert explain_caches.occlusion_runs_itself(tiny)


def test_the_cost_is_the_readouts_count_against_one_forward():
    model = GPT(GPTConfig(vocab_size=64, n_ctx=32, n_embd=16, n_head=2, n_layer=1))
    subject = Subject(model, n=20, position=9)
    macs, forwards = explain_caches.occlusion_cost(subject)
    assert macs == 10 * 9 * model.num_parameters()
    assert np.isclose(forwards, 90 / 20)
