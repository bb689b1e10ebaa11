"""Training speed of tinygpt (NumPy) beside PyTorch on the CPU, measured in the same run.

Both train the identical model (same config, same initial weights, same batches, AdamW
with the same settings); we print tokens per second for each and the ratio.

    python bench/train_speed.py                       # the default config
    python bench/train_speed.py --n-layer 6 --n-embd 384 --block-size 256 --steps 5
    python bench/train_speed.py --no-torch            # tinygpt only (for sizing configs)
    OPENBLAS_NUM_THREADS=1 python bench/train_speed.py  # one thread each (PyTorch follows)
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
from tinygpt.model import GPT, GPTConfig  # noqa: E402
from tinygpt.train import AdamW, clip_grad_norm, get_batch  # noqa: E402


def tinygpt_step(model: GPT, opt: AdamW, x: np.ndarray, y: np.ndarray) -> float:
    loss, grads = model.loss_and_grads(x, y)
    clip_grad_norm(grads, 1.0)
    opt.step(grads, 1e-3)
    return loss


def time_steps(step, batches) -> tuple[float, list[float]]:
    """Seconds per step (median over the timed steps, after one warm-up step)."""
    losses = [step(*batches[0])]
    times = []
    for x, y in batches[1:]:
        t0 = time.perf_counter()
        losses.append(step(x, y))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), losses


def torch_model(model: GPT):
    """The same GPT written with torch.nn, weights copied from the tinygpt model."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    cfg = model.config

    class Block(nn.Module):
        def __init__(self, b) -> None:
            super().__init__()
            C = cfg.n_embd
            self.ln1 = nn.LayerNorm(C, eps=cfg.layer_norm_eps)
            self.ln2 = nn.LayerNorm(C, eps=cfg.layer_norm_eps)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.fc1 = nn.Linear(C, 4 * C)
            self.fc2 = nn.Linear(4 * C, C)
            with torch.no_grad():  # tinygpt stores W as (in, out); torch as (out, in)
                for ln, src in ((self.ln1, b.ln1), (self.ln2, b.ln2)):
                    ln.weight.copy_(torch.from_numpy(src.gamma))
                    ln.bias.copy_(torch.from_numpy(src.beta))
                for lin, W, bias in ((self.qkv, b.attn.W_qkv, b.attn.b_qkv),
                                     (self.proj, b.attn.W_proj, b.attn.b_proj),
                                     (self.fc1, b.ffn.W1, b.ffn.b1),
                                     (self.fc2, b.ffn.W2, b.ffn.b2)):
                    lin.weight.copy_(torch.from_numpy(W.T.copy()))
                    lin.bias.copy_(torch.from_numpy(bias))

        def forward(self, x):
            B, T, C = x.shape
            H = cfg.n_head
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate=approximate))

    class TorchGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Parameter(torch.from_numpy(model.embedding.embeddings.copy()))
            self.wpe = nn.Parameter(torch.from_numpy(model.embedding.position_embeddings.copy()))
            self.blocks = nn.ModuleList(Block(b) for b in model.blocks)
            self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
            with torch.no_grad():
                self.ln_f.weight.copy_(torch.from_numpy(model.ln_f.gamma))
                self.ln_f.bias.copy_(torch.from_numpy(model.ln_f.beta))

        def forward(self, ids, targets):
            x = self.wte[ids] + self.wpe[: ids.shape[1]]
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.T  # tied output layer
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    if not cfg.tie_weights or cfg.output_bias:
        raise ValueError("the PyTorch reference is written for a tied model without output bias")
    return TorchGPT()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=6, help="timed steps (plus one warm-up)")
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args()

    config = GPTConfig(vocab_size=args.vocab_size, n_ctx=args.block_size, n_embd=args.n_embd,
                       n_head=args.n_head, n_layer=args.n_layer)
    model = GPT(config, seed=0)
    rng = np.random.default_rng(0)
    data = rng.integers(0, config.vocab_size, size=200_000)
    batches = [
        get_batch(data, args.batch_size, args.block_size, rng) for _ in range(args.steps + 1)
    ]
    tokens = args.batch_size * args.block_size
    print(f"config: {args.n_layer} layers, n_embd {args.n_embd}, {args.n_head} heads, vocab "
          f"{args.vocab_size}, batch {args.batch_size} x {args.block_size} = {tokens} tokens; "
          f"{model.num_parameters():,} parameters")

    torch_step = None
    if not args.no_torch:
        import torch

        if "OPENBLAS_NUM_THREADS" in os.environ:  # same number of threads as NumPy's BLAS
            torch.set_num_threads(int(os.environ["OPENBLAS_NUM_THREADS"]))
        tmodel = torch_model(model)  # copy the weights before tinygpt trains them
        topt = torch.optim.AdamW(tmodel.parameters(), lr=1e-3, betas=(0.9, 0.95),
                                 weight_decay=0.1)

        def torch_step(x, y):
            loss = tmodel(torch.from_numpy(x), torch.from_numpy(y))
            topt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(tmodel.parameters(), 1.0)
            topt.step()
            return loss.item()

    opt = AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sec, losses = time_steps(lambda x, y: tinygpt_step(model, opt, x, y), batches)
    ours = tokens / sec
    print(f"tinygpt (NumPy {np.__version__}): {ours:10,.0f} tokens/s  ({sec * 1000:.0f} ms/step)")
    if torch_step is not None:
        tsec, tlosses = time_steps(torch_step, batches)
        ref = tokens / tsec
        print(f"PyTorch {torch.__version__} CPU ({torch.get_num_threads()} threads): "
              f"{ref:10,.0f} tokens/s  ({tsec * 1000:.0f} ms/step)")
        print(f"first-step loss: tinygpt {losses[0]:.5f}, PyTorch {tlosses[0]:.5f} "
              f"(same model, same batch); last: {losses[-1]:.5f} vs {tlosses[-1]:.5f}")
        print(f"ratio tinygpt / PyTorch: {ours / ref:.2f}x  (target >= 0.70x)")


if __name__ == "__main__":
    main()
