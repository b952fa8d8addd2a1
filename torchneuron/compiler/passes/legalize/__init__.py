"""Passes that put a graph in a form torch-mlir and XLA:CPU accept: functional (no input
mutation, tensor outputs only), no device arguments, and rewrites of forms that failed to
lower or crashed the compiler (empty results, open slice bounds, cumprod, uint8
constants, and/or of a truncated integer)."""
