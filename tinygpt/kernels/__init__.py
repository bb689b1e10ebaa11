"""Array routines the readable model calls where a plain line of the math would be slower:
grouped-query products, attention by blocks, the rotary angle tables. They know nothing of the
model; tests/tinygpt/kernels hold each equal to the plain math it replaces."""
