"""What Llama and Qwen2 change, taken apart: RMSNorm, rotary positions, grouped-query heads,
SwiGLU, and the families set side by side (parameters, KV cache, guesses, tokenizers)."""
