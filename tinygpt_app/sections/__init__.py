"""Page sections shared between pages (the lesson, the KV-cache view, neurons, explain views)."""
