"""Every limit a model file is held to, in one place: its bytes, its counts, its numbers' ranges.

A file in the models folder may be damaged or hostile. Whatever it declares (a layer count, a
vocabulary, 150,000 added tokens, an epsilon of Infinity), reading it must cost a bounded amount
of time and memory, and end in a model or in a `CheckpointError` that says what is wrong. So
every count is checked against its cap here before anything is listed or allocated from it,
every float must be finite and in its range, every flag a real true / false. The caps sit far
above every real model tinygpt reads (the largest real value is noted beside each) and far
below what would hurt a server.

Who uses what:
- bytes: `tinygpt.safe_io` (every file read is capped before it is read), and the counts and
  lengths of a GGUF header (`tinygpt.checkpoint.gguf_file`, MAX_GGUF_*);
- counts and ranges of a model: `tinygpt.network.config.GPTConfig` refuses a config beyond
  them, whoever builds it; the config readers (`tinygpt.checkpoint`) check each config.json
  value with `count`, `real` and `flag`, under its own name, before a GPTConfig is made;
- tensors: a safetensors header may hold `max_tensors(expected)` entries and
  `max_header_bytes(expected)` bytes, derived from the tensors its config.json expects;
  the parameters must fit in MAX_MODEL_BYTES as float32, and in the file (2 bytes each at
  least);
- tokenizers: vocabulary, merges (`max_merges`), added tokens and their length, and the time
  a load's warm-up encode may take (`WARM_UP_CPU_SECONDS`).

This module imports nothing of tinygpt: every other part can use it (a new file format too).
"""

from __future__ import annotations

import math
import numbers

# ----------------------------------------------------------------------------- bytes of a file

MAX_JSON_BYTES = 1 * 2**20  # config.json, a checkpoint's __config__
MAX_METADATA_BYTES = 4 * 2**20  # a checkpoint's __metadata__
MAX_TOKENIZER_BYTES = 16 * 2**20  # tokenizer.json, vocab.json, merges.txt (Qwen2's: 7 MB)
MAX_JSON_DEPTH = 32  # nesting levels of arrays / objects (real files use 3)
MAX_NPY_HEADER = 10_000  # bytes of a .npy header (NumPy's own default limit)
MAX_SAFETENSORS_HEADER = 16 * 2**20  # bytes of a safetensors JSON header, whatever it holds
MAX_MODEL_BYTES = 8 * 2**30  # all parameter arrays of one model as loaded (float32: 2.1 B)

# GGUF files (tinygpt.checkpoint.gguf_file): every count and length read from the header is
# checked against these and against the bytes left in the file before anything is allocated
MAX_GGUF_KEYS = 4096  # metadata key/value pairs (SmolLM2-135M: 33)
MAX_GGUF_STRING = 1 * 2**20  # bytes of one string (a chat template: a few KB)
MAX_GGUF_ARRAY = 1 * 2**20  # items of one array (a vocabulary: 49,152 to 262,144 tokens)
MAX_GGUF_ITEMS = 4 * 2**20  # items of all arrays together (tokens + merges + types)
MAX_GGUF_TENSORS = 16_384  # tensors (SmolLM2-135M: 272; a 70B Llama: 723)
MAX_GGUF_DIMS = 4  # dimensions of one tensor (GGML_MAX_DIMS)
MAX_GGUF_NAME = 256  # bytes of a key or tensor name (llama.cpp's tensor names: 64)
MAX_GGUF_ALIGNMENT = 2**16  # general.alignment: a power of two up to this (default 32)

# ----------------------------------------------------------------------------- counts of a model

MAX_LAYERS = 1024  # transformer blocks (Llama-3.1-405B: 126)
MAX_HEADS = 1024  # attention heads of a block (Llama-3.1-405B: 128)
MAX_WIDTH = 65_536  # embedding_dim, hidden_size (Llama-3.1-405B: 16,384)
MAX_INNER = 262_144  # the feed-forward width, intermediate_size (Llama-3.1-405B: 53,248)
MAX_POSITIONS = 2**24  # the context, max_position_embeddings (Qwen2.5-1M: 1,010,000)
MAX_VOCAB = 2**20  # token ids, vocab_size (Gemma-3: 262,144)
# each count of a GPTConfig (its field names) with its cap: no config beyond them exists,
# whoever builds it (GPTConfig itself, config.json, a GGUF file)
COUNT_CAPS = {"vocab_size": MAX_VOCAB, "n_ctx": MAX_POSITIONS, "n_embd": MAX_WIDTH,
              "n_head": MAX_HEADS, "n_layer": MAX_LAYERS, "n_kv_head": MAX_HEADS,
              "n_inner": MAX_INNER}
MAX_TENSORS = 65_536  # entries of a safetensors header read without a config (405B: 1,138)
HEADER_BYTES_PER_TENSOR = 1024  # JSON bytes one entry may take (real entries: ~110)
HEADER_METADATA_BYTES = 2**20  # plus this for "__metadata__" (transformers: {"format": "pt"})
TENSORS_PER_NAME = 3  # buffers (inv_freq, attn.bias, masked_bias) and lm_head beside a name

# ----------------------------------------------------------------------------- ranges of a model

NORM_EPS_RANGE = (1e-30, 1.0)  # rms_norm_eps, layer_norm_epsilon (real: 1e-12 .. 1e-5)
ROPE_THETA_RANGE = (1.0, 1e12)  # rope_theta, above 1 (Llama-3-8B-Gradient-1048k: 3.6e9)

# ----------------------------------------------------------------------------- tokenizers

MAX_ADDED_TOKENS = 2**18  # added / special tokens (DeepSeek-V3: ~800; Llama-3: 256)
MAX_ADDED_TOKEN_CHARS = 256  # characters of one added token (Llama-3's longest: 30): the
#                              most the one-pass matcher walks from one position of a text
MERGES_PER_TOKEN = 4  # merges per vocabulary token (Llama-3: 280,147 for 128,000: 2.2)
WARM_UP_CPU_SECONDS = 2.0  # CPU time a load's warm-up encode may take (real files: < 0.1 s)
WARM_UP_CHARS = 4096  # characters the warm-up encodes


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupt, beyond a cap, or does not fit the model it describes."""


def max_merges(vocab_size: int) -> int:
    """The most merges a tokenizer of `vocab_size` tokens may list."""
    return MERGES_PER_TOKEN * vocab_size


def max_tensors(expected: int) -> int:
    """The most entries a weights file may hold for a model of `expected` parameter arrays."""
    return min(MAX_TENSORS, TENSORS_PER_NAME * expected + 16)


def max_header_bytes(expected: int) -> int:
    """The most bytes a safetensors header may take for `expected` parameter arrays."""
    return min(MAX_SAFETENSORS_HEADER,
               HEADER_METADATA_BYTES + HEADER_BYTES_PER_TENSOR * max_tensors(expected))


# ----------------------------------------------------------------------------- the checks


def count(value, name: str, cap: int, where: str, *, minimum: int = 1) -> int:
    """An integer of a model file in minimum .. cap, else CheckpointError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise CheckpointError(f"{where}: {name} {_shown(value)} is not an integer")
    if not minimum <= value <= cap:
        raise CheckpointError(f"{where}: {name} {_shown(value)} is outside {minimum:,} .. "
                              f"{cap:,} (tinygpt.caps)")
    return int(value)


def real(value, name: str, bounds: tuple[float, float], where: str) -> float:
    """A finite number of a model file above bounds[0] and at most bounds[1]."""
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CheckpointError(f"{where}: {name} {_shown(value)} is not a number")
    if not math.isfinite(value):
        raise CheckpointError(f"{where}: {name} {_shown(value)} is not a finite number")
    if not low < value <= high:
        raise CheckpointError(f"{where}: {name} {_shown(value)} is outside the range "
                              f"({low:g}, {high:g}] (tinygpt.caps)")
    return float(value)


def flag(value, name: str, where: str) -> bool:
    """A true / false of a model file: JSON's true or false, nothing else ("no", 0, null)."""
    if not isinstance(value, bool):
        raise CheckpointError(f"{where}: {name} {_shown(value)} is not true or false")
    return value


def _shown(value) -> str:
    """A value as a message quotes it: short, whatever its size."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
