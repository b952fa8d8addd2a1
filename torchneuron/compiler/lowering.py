"""FX graph (ATen, functional, static shapes) -> StableHLO text, through torch-mlir.

torch-mlir's stateless FX import: parameters arrive as graph inputs (the frozen
import would embed them as ``dense_resource`` constants, which XLA cannot read).
Its StableHLO output can keep ``arith.constant`` ops that XLA rejects; they are
legalized to ``stablehlo.constant`` (same assembly format for dense tensors). Tensor
constants of the graph (``x[torch.tensor([-1, 0])]``, HF Swin's relative-position index)
come out as ``dense_resource`` blobs, which XLA rejects ("Only dense elements attr are
supported"); they are inlined as hex ``dense`` literals holding the same bytes.
"""

from __future__ import annotations

import os
import re

import torch

from .decompositions_linalg import refusal
from .errors import NeuronCompileError

_ARITH_CONSTANT = re.compile(r"\barith\.constant\b")
_FAILED_OP = re.compile(r"torch\.(aten|prims|prim|torch_nn)\.([A-Za-z0-9_.]+)")
_RESOURCES = re.compile(r"\{-#\s*dialect_resources:.*?#-\}", re.S)
_BLOB = re.compile(r'([A-Za-z0-9_.$-]+):\s*"0x([0-9A-Fa-f]*)"')
_DENSE_RESOURCE = re.compile(r"dense_resource<([^>]+)>")
# a compare of unsigned or bool operands that torch-mlir marked SIGNED (types follow)
_UNSIGNED_COMPARE = re.compile(
    r"(stablehlo\.compare\s+[A-Z]+,\s*[^,]+,\s*[^,]+,\s*)SIGNED(\s*:\s*\(tensor<(?:[0-9?]+x)*(?:ui\d+|i1)>)"
)


def inline_dense_resources(text: str) -> str:
    """Replaces each ``dense_resource<name>`` by ``dense<"0x...">`` of its blob and drops
    the ``dialect_resources`` section. A blob's hex is MLIR's: a 4-byte alignment word,
    then the tensor's raw little-endian bytes (which the hex ``dense`` form takes)."""
    section = _RESOURCES.search(text)
    if section is None:
        return text
    blobs = {name: hexdata[8:] for name, hexdata in _BLOB.findall(section.group(0))}
    if any(name not in blobs for name in _DENSE_RESOURCE.findall(text)):
        return text  # not a form we read: XLA's own error names it
    return _DENSE_RESOURCE.sub(
        lambda m: f'dense<"0x{blobs[m.group(1)]}">', _RESOURCES.sub("", text)
    )


def unsigned_compares(text: str) -> str:
    """Marks each ``stablehlo.compare`` of unsigned or bool (i1) operands UNSIGNED:
    torch-mlir emits SIGNED for every integer type, which XLA's verifier rejected for
    them (``u > 100`` of a uint8 tensor, ``b > c`` of bool ones and cumprod's gradient
    did not compile)."""
    return _UNSIGNED_COMPARE.sub(r"\1UNSIGNED\2", text)


def legalize_constants(text: str) -> str:
    """Rewrites ``arith.constant`` to ``stablehlo.constant`` and ``dense_resource``
    constants to inline ``dense`` ones (XLA reads only those), and unsigned compares
    as :func:`unsigned_compares`."""
    return unsigned_compares(
        inline_dense_resources(_ARITH_CONSTANT.sub("stablehlo.constant", text))
    )


def node_source(node: torch.fx.Node) -> str | None:
    """The user's source line behind an FX node, "file:line in fn" (last user frame)."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', trace)
    if not frames:
        return None
    f, line, fn = frames[-1]
    return f"{f}:{line} in {fn}"


def find_node(gm: torch.fx.GraphModule, op_name: str) -> torch.fx.Node | None:
    """The first call node whose ATen overload packet is named ``op_name`` (e.g. "special_i1e")."""
    base = op_name.split(".")[0]
    for n in gm.graph.nodes:
        if n.op == "call_function" and hasattr(n.target, "__name__"):
            if n.target.__name__.split(".")[0] == base:
                return n
    return None


def unlowered_ops(gm: torch.fx.GraphModule) -> list[str]:
    """ATen op names (e.g. "kthvalue") that torch-mlir's StableHLO conversion leaves over,
    in module order: the graph imported to the torch dialect again and converted
    partially. Needed when the error names only a leftover ``torch.constant.*`` operand
    (the pipeline reports it before the op that uses it). [] if that also fails."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch_mlir import fx as tm_fx
    from torch_mlir import ir
    from torch_mlir.compiler_utils import run_pipeline_with_repro_report
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras.fx_importer import FxImporter

    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    ctx.attach_diagnostic_handler(lambda d: True)
    try:
        with unset_fake_temporarily():
            module = tm_fx.stateless_fx_import(
                gm, output_type="torch", model_name="main", fx_importer=FxImporter(context=ctx)
            )
        run_pipeline_with_repro_report(
            module, "builtin.module(func.func(convert-torch-to-stablehlo))", "leftover ops"
        )
    except Exception:
        return []
    names = re.findall(
        r'torch\.(?:aten\.|operator"\(.*?name = "torch\.aten\.)([\w.]+)', str(module)
    )
    return list(dict.fromkeys(names))


def lower_to_stablehlo(gm: torch.fx.GraphModule, graph_name: str) -> tuple[str, str]:
    """Lowers ``gm`` to StableHLO.

    Args: gm: an ATen-level functional graph whose placeholders carry ``meta["val"]``
    (fake tensors with static shapes), every output a tensor. graph_name: for errors.
    Returns: (raw torch-mlir module text, StableHLO text ready for XLA).
    Raises: NeuronCompileError(stage="lowering") naming the ATen op that failed and
    the user's source line when torch-mlir names the op.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch_mlir import fx as tm_fx
    from torch_mlir import ir
    from torch_mlir.compiler_utils import (
        OutputType,
        lower_mlir_module,
        run_pipeline_with_repro_report,
    )
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras.fx_importer import FxImporter

    from . import config, lowering_isolation

    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    diagnostics: list[str] = []

    def on_diagnostic(d) -> bool:  # MLIR would print these to fd 2: keep them for the error
        diagnostics.append(f"{d.location}: error: {d.message}")
        return True

    ctx.attach_diagnostic_handler(on_diagnostic)
    pipelines = (
        lambda m: run_pipeline_with_repro_report(
            m,
            "builtin.module(func.func(torch-match-quantized-custom-ops), "
            "torchdynamo-export-to-torch-backend-pipeline{ extra-library=})",
            "Lowering TorchFX IR -> Torch Backend IR",
        ),
        lambda m: lower_mlir_module(False, OutputType.STABLEHLO, m),
    )
    crash = None
    text = None  # the module as the worker parsed it: its "-:N" locations are lines of it
    try:
        # Outside Dynamo's fake mode: the importer reads tensor constants (get_attr) by
        # value, and in fake mode that failed for any not on the CPU or needing a cast
        # (``torch.tensor([...], device=x.device)``, bool constants).
        with unset_fake_temporarily():
            module = tm_fx.stateless_fx_import(
                gm, output_type="raw", model_name="main", fx_importer=FxImporter(context=ctx)
            )
        isolated = not config.lower_in_process() and hasattr(os, "fork")
        if not isolated:
            for p in pipelines:
                p(module)
            raw = str(module)
        else:
            text = str(module)
            raw, failure, crash = lowering_isolation.run_isolated(module, pipelines)
            if failure is not None:
                raise RuntimeError(failure)
    except Exception as e:  # torch-mlir raises plain Exceptions; details are diagnostics
        detail = "\n".join(diagnostics + [str(e).strip()])
        raise _lowering_error(gm, graph_name, detail, text) from e
    if crash is not None:
        node = lowering_isolation.triage(gm, _lower_alone)
        op = str(node.target) if node is not None else None
        source = node_source(node) if node is not None else None
        what = (
            ""
            if node is not None
            else " (no single op crashes alone: the graph's combination does)"
        )
        raise NeuronCompileError("lowering", graph_name, crash + what, op, source)
    return raw, legalize_constants(raw)


def _lower_alone(gm: torch.fx.GraphModule) -> None:
    """Lowers ``gm`` in this process (triage's child): raises on failure."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch_mlir import fx as tm_fx
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras.fx_importer import FxImporter

    ctx = ir.Context()
    ctx.enable_multithreading(False)
    torch_d.register_dialect(ctx)
    ctx.attach_diagnostic_handler(lambda d: True)
    with unset_fake_temporarily():
        tm_fx.stateless_fx_import(
            gm, output_type="stablehlo", model_name="main", fx_importer=FxImporter(context=ctx)
        )


def _op_at_line(detail: str, text: str | None) -> str:
    """The torch-dialect op at the module line an error's ``-:N`` location points at
    (the worker parses the module from ``text``, so its diagnostics carry line numbers of
    it, and ops the conversion makes from an op keep that op's location: a
    ``torch.runtime.assert`` or ``stablehlo.convert`` that fails names the ATen op it came
    from). "" when there is none."""
    loc = re.search(r'loc\((?:callsite\()?"-":(\d+)', detail)
    if text is None or loc is None:
        return ""
    lines = text.splitlines()
    n = int(loc.group(1))
    return lines[n - 1] if 0 < n <= len(lines) else ""


def _node_of_dtype(gm: torch.fx.GraphModule, detail: str) -> torch.fx.Node | None:
    """The first op node making a tensor of the dtype the import failed on (its error is
    the bare dtype, "torch.complex128", "torch.uint64": torch-mlir maps no type to it)."""
    dtype = getattr(torch, detail.strip().removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        return None
    for n in gm.graph.nodes:
        vals = n.meta.get("val")
        vals = vals if isinstance(vals, (list, tuple)) else [vals]
        if n.op == "call_function" and any(getattr(v, "dtype", None) == dtype for v in vals):
            return n
    return None


def _lowering_error(gm, graph_name: str, detail: str, text: str | None = None):
    """The NeuronCompileError of a failed conversion, naming the op and its source line."""
    m = _FAILED_OP.search(detail)
    if m is None:  # e.g. only a leftover constant named: an op with no lowering comes first
        left = [n for n in unlowered_ops(gm) if find_node(gm, n) is not None]
        m = _FAILED_OP.search(f"torch.aten.{left[0]}") if left else None
    if m is None:  # every op has a lowering: the op the failing line came from
        m = _FAILED_OP.search(_op_at_line(detail, text))
    op = source = None
    if m is None:
        node = _node_of_dtype(gm, detail)
        if node is not None:
            return NeuronCompileError(
                "lowering",
                graph_name,
                f"no lowering for {detail.strip()} values",
                str(node.target),
                node_source(node),
            )
    if m:
        op = f"aten.{m.group(2)}" if m.group(1) == "aten" else f"{m.group(1)}.{m.group(2)}"
        # torch-mlir names _linalg_det's own form linalg_det: that node, not none
        node = find_node(gm, m.group(2)) or find_node(gm, "_" + m.group(2))
        if node is not None:
            op = str(node.target)
            source = node_source(node)
            why = refusal(node)  # a small-matrix linalg op left undecomposed: why
            if why is not None:
                return NeuronCompileError("lowering", graph_name, why, op, source)
    lines = detail.splitlines()
    short = next((ln for ln in lines if "error:" in ln), lines[0] if lines else "")
    if source is None:  # torch-mlir locations: innermost call site first
        loc = re.search(r'loc\(callsite\("([^"]+)":(\d+)', short) or re.search(
            r'loc\("([^"]+)":(\d+)', short
        )
        if loc:
            source = f"{loc.group(1)}:{loc.group(2)}"
    short = short[short.index("error:") :] if "error:" in short else short
    return NeuronCompileError("lowering", graph_name, short.strip()[:500], op, source)
