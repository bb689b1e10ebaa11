"""The network: its config, the math it shares, the layers, the model, the trace and the KV
cache."""
