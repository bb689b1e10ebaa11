"""The names of a model's parts, read off its config: which family it is (GPT-2-style,
Llama-style, Qwen2-style), which normalisation, which positions, how its heads share keys and
values, which feed-forward, and whether its output layer is tied.

Every page that names a part asks here, so a page on a Llama-style model says "RMSNorm" and
"rotary positions inside attention" where a GPT-2 page says "LayerNorm" and "position
embeddings", from one place. The config decides, never the file name.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinygpt.network.config import GPTConfig

GPT2, LLAMA, QWEN2, MIXED = "GPT-2-style", "Llama-style", "Qwen2-style", "a mix of both"


def family(config: GPTConfig) -> str:
    """GPT-2-style (LayerNorm, learned positions, GELU), Llama-style (RMSNorm, rotary positions,
    SwiGLU, no biases), Qwen2-style (the same with biases on q, k and v only), or a mix."""
    modern = (config.norm, config.position, config.mlp) == ("rmsnorm", "rope", "swiglu")
    classic = (config.norm, config.position, config.mlp) == ("layernorm", "learned", "gelu")
    if classic:
        return GPT2
    if not modern:
        return MIXED
    return QWEN2 if config.attn_bias and not config.proj_bias else LLAMA


@dataclass(frozen=True)
class ModelParts:
    """What a model's parts are called, and one line each on what they do."""

    family: str
    norm: str  # "LayerNorm" or "RMSNorm"
    norm_does: str
    norm_formula: str  # LaTeX
    norm_stats: str  # what the norm measures of each vector: "mean and variance" or "RMS"
    positions: str  # short name
    positions_does: str
    position_table: bool  # a learned table added to the input (False: rotary, in attention)
    attention: str  # heads and key/value heads, in words
    mlp: str
    mlp_does: str
    mlp_formula: str  # LaTeX
    tying: str
    output_formula: str  # LaTeX: how the logits are read out


def _norm(config: GPTConfig) -> tuple[str, str, str, str]:
    if config.norm == "rmsnorm":
        return ("RMSNorm", "each vector is divided by its root mean square, then scaled (γ); "
                           "no mean is removed and there is no shift β",
                r"\mathrm{RMSNorm}(x) = \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2 + \epsilon}}"
                r"\odot\gamma", "root mean square (RMS)")
    return ("LayerNorm", "each vector is rescaled to mean 0 and variance 1, then scaled (γ) "
                         "and shifted (β)",
            r"\mathrm{LN}(x) = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}\odot\gamma + \beta",
            "mean and variance")


def _positions(config: GPTConfig) -> tuple[str, str]:
    if config.position == "rope":
        return ("rotary positions inside attention",
                "no position table: inside every attention layer, each query and key is turned "
                "by an angle that grows with its position (RoPE), so a score depends on how "
                "far apart two tokens are")
    return ("learned position embeddings",
            "a learned table holds one vector per position; it is added to the token's "
            "embedding before the first block")


def _attention(config: GPTConfig) -> str:
    H, KV = config.n_head, config.kv_heads
    if KV == H:
        return f"{H} heads, each with its own keys and values"
    return (f"{H} query heads share {KV} key/value head{'s' if KV > 1 else ''} "
            f"(grouped-query attention: {config.group_size} query heads per key/value head)")


def _mlp(config: GPTConfig) -> tuple[str, str, str]:
    if config.mlp == "swiglu":
        return ("SwiGLU feed-forward",
                f"a gate and an up projection to {config.inner_dim} values, SiLU of the gate "
                "times the up projection, then a down projection back to d",
                r"\mathrm{FFN}(x) = W_{\text{down}}\big(\mathrm{SiLU}(W_{\text{gate}}x)"
                r"\odot W_{\text{up}}x\big)")
    return ("GELU feed-forward",
            f"a projection up to {config.inner_dim} values, GELU, then a projection back to d",
            r"\mathrm{FFN}(x) = W_2\,\mathrm{GELU}(W_1 x + b_1) + b_2")


def parts_of(config: GPTConfig) -> ModelParts:
    """The names of this config's parts (see the module docstring)."""
    norm, norm_does, norm_formula, norm_stats = _norm(config)
    positions, positions_does = _positions(config)
    mlp, mlp_does, mlp_formula = _mlp(config)
    tying = ("tied: W_out is the token-embedding matrix, transposed" if config.tie_weights
             else "untied: the output layer has its own W_out")
    norm_f = r"\mathrm{RMSNorm}_f" if config.norm == "rmsnorm" else r"\mathrm{LN}_f"
    return ModelParts(
        family=family(config), norm=norm, norm_does=norm_does, norm_formula=norm_formula,
        norm_stats=norm_stats, positions=positions, positions_does=positions_does,
        position_table=config.position == "learned", attention=_attention(config),
        mlp=mlp, mlp_does=mlp_does, mlp_formula=mlp_formula, tying=tying,
        output_formula=rf"\text{{logits}} = {norm_f}(x)\, W_{{\text{{out}}}}",
    )


def norm_symbol(config: GPTConfig, which: str) -> str:
    """LaTeX name of a normalisation ("1", "2", "f", or "" for any): LN_1 for GPT-2, RMSNorm_1
    for Llama."""
    base = r"\mathrm{RMSNorm}" if config.norm == "rmsnorm" else r"\mathrm{LN}"
    return f"{base}_{which}" if which else base


def config_facts(config: GPTConfig) -> dict:
    """The config as a model card states it (models/<name>.card.json's "config"): its sizes and
    its parts, plain JSON values, so a page can find the model that has a part."""
    return {
        "n_layer": config.n_layer, "n_head": config.n_head, "n_kv_head": config.kv_heads,
        "n_embd": config.n_embd, "n_ctx": config.n_ctx, "vocab_size": config.vocab_size,
        "norm": config.norm, "position": config.position, "mlp": config.mlp,
        "inner_dim": config.inner_dim, "tie_weights": config.tie_weights,
        "biases": bool(config.attn_bias or config.proj_bias or config.mlp_bias),
    }
