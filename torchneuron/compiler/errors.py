"""The compile path's error: which stage failed, on which ATen op, from which source line."""

from __future__ import annotations


class NeuronCompileError(RuntimeError):
    """A graph failed in the compile path.

    Attributes: ``stage`` ("fx_passes", "lowering" or "compiler"), ``op`` (the ATen
    operator, or None when unknown), ``source`` (the user's source line that produced
    the op, "file:line in function", or None), ``graph_name``.
    """

    def __init__(
        self,
        stage: str,
        graph_name: str,
        detail: str,
        op: str | None = None,
        source: str | None = None,
    ):
        self.stage, self.graph_name, self.op, self.source = stage, graph_name, op, source
        parts = [f"neuron backend: {stage} failed for graph {graph_name}"]
        if op:
            parts.append(f"at ATen op {op}")
        if source:
            parts.append(f"from {source}")
        msg = ", ".join(parts) + f": {detail}"
        msg += (
            "\nSet TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 or "
            "torch.compile(..., options={'fallback_execution': True}) to run this graph "
            "eagerly on neuron instead."
        )
        super().__init__(msg)
