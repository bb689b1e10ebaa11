"""Serving many students at once: batched passes over many caches, lockstep generation,
shorter runs read off longer ones. Not needed to understand the model."""
