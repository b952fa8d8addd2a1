"""``torch_neuronx.streams``: ``Stream`` and ``Event`` (torch.neuron's, torchneuron/streams.py)."""

from __future__ import annotations

from torchneuron.streams import Event, Stream

__all__ = ["Event", "Stream"]
