"""A Llama folder as `hf download HuggingFaceTB/SmolLM2-135M` fetches it (config.json,
model.safetensors, generation_config.json, tokenizer_config.json, tokenizer.json; random
weights, small shapes, a Llama-3-style tokenizer with ignore_merges) in the models folder:
chosen in the sidebar, Home and the Tokens page run on it, with its tokenizer's chips and its
merge replay; every page runs on it, and on a Qwen2 folder (q/k/v biases, untied, a Qwen2
tokenizer) too."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from tests.apptest_support import PAGES, ROOT, TINY, assert_clean, open_page  # noqa: E402
from tests.tinygpt.tokenizer.hf_files import build as build_tokenizer  # noqa: E402
from tinygpt import load  # noqa: E402
from tinygpt.tokenizer.hf_json import load_tokenizer_json  # noqa: E402

TOKENS_PAGE = "pages/2_Tokens_and_embeddings.py"
C, LAYERS, HEADS, KV_HEADS, INNER = 32, 2, 4, 2, 48
PROMPT = "Hello, world! It's a test of the tokens"


def llama_tensors(vocab: int, rng: np.random.Generator, qwen2: bool = False
                  ) -> dict[str, np.ndarray]:
    """Random float32 weights in Llama's tensor names (tied: no lm_head); Qwen2's add biases
    on q, k and v, and (untied here) an lm_head."""
    kv = KV_HEADS * C // HEADS
    shapes = {"model.embed_tokens.weight": (vocab, C), "model.norm.weight": (C,)}
    if qwen2:
        shapes["lm_head.weight"] = (vocab, C)
        for i in range(LAYERS):
            shapes.update({f"model.layers.{i}.self_attn.{n}_proj.bias": (w,)
                           for n, w in (("q", C), ("k", kv), ("v", kv))})
    for i in range(LAYERS):
        shapes.update({f"model.layers.{i}.{name}": s for name, s in {
            "input_layernorm.weight": (C,), "post_attention_layernorm.weight": (C,),
            "self_attn.q_proj.weight": (C, C), "self_attn.k_proj.weight": (kv, C),
            "self_attn.v_proj.weight": (kv, C), "self_attn.o_proj.weight": (C, C),
            "mlp.gate_proj.weight": (INNER, C), "mlp.up_proj.weight": (INNER, C),
            "mlp.down_proj.weight": (C, INNER)}.items()})
    return {name: (np.ones(s) if name.endswith("norm.weight") else 0.1 * rng.standard_normal(s)
                   ).astype(np.float32) for name, s in shapes.items()}


def write_llama_folder(folder, qwen2: bool = False) -> None:
    """The five files of a hub download of a Llama (or Qwen2) model, written without PyTorch."""
    json_path = build_tokenizer("qwen2" if qwen2 else "llama3", folder.parent / "tokenizers")
    shutil.copy(json_path, folder / "tokenizer.json")
    vocab = load_tokenizer_json(json_path).vocab_size
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM" if qwen2 else "LlamaForCausalLM"],
        "model_type": "qwen2" if qwen2 else "llama", "hidden_act": "silu",
        "hidden_size": C, "intermediate_size": INNER, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 100000.0,
        "rope_scaling": None, "tie_word_embeddings": not qwen2, "torch_dtype": "float32",
        "vocab_size": vocab, "bos_token_id": 0, "eos_token_id": 1}))
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 0, "eos_token_id": 1, "transformers_version": "4.40.1"}))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
         "tokenizer_class": "GPT2Tokenizer", "model_max_length": 128}))
    safetensors_numpy.save_file(llama_tensors(vocab, np.random.default_rng(5), qwen2),
                                str(folder / "model.safetensors"))


@pytest.fixture
def llama_folder(tmp_path, monkeypatch):
    """models/ holding the shipped-style tiny.npz (the default) and a folder smol/."""
    shutil.copy(TINY, tmp_path / "tiny.npz")
    folder = tmp_path / "smol"
    folder.mkdir()
    write_llama_folder(folder)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    return folder


@pytest.fixture
def qwen2_folder(llama_folder):
    """The same models folder with a Qwen2 folder qwen/ beside smol/."""
    folder = llama_folder.parent / "qwen"
    folder.mkdir()
    write_llama_folder(folder, qwen2=True)
    return folder


def choose_smol(at, name: str = "smol"):
    select = next(s for s in at.sidebar.selectbox if s.label == "Model")
    assert name in select.options
    return select.set_value(name).run()


def chip_texts(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_tokens_page_shows_the_folders_tokens_and_merges(llama_folder):
    at = choose_smol(open_page(TOKENS_PAGE, PROMPT))
    assert_clean(at)
    _, tok = load(llama_folder)
    ids = tok.encode(PROMPT)
    html = chip_texts(at)
    for token_id in ids:  # a chip per token of the folder's own tokenizer, with its id
        assert f"id {token_id}" in html
    assert f"n = {len(ids)}" in "\n".join(e.value for e in [*at.caption, *at.markdown])
    chunks = tok.explain(PROMPT)
    merged = next(i for i, c in enumerate(chunks) if c.steps_total > 1)
    at.selectbox(key="tokens.chunk").set_value(merged).run()
    assert_clean(at)
    assert "merge 1:" in chip_texts(at)


def test_a_chunk_taken_whole_is_said_in_plain_words(llama_folder):
    """Llama-3's ignore_merges: a chunk that is a vocabulary word is that one token at once."""
    _, tok = load(llama_folder)
    text = "the the the of and"
    chunks = tok.explain(text)
    whole = [i for i, c in enumerate(chunks) if c.taken_whole]
    assert whole, "common words are whole tokens of this vocabulary"
    at = choose_smol(open_page(TOKENS_PAGE, text))
    at.selectbox(key="tokens.chunk").set_value(whole[-1]).run()
    assert_clean(at)
    said = "\n".join(t.value for t in at.text)
    chunk = chunks[whole[-1]]
    assert f"is one token of the vocabulary (id {chunk.final[0]})" in said
    assert "taken whole" in said and "without running any merge" in said
    assert f"taken whole: {tok.token_display(chunk.final[0])}" in chip_texts(at)
    assert "merge 1:" not in chip_texts(at)


def test_home_runs_on_the_folder(llama_folder):
    at = choose_smol(open_page("app.py", PROMPT))
    assert_clean(at)


@pytest.mark.parametrize("script", PAGES)
def test_every_page_runs_on_a_llama_folder(llama_folder, script):
    """No page breaks on RMSNorm, rotary positions, grouped-query attention and SwiGLU: each
    draws the model's own numbers or says in plain words what it cannot show."""
    at = choose_smol(open_page(script, PROMPT))
    assert_clean(at)


@pytest.mark.parametrize("script", PAGES)
def test_every_page_runs_on_a_qwen2_folder(qwen2_folder, script):
    """q/k/v biases, no output-projection bias, an untied output layer, Qwen2's tokenizer."""
    at = choose_smol(open_page(script, PROMPT), "qwen")
    assert_clean(at)
    assert any(c.value.startswith("Qwen2-style") for c in at.sidebar.caption)


def test_the_sidebar_says_the_family(llama_folder):
    at = open_page("pages/6_Logits.py", PROMPT)
    assert any(c.value.startswith("GPT-2-style") for c in at.sidebar.caption)
    at = choose_smol(at)
    assert any(c.value.startswith("Llama-style ·") for c in at.sidebar.caption)


def test_the_layernorm_page_says_plainly_that_this_model_uses_rmsnorm(llama_folder):
    at = choose_smol(open_page("pages/3_LayerNorm.py", PROMPT))
    assert_clean(at)
    assert any("normalises with **RMSNorm**" in m.value for m in at.markdown)


def said(at) -> str:
    """Every text the page wrote: markdown, captions, headers, formulas, toggles' labels."""
    return "\n".join([*(e.value for e in [*at.markdown, *at.caption, *at.header, *at.latex]),
                      *(t.label for t in at.toggle),
                      *(link.proto.label for link in at.get("page_link"))])


def test_the_pages_name_the_llama_models_own_parts(llama_folder):
    """RMSNorm, rotary positions and SwiGLU where a GPT-2 page says LayerNorm, position
    embeddings and GELU; no position-embedding heatmap for a rotary model."""
    home = said(choose_smol(open_page("app.py", PROMPT)))
    assert "Final RMSNorm" in home and "Final LayerNorm" not in home
    assert "RMSNorm → SwiGLU feed-forward" in home and "4 query heads, 2 key/value heads" in home
    tokens = choose_smol(open_page(TOKENS_PAGE, PROMPT))
    assert "rotary positions inside attention" in said(tokens)
    assert at_least_one_radio_without(tokens, "Position embedding")
    assert not any("embed_position" in c.proto.spec for c in tokens.get("plotly_chart"))
    residual = said(choose_smol(open_page("pages/5_Residual_stream.py", PROMPT)))
    assert r"\mathrm{RMSNorm}_1" in residual and "root mean square (RMS)" in residual
    assert r"\mathrm{LN}_1" not in residual and "final LayerNorm (with" not in residual
    logits = said(choose_smol(open_page("pages/6_Logits.py", PROMPT)))
    assert r"\mathrm{RMSNorm}_f" in logits and "tied: W_out" in logits
    why = said(choose_smol(open_page("pages/14_Why_this_token.py", PROMPT)))
    assert r"\mathrm{rms}(x)" in why and r"\beta" not in why
    whatif = said(choose_smol(open_page("pages/10_What_if.py", PROMPT)))
    assert "No rotary positions" in whatif and "No RMSNorm" in whatif
    compare = said(choose_smol(open_page("pages/15_Compare_prompts.py", PROMPT)))
    assert "final RMSNorm" in compare


def at_least_one_radio_without(at, option: str) -> bool:
    radio = at.radio(key="tokens.view")
    return all(option not in o for o in radio.options)


def test_a_gpt2_model_keeps_its_names(llama_folder):
    home = said(open_page("app.py", PROMPT))
    assert "Final LayerNorm" in home and "the row for its position is added" in home
    whatif = said(open_page("pages/10_What_if.py", PROMPT))
    assert "No position embeddings" in whatif and "No LayerNorm" in whatif


SHIPPED_LLAMA = ROOT / "models" / "shakespeare_llama.npz"  # trained by issue 31: may be absent


@pytest.mark.parametrize("script", PAGES)
def test_every_page_runs_on_the_shipped_llama_style_model(tmp_path, monkeypatch, script):
    if not SHIPPED_LLAMA.is_file():
        pytest.skip("models/shakespeare_llama.npz is not trained yet")
    shutil.copy(SHIPPED_LLAMA, tmp_path / SHIPPED_LLAMA.name)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", SHIPPED_LLAMA.name)
    at = open_page(script, PROMPT)
    assert_clean(at)
    assert any(c.value.startswith("Llama-style") for c in at.sidebar.caption)
