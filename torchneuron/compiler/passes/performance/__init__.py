"""Passes that change only how fast XLA:CPU runs a graph (same values): convolution
padding and max pooling spelled so XLA picks its fast forms."""
