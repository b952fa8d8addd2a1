"""``torch_neuronx.distributed.tensor``: TorchNeuron registers DTensor sharding rules
here. Nothing to register in this emulation: DTensor runs PyTorch's own rules over
torchneuron's c10d backend."""
