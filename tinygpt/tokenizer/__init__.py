"""Text to token ids and back: byte-level BPE, the pre-tokenizer, the merge replay, and
tokenizer.json files of Llama-3, SmolLM2, Qwen2 and GPT-2 style (hf_json, pipeline)."""
