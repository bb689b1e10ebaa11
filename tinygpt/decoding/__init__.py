"""From next-token scores to text: temperature, top-k, top-p, greedy, sampling, beam search."""
