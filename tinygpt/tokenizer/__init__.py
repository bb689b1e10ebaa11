"""Text to token ids and back: byte-level BPE, the pre-tokenizer, the merge replay."""
