"""tinygpt: a GPT written from scratch in NumPy that records every step it takes."""
