"""Passes that apply TorchNeuron's device policy to a graph: static shapes (scalar inputs
baked in), 64-bit values computed in 32 bits as eager does, random ops drawn from the
neuron generator."""
