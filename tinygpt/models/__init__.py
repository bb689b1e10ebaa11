"""Real models fetched on request: `python -m tinygpt.models get smollm2` (tinygpt.models.fetch)."""
