"""tinygpt_app.compute.readout_cache: the logit lens, the top tokens and the attention maps,
computed once per trace, equal what tinygpt.readouts computes directly on the same trace."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.compute.caches uses streamlit's caches")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt import readouts as ti  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt.readouts import explain  # noqa: E402
from tinygpt_app.compute import readout_cache as rc  # noqa: E402
from tinygpt_app.compute.models import SESSION_PREFIX  # noqa: E402

_fresh = itertools.count()


@dataclass
class Subject:
    """A session model (version 0: no file to look at) and a prompt."""

    model_id: str
    model: object
    tokenizer: object
    prompt: str
    ids: np.ndarray
    position: int = 0

    @property
    def n_layer(self) -> int:
        return self.model.config.n_layer


@pytest.fixture
def subject() -> Subject:
    model, tok = load(TINY)
    prompt = "ROMEO:\nBut soft, what light"
    ids = np.array(tok.encode(prompt), dtype=np.int64)
    # a new id per test: the stores are shared by the whole process
    return Subject(f"{SESSION_PREFIX}readout-test #{next(_fresh)}", model, tok, prompt, ids)


def test_the_lens_equals_the_direct_one_column_by_column(subject):
    logits, trace = subject.model.run_with_trace(subject.ids)
    n = len(subject.ids)
    first = rc.logit_lens(subject, trace, [0, 1], k=3)
    later = rc.logit_lens(subject, trace, [1, n - 1], k=2)  # one cached column, one new
    direct = ti.logit_lens(subject.model, trace, k=rc.LENS_K, positions=[0, 1, n - 1])
    np.testing.assert_array_equal(first.ids, direct.ids[:, :2, :3])
    np.testing.assert_allclose(first.probs, direct.probs[:, :2, :3], rtol=1e-6)
    np.testing.assert_array_equal(later.ids, direct.ids[:, 1:, :2])
    np.testing.assert_allclose(later.entropy, direct.entropy[:, 1:], rtol=1e-6)
    assert later.labels == direct.labels


def test_top_tokens_are_computed_once_and_equal_the_direct_ones(subject):
    logits, _ = subject.model.run_with_trace(subject.ids)
    top = rc.top_tokens(subject, logits)
    direct = ti.top_tokens(logits, subject.ids, rc.TOP_K)
    np.testing.assert_array_equal(top.ids, direct.ids)
    np.testing.assert_allclose(top.probs, direct.probs, rtol=1e-6)
    assert rc.top_tokens(subject, logits * 0) is top  # the same trace: not computed again


def test_attention_maps_are_shared_read_only(subject):
    _, trace = subject.model.run_with_trace(subject.ids)
    maps = rc.attention_maps(subject, trace)
    np.testing.assert_array_equal(maps, explain.attention_maps(trace, subject.n_layer))
    assert not maps.flags.writeable and rc.attention_maps(subject, trace) is maps


class _Shape:
    """A model's config and parameter count, without its weights (GPT-2 small is 500 MB)."""

    def __init__(self, config, parameters: int) -> None:
        self.config, self._parameters = config, parameters

    def num_parameters(self) -> int:
        return self._parameters


def test_the_lens_window_is_as_wide_as_a_click_affords():
    """GPT-2 small at 200 tokens: a far move computes every column of the window anew, so the
    window's columns must cost at most LENS_CLICK_FORWARDS forwards; a small model keeps 24."""
    from types import SimpleNamespace

    from tinygpt.network.config import GPTConfig

    gpt2 = GPTConfig(vocab_size=50257, n_ctx=1024, n_embd=768, n_head=12, n_layer=12)
    state = SimpleNamespace(config=gpt2, n=200, model=_Shape(gpt2, 124_439_808))
    for sublayers in (False, True):
        width = rc.lens_width(state, 24, sublayers)
        stages = len(ti.residual_stages(gpt2.n_layer, sublayers))
        cost = width * stages * gpt2.n_embd * gpt2.vocab_size * rc.LENS_SOFTMAX_FACTOR
        assert rc.LENS_MIN_POSITIONS <= width < 24
        assert cost <= rc.LENS_CLICK_FORWARDS * 200 * 124_439_808 or width == rc.LENS_MIN_POSITIONS
    model, _ = load(TINY)
    small = SimpleNamespace(config=model.config, n=10, model=model)
    assert rc.lens_width(small, 24) == 24
