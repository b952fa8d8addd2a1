"""Passes that change only how fast XLA:CPU runs a graph (same values): convolution
padding and max pooling spelled so XLA picks its fast forms; outputs that are inputs
returned as they are; small computations on CPU inputs run on the host (ATen's CPU
kernels: eager's values) so the call does not wait for the device."""
