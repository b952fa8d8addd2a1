"""The compile path: ``torch.compile(model, backend="neuron")`` (see README.md in this folder)."""

from .metrics import get_dynamo_metrics, reset_dynamo_metrics  # noqa: F401
