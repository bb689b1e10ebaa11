"""Shortcuts beside the readable model: the same numbers for less work, each tested equal to
the readable forward it stands for (tests/tinygpt/fast).

    parts         several sequences, each with its own KV cache, in one pass (a server's step)
    attention     the attention weights alone, and one position's heads and weights on a trace
    feed_forward  one position's neurons, one neuron along the prompt, off the stored residual
"""
