"""Charts of what Llama and Qwen2 change: rotary positions, grouped-query heads, and the
families set side by side."""
