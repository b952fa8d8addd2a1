"""FX graph (ATen, functional, static shapes) -> StableHLO text, through torch-mlir.

torch-mlir's stateless FX import: parameters arrive as graph inputs (the frozen
import would embed them as ``dense_resource`` constants, which XLA cannot read).
Its StableHLO output can keep ``arith.constant`` ops that XLA rejects; they are
legalized to ``stablehlo.constant`` (same assembly format for dense tensors).
"""
from __future__ import annotations

import re

import torch

from .errors import NeuronCompileError

_ARITH_CONSTANT = re.compile(r"\barith\.constant\b")
_FAILED_OP = re.compile(r"torch\.(aten|prims|prim)\.([A-Za-z0-9_.]+)")


def legalize_constants(text: str) -> str:
    """Rewrites ``arith.constant`` to ``stablehlo.constant`` (XLA reads only the latter)."""
    return _ARITH_CONSTANT.sub("stablehlo.constant", text)


def node_source(node: torch.fx.Node) -> str | None:
    """The user's source line behind an FX node, "file:line in fn" (last user frame)."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', trace)
    if not frames:
        return None
    f, line, fn = frames[-1]
    return f"{f}:{line} in {fn}"


def find_node(gm: torch.fx.GraphModule, op_name: str) -> torch.fx.Node | None:
    """The first call node whose ATen overload packet is named ``op_name`` (e.g. "erfinv")."""
    base = op_name.split(".")[0]
    for n in gm.graph.nodes:
        if n.op == "call_function" and hasattr(n.target, "__name__"):
            if n.target.__name__.split(".")[0] == base:
                return n
    return None


def lower_to_stablehlo(gm: torch.fx.GraphModule, graph_name: str) -> tuple[str, str]:
    """Lowers ``gm`` to StableHLO.

    Args: gm: an ATen-level functional graph whose placeholders carry ``meta["val"]``
    (fake tensors with static shapes), every output a tensor. graph_name: for errors.
    Returns: (raw torch-mlir module text, StableHLO text ready for XLA).
    Raises: NeuronCompileError(stage="lowering") naming the ATen op that failed and
    the user's source line when torch-mlir names the op.
    """
    from torch_mlir import fx as tm_fx

    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras.fx_importer import FxImporter

    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    diagnostics: list[str] = []

    def on_diagnostic(d) -> bool:  # MLIR would print these to fd 2: keep them for the error
        diagnostics.append(f"{d.location}: error: {d.message}")
        return True

    ctx.attach_diagnostic_handler(on_diagnostic)
    try:
        module = tm_fx.stateless_fx_import(gm, output_type="stablehlo", model_name="main",
                                           fx_importer=FxImporter(context=ctx))
    except Exception as e:  # torch-mlir raises plain Exceptions; details are diagnostics
        detail = "\n".join(diagnostics + [str(e).strip()])
        m = _FAILED_OP.search(detail)
        op = source = None
        if m:
            op = f"aten.{m.group(2)}" if m.group(1) == "aten" else f"{m.group(1)}.{m.group(2)}"
            node = find_node(gm, m.group(2))
            if node is not None:
                op = str(node.target)
                source = node_source(node)
        lines = detail.splitlines()
        short = next((l for l in lines if "error:" in l), lines[0] if lines else "")
        if source is None:  # torch-mlir locations: innermost call site first
            loc = re.search(r'loc\(callsite\("([^"]+)":(\d+)', short) or re.search(
                r'loc\("([^"]+)":(\d+)', short)
            if loc:
                source = f"{loc.group(1)}:{loc.group(2)}"
        short = short[short.index("error:"):] if "error:" in short else short
        raise NeuronCompileError("lowering", graph_name, short.strip()[:500], op, source) from e
    raw = str(module)
    return raw, legalize_constants(raw)
