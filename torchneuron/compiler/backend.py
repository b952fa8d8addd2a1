"""The Dynamo backend ``neuron``: ``torch.compile(model, backend="neuron")``.

Dynamo -> AOTAutograd (our decomposition table, keep_inference_input_mutations=True;
forward, backward and inference graphs each compiled) -> graph_compiler.py.

Options (``torch.compile(..., options={...})``): ``model_name`` (str, names graphs
and metrics; default "model_default", or the name given to
config.set_model_name), ``fallback_execution`` (bool: a graph that fails to
lower or compile runs eagerly on neuron after one warning; default from
TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION, which is 1, i.e. failures raise). Any other
option is a ValueError. ``mode`` other than "default" warns and compiles as default.
``dynamic=True`` raises RuntimeError: the Neuron compiler takes static shapes only.
Shapes stay static: a new input shape recompiles (Dynamo's guards, or, when Dynamo
made a graph dynamic after a shape change, a specialization here), counted in
metrics with the reason.
"""

from __future__ import annotations

import contextlib
import threading

import torch

from . import config, metrics
from .errors import NeuronCompileError

KNOWN_OPTIONS = ("model_name", "fallback_execution")
_lock = threading.Lock()
_captured = threading.local()  # capture_graphs()'s list on this thread


@contextlib.contextmanager
def capture_graphs():
    """Yields a list that gets ``(gm, variants)`` for each graph compiled on this thread
    meanwhile: AOTAutograd's graph and its ``NarrowingVariants`` (the fused segments'
    runner calls the executable itself, ``segment.py``)."""
    prev = getattr(_captured, "graphs", None)
    _captured.graphs = []
    try:
        yield _captured.graphs
    finally:
        _captured.graphs = prev


_warned: set = set()
_frame_shapes: dict = {}  # Dynamo frame id -> input signature of its last compile


def _warn_once(key, msg: str) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    from .._warn import warn

    warn(msg, UserWarning)  # at the user's torch.compile call or first call, not in Dynamo


def _signature(inputs) -> list:
    """Shapes and dtypes of the tensor inputs (symbolic sizes as their symbol)."""
    return [
        (tuple(s if isinstance(s, int) else str(s) for s in x.shape), str(x.dtype))
        for x in inputs
        if isinstance(x, torch.Tensor)
    ]


def _describe_change(old: list, new: list) -> str:
    if len(old) != len(new):
        return f"guards failed: the graph now takes {len(new)} tensor inputs (was {len(old)})"
    diffs = [
        f"tensor input {i}: {a[0]} {a[1]} -> {b[0]} {b[1]}"
        for i, (a, b) in enumerate(zip(old, new))
        if a != b
    ]
    if not diffs:
        return "guards failed (same input shapes)"
    more = f" (+{len(diffs) - 4} more)" if len(diffs) > 4 else ""
    return "input shapes changed: " + "; ".join(diffs[:4]) + more


def _is_symbolic(inputs) -> bool:
    for x in inputs:
        if isinstance(x, (torch.SymInt, torch.SymFloat)):
            return True
        if isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in x.shape):
            return True
    return False


def _parse_options(options) -> dict:
    options = dict(options or {})
    unknown = sorted(set(options) - set(KNOWN_OPTIONS))
    if unknown:
        raise ValueError(
            f"neuron backend: unknown option(s) {unknown}; known options: {list(KNOWN_OPTIONS)}"
        )
    fb = options.get("fallback_execution")
    if fb is None:
        fb = not config.fallback_execution_disabled()
    elif not isinstance(fb, bool):
        raise ValueError(f"neuron backend: option fallback_execution must be a bool, got {fb!r}")
    name = options.get("model_name", config.model_name())
    if not isinstance(name, str) or not name:
        raise ValueError(f"neuron backend: option model_name must be a non-empty str, got {name!r}")
    return {"model_name": name, "fallback_execution": fb}


def _graph_name(model_name: str) -> str:
    from torch._functorch._aot_autograd.logging_utils import get_aot_graph_name

    aot = get_aot_graph_name()  # "model__<aot id>_<kind>_<n>"
    return f"{model_name}_{aot.split('__', 1)[-1]}"


def _make_compiler(opts: dict, reason_box: list, hint=None, serializable: bool = False):
    def compiler(gm: torch.fx.GraphModule, example_inputs):
        name = _graph_name(opts["model_name"])

        def build(switch_reason):
            reason = switch_reason or reason_box[0]
            try:
                from .graph_compiler import compile_graph

                return compile_graph(gm, example_inputs, name, opts["model_name"], reason, hint)
            except NeuronCompileError as e:
                if not opts["fallback_execution"]:
                    raise
                _warn_once(
                    ("fallback", name),
                    f"{e}\nneuron backend: running graph {name} "
                    "eagerly on neuron (fallback_execution)",
                )
                import time

                metrics.record(
                    metrics.GraphMetrics(
                        graph_id="",
                        graph_name=name,
                        model_name=opts["model_name"],
                        graph_node_count=len(gm.graph.nodes),
                        timestamp=time.time(),
                        fx_passes_us=0.0,
                        lower_us=0.0,
                        compile_us=0.0,
                        cache="none",
                        recompile_reason=reason,
                        fallback=str(e).splitlines()[0],
                    )
                )
                return lambda args: gm(*args)

        from .narrowing_variants import NarrowingVariants

        variants = NarrowingVariants(gm, build)  # follows the 64-bit switch per call
        graphs = getattr(_captured, "graphs", None)
        if graphs is not None:
            graphs.append((gm, variants))

        def run(args):
            if any(a is None for a in args):
                # AOTAutograd's effect tokens (torch.linalg's _linalg_check_errors is
                # an ordered effect) come as None at run time; the graph takes each as
                # the empty CPU tensor it was traced with (its op is a no-op here,
                # decompositions_linalg.py, so the token only passes through)
                args = [torch.empty(0) if a is None else a for a in args]
            return variants(args)

        run._boxed_call = True
        if not serializable:
            return run
        from .aot_cache import NeuronOutputCode

        first = next(iter(variants._runs.values()))
        key_text = getattr(first, "key_text", None)  # None: a fallback graph, not stored
        return NeuronOutputCode(
            run,
            {
                "name": name,
                "model_name": opts["model_name"],
                "key_text": key_text,
                "n_nodes": getattr(first, "n_nodes", 0),
                "follows": variants._follows,
                "narrow": next(iter(variants._runs)),
                "gm": gm,
                "inputs": list(example_inputs),
            },
        )

    return compiler


def _aot(opts: dict, reason: str | None, hint=None):
    from torch._dynamo.backends.common import aot_autograd

    from . import aot_cache

    box = [reason]
    cached = aot_cache.enabled() or aot_cache.aot_compiling()
    if cached:  # a hit does not trace: the table is built if AOTAutograd traces
        decompositions = aot_cache.LazyDecompositions()
    else:
        from .decompositions import decomposition_table

        decompositions = decomposition_table()
    comp = _make_compiler(opts, box, hint, serializable=cached)
    wrap = aot_cache.serializable if cached else lambda c: c  # one wrapper each (Dynamo's
    inner = aot_autograd(  # aot_autograd wraps the backward one's function in place)
        fw_compiler=wrap(comp),
        bw_compiler=wrap(comp),
        inference_compiler=wrap(comp),
        decompositions=decompositions,
        keep_inference_input_mutations=True,
        partition_fn=_partition_fn(),
    )
    if not cached:
        return inner

    def aot(gm, example_inputs, **kw):
        with aot_cache.aot_context(opts):
            return inner(gm, example_inputs, **kw)

    return aot


def _partition_fn():
    """AOTAutograd's joint-graph partitioner: the min-cut one (Inductor's) unless
    TORCHNEURON_PARTITIONER=default. It saves fewer activations and recomputes cheap
    elementwise ones in the backward graph, where XLA fuses them (the default saves every
    intermediate the backward reads: each one an output of the forward executable,
    copied out of XLA's result buffer, and an input of the backward one)."""
    from torch._functorch import partitioners

    if config.partitioner() == "default":
        return partitioners.default_partition

    def min_cut(joint, joint_inputs, **kw):
        # views recomputed in the backward graph: a saved view (a weight's transpose) is
        # an output of our forward executable, i.e. a copy, where Inductor's is free
        with torch._functorch.config.patch(recompute_views=True):
            return partitioners.min_cut_rematerialization_partition(joint, joint_inputs, **kw)

    return min_cut


def _is_item(node: torch.fx.Node) -> bool:
    return (node.op == "call_method" and node.target == "item") or (
        node.op == "call_function"
        and node.target
        in (
            torch.Tensor.item,
            torch.ops.aten._local_scalar_dense.default,
            torch.ops.aten.item.default,
        )
    )


def _item_only_inputs(gm: torch.fx.GraphModule) -> set[int]:
    """Indices of inputs read only with ``.item()``: how Dynamo passes a Python float that
    changed between calls (a 0-dim tensor)."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {i for i, n in enumerate(phs) if n.users and all(_is_item(u) for u in n.users)}


def _static_key(args, item_only: set[int]) -> tuple:
    """What a static specialization depends on: each tensor's shape and dtype, and the
    value of each Python scalar and of each input read only with ``.item()`` (Dynamo
    passes an int or float that changed between calls as a symbolic input; the static
    graph bakes its value in)."""
    return tuple(
        ("item", a.item())
        if i in item_only and isinstance(a, torch.Tensor) and a.numel() == 1
        else (tuple(a.shape), str(a.dtype))
        if isinstance(a, torch.Tensor)
        else (type(a).__name__, repr(a))
        for i, a in enumerate(args)
    )


def _bake_scalars(
    gm: torch.fx.GraphModule, args, item_only: set[int]
) -> tuple[torch.fx.GraphModule, list[int]]:
    """A copy of ``gm`` with each Python-scalar input, and each ``.item()`` of an input read
    only that way, replaced by its value in ``args``; and the indices of the inputs it
    still takes."""
    from .graph_compiler import copy_graph

    def put(node, value):
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda n: value if n is node else n)
            user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda n: value if n is node else n)

    g = copy_graph(gm)
    keep = []
    for i, (node, a) in enumerate(zip([n for n in g.graph.nodes if n.op == "placeholder"], args)):
        if isinstance(a, torch.Tensor) and not (i in item_only and a.numel() == 1):
            keep.append(i)
            continue
        if isinstance(a, torch.Tensor):
            for item in list(node.users):
                put(item, a.item())
                g.graph.erase_node(item)
        else:
            put(node, a)
        g.graph.erase_node(node)
    g.recompile()
    return g, keep


def _static_fakes(args):
    """Fake tensors of ``args`` with static shapes, and their fake mode, which has a
    ShapeEnv: a float Dynamo passes as a 0-dim tensor is read with ``.item()`` in the
    graph, which AOTAutograd can trace only with one (as under Dynamo's own fake mode)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    return mode, [mode.from_tensor(a, static_shapes=True) for a in args]


def _aot_static(opts: dict, reason, gm, args):
    """``_aot`` on a static specialization, under a TracingContext of its fake mode, as
    Dynamo calls a backend: AOTAutogradCache takes the ShapeEnv for its guards from the
    context (without one it bypassed every graph compiled here: "No shape env")."""
    from torch._guards import TracingContext, tracing

    mode, fakes = _static_fakes(args)
    with _math_attention(), tracing(TracingContext(mode)):
        return _aot(opts, reason)(gm, fakes)


class _ShapeSpecializer:
    """Runs a graph Dynamo made dynamic (after a shape or Python-scalar change) as static
    graphs, one per input shapes and scalar values, compiled on first use: the Neuron
    compiler never sees symbols."""

    def __init__(self, gm, opts: dict, prev_sig):
        self.gm, self.opts = gm, opts
        self.compiled: dict = {}
        self.last_sig = prev_sig  # the static signature compiled before (None: none)
        self.lock = threading.Lock()
        self.item_only = _item_only_inputs(gm)
        self.last_key = None

    def __call__(self, *args):
        key = _static_key(args, self.item_only)
        fn = self.compiled.get(key)
        if fn is None:
            with self.lock:
                fn = self.compiled.get(key)
                if fn is None:
                    reason = (
                        None
                        if self.last_sig is None
                        else _describe_change(list(self.last_sig), _signature(args))
                    )
                    if (
                        self.last_key is not None
                        and len(self.last_key) == len(key)
                        and reason == "guards failed (same input shapes)"
                    ):
                        changed = [
                            f"input {i}: {a[1]} -> {b[1]}"
                            for i, (a, b) in enumerate(zip(self.last_key, key))
                            if a != b and a[0] == b[0] and not isinstance(a[0], tuple)
                        ]
                        reason = (
                            "Python scalar inputs changed: " + "; ".join(changed[:4])
                            if changed
                            else reason
                        )
                    gm, keep = _bake_scalars(self.gm, args, self.item_only)
                    aot = _aot_static(self.opts, reason, gm, [args[i] for i in keep])
                    fn = lambda *a, aot=aot, keep=keep: aot(*[a[i] for i in keep])
                    self.compiled[key] = fn
                    self.last_sig, self.last_key = _signature(args), key
        return fn(*args)


def neuron_backend(gm: torch.fx.GraphModule, example_inputs, *, options=None, mode=None):
    """The Dynamo backend (registered as "neuron"). See the module docstring."""
    opts = _parse_options(options)
    if mode not in (None, "default"):
        _warn_once(
            ("mode", mode),
            f"neuron backend does not support mode={mode!r}; compiling with mode='default'",
        )
    if not torch._dynamo.config.assume_static_by_default:
        raise RuntimeError(
            "neuron backend: dynamic=True is not supported; the Neuron compiler needs static "
            "shapes. Call torch.compile(model, backend='neuron') without dynamic=True "
            "(or dynamic=False): each new input shape then compiles its own graph."
        )
    from torch._guards import CompileContext

    cid = CompileContext.current_compile_id()
    sig = _signature(example_inputs)
    reason = prev = None
    if cid is not None:
        prev = _frame_shapes.get(cid.frame_id)
        if prev is not None and (cid.frame_compile_id or 0) > 0:
            reason = _describe_change(prev, sig)
        else:
            prev = None
        _frame_shapes[cid.frame_id] = sig
    if _is_symbolic(example_inputs):
        from . import aot_cache

        if aot_cache.aot_compiling():  # its per-shape graphs are made at run time
            raise RuntimeError(
                "neuron backend: a graph with dynamic dimensions (torch._dynamo.mark_dynamic, "
                "or automatic dynamic shapes) cannot be saved by aot_compile: the Neuron "
                "compiler needs static shapes. Remove mark_dynamic and AOT-compile one "
                "function per input shape."
            )
        return _ShapeSpecializer(gm, opts, prev)
    from . import prefetch

    # a warm start's executables load while AOTAutograd traces (prefetch.py)
    hint = prefetch.start(gm, example_inputs, opts["model_name"])
    with _math_attention():
        return _aot(opts, reason, hint)(gm, example_inputs)


def _math_attention():
    """SDPA traced as its math composition: the fused CPU flash kernel the device picks
    eagerly has a backward op with no decomposition and no StableHLO lowering."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.MATH])


def register() -> None:
    """Registers the backend with Dynamo under "neuron" (the entry point does it too)."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if "neuron" not in _COMPILER_FNS:
        register_backend(neuron_backend, name="neuron")
