"""A run of eager ATen ops (a segment) compiled as one executable: the compile half of
adaptive eager execution (issue 26; docs/design/concatenation-engine.md).

A segment is what the engine buffered on a stream: ops in issue order, each operand a
segment input or an earlier op's result (``Ref``), and the results read after it
(``Segment.outputs``). ``to_graph`` turns it into an FX graph of the same ATen calls,
in-place ops and views included; ``compile_segment`` hands that graph to the backend's
AOTAutograd path, which functionalizes it (input mutations become writes into the input
storages, aliased inputs are handled by AOTAutograd's synthetic bases) and compiles it
with the same passes, lowering, compiler and cache as ``torch.compile``. ``segment_key``
is the signature the engine caches executables under.

Below autograd: the engine sees the tensors the kernels see, so the graph is always an
inference graph (inputs detached, no grad mode), whatever their ``requires_grad``.
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .executable import CompiledGraph


@dataclass(frozen=True)
class Ref:
    """A tensor operand: segment input ``index`` (``op == -1``), or output ``index`` of the
    segment's op number ``op``."""

    op: int
    index: int


@dataclass(frozen=True)
class Step:
    """One eager op: ``op(*args, **kwargs)`` with every tensor replaced by a ``Ref``
    (inside lists too); numbers, dtypes, devices and ``None`` kept as given."""

    op: torch._ops.OpOverload
    args: tuple
    kwargs: dict = field(default_factory=dict)
    #: how many tensors the op returned (a ``Tensor[]`` return's length varies by call)
    n_out: int = 1


@dataclass
class Segment:
    """``steps`` in issue order over ``n_inputs`` input tensors; ``outputs``: the results
    read after the segment (each a ``Ref`` to a step's result), in the order returned."""

    steps: list[Step]
    n_inputs: int
    outputs: list[Ref]


def to_graph(seg: Segment) -> torch.fx.GraphModule:
    """The segment as an FX graph: one placeholder per input, one ``call_function`` per
    step (``getitem`` nodes for ops with several results), the outputs as a tuple.

    Raises ``ValueError`` when a ``Ref`` names an input or a step result that does not
    exist (a step can only read inputs and results of earlier steps)."""
    g = torch.fx.Graph()
    ins = [g.placeholder(f"in{i}") for i in range(seg.n_inputs)]
    results: list[list] = []

    def node_of(r: Ref):
        if r.op == -1:
            if not 0 <= r.index < len(ins):
                raise ValueError(f"segment: input {r.index} of {len(ins)} inputs")
            return ins[r.index]
        if not 0 <= r.op < len(results) or not 0 <= r.index < len(results[r.op]):
            raise ValueError(f"segment: result {r.index} of step {r.op} is not yet made")
        return results[r.op][r.index]

    for step in seg.steps:
        to_node = lambda a: node_of(a) if isinstance(a, Ref) else a  # noqa: E731
        n = g.call_function(step.op, tree_map(to_node, step.args), tree_map(to_node, step.kwargs))
        if _returns_one_tensor(step.op):
            results.append([n])
        else:
            results.append([g.call_function(operator.getitem, (n, k)) for k in range(step.n_out)])
    g.output(tuple(node_of(r) for r in seg.outputs))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def _returns_one_tensor(op) -> bool:
    rets = op._schema.returns
    return len(rets) == 1 and not isinstance(rets[0].type, torch.ListType)


def segment_key(seg: Segment, inputs: list[torch.Tensor]) -> str:
    """The signature a compiled segment is cached under: the ops, their operands' sources
    and constant arguments, the outputs, and per input its sizes, strides, storage offset,
    dtype and which inputs share a storage (aliasing changes what in-place ops mean).
    A hex SHA-256."""
    storages: dict[int, int] = {}
    parts = []
    for t in inputs:
        sid = storages.setdefault(t.untyped_storage().data_ptr(), len(storages))
        parts.append(f"{tuple(t.shape)}/{t.stride()}/{t.storage_offset()}/{t.dtype}/s{sid}")
    for s in seg.steps:
        parts.append(f"{s.op}:{s.args!r}:{sorted(s.kwargs.items())!r}")
    parts.append(f"out:{seg.outputs!r}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


class CompiledSegment:
    """A compiled segment: called with the segment's input tensors (device tensors), it
    launches one executable on the current stream, applies the steps' writes to the
    inputs, and returns the outputs; with ``dsts`` (tensors of the outputs' sizes and
    dtypes, e.g. the result tensors eager already handed to the caller) the outputs are
    written into them, in stream order, and ``dsts`` is returned."""

    def __init__(self, seg: Segment, inputs: list[torch.Tensor], model_name: str = "segment"):
        from .backend import capture_graphs, neuron_backend

        self.segment = seg
        gm = to_graph(seg)
        # a refused op raises (no eager fallback: the engine runs such a segment unfused)
        options = {"fallback_execution": False, "model_name": model_name}
        with torch.no_grad(), capture_graphs() as graphs:
            self._fn = neuron_backend(gm, [t.detach() for t in inputs], options=options)
        self._direct = _direct_graph(graphs, seg)

    def __call__(self, inputs: list[torch.Tensor], dsts: list | None = None) -> list:
        with torch.no_grad():
            inputs = [t.detach() for t in inputs]
            graph = self._direct.current() if self._direct is not None else None
            if (
                isinstance(graph, CompiledGraph)
                and dsts is not None
                and len({t.untyped_storage().data_ptr() for t in inputs}) == len(inputs)
            ):
                # outputs written straight into ``dsts`` (no new tensors, no copies)
                into = [d.detach() for d in dsts]
                out = graph(inputs, into=into)
            else:
                into, out = None, list(self._fn(*inputs))
            if dsts is None:
                return out
            if len(dsts) != len(out):
                raise ValueError(f"segment: {len(dsts)} destinations for {len(out)} outputs")
            for k, (d, o) in enumerate(zip(dsts, out)):
                if into is None or o is not into[k]:
                    d.detach().copy_(o)
        return dsts


def _direct_graph(graphs: list, seg: Segment):
    """The ``NarrowingVariants`` of the one graph compiled for ``seg`` when AOTAutograd's
    runtime wrapper only passes its inputs and outputs through, or None. It does when the
    graph takes the segment's inputs as they are (no effect tokens, no synthetic base of
    aliased inputs) and returns its outputs as they are (every input mutation written in
    the graph, no output a view to regenerate: each of those adds a graph output). Called
    directly, the launch skips the wrapper and writes its outputs into the result tensors
    the engine already handed out."""
    if len(graphs) != 1:
        return None
    gm, variants = graphs[0]
    nodes = list(gm.graph.nodes)
    n_in = sum(n.op == "placeholder" for n in nodes)
    outs = nodes[-1].args[0] if nodes and nodes[-1].op == "output" else None
    if n_in != seg.n_inputs or not isinstance(outs, (list, tuple)):
        return None
    return variants if len(outs) == len(seg.outputs) else None


def compile_segment(seg: Segment, inputs: list[torch.Tensor]) -> CompiledSegment:
    """``seg`` compiled for inputs like ``inputs`` (same sizes, strides, dtypes, aliasing:
    ``segment_key``). Raises ``NeuronCompileError`` naming the op when an op cannot be
    lowered, as ``torch.compile`` does."""
    return CompiledSegment(seg, inputs)


def flat_tensors(value) -> list[torch.Tensor]:
    """The tensors of an op's arguments or results, flattened (a recorder's helper)."""
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]
