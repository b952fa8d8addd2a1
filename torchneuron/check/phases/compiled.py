"""Phase 1, compiled mode: ``torch.compile(model, backend="neuron")`` measured.

Reports: success, or the failing stage (Dynamo tracing, FX passes, lowering, compiler)
with the ATen op and the user's source line; the number of graphs and Dynamo's graph
breaks with their reasons (torch._dynamo.explain); recompiles (a second call with the
same inputs must not recompile); the cold compile time (an empty temporary NEFF cache:
the first call's time, and the backend's own lowering + compile time) and the warm one
(executables read back from that cache after a Dynamo reset); the largest difference
from the eager outputs. The user's NEFF cache is left untouched. When no graph compiled
by the backend ran in the first two calls (Dynamo compiled nothing, or every graph fell
back to eager), the compile fails (``NotCompiled``): the compiled model's figures would be
eager ones.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import torch

from .. import formatting
from ..model import tensors as T
from ..result_compile import CompileCheckResult
from . import memory


def _backend_seconds() -> float:
    return sum(r["lower_us"] + r["compile_us"] for r in torch.neuron.get_dynamo_metrics()) / 1e6


def _compile_failure(e: BaseException) -> dict | None:
    from torchneuron.compiler.errors import NeuronCompileError

    c = e
    while c is not None:
        if isinstance(c, NeuronCompileError):
            return {"stage": c.stage, "op": c.op, "source": c.source, "graph": c.graph_name}
        c = c.__cause__ or c.__context__
    return None


def _explain(res: CompileCheckResult, session, cfg, dev_type) -> None:
    """Sets ``res``'s graph count, graph breaks and their reasons (or the note why not)."""
    import torch._dynamo as dynamo

    torch._dynamo.reset()
    try:
        ex = dynamo.explain(
            lambda: T.call(session.model, session.inputs, dev_type, cfg.torch_dtype)
        )()
    except Exception as e:
        res.note = f"torch._dynamo.explain failed: {type(e).__name__}: {e}"
        return
    reasons = []
    for b in ex.break_reasons:
        frame = b.user_stack[-1] if getattr(b, "user_stack", None) else None
        where = f"{frame.filename}:{frame.lineno}" if frame is not None else None
        reasons.append({"reason": str(b.reason).splitlines()[0][:300], "where": where})
    res.graph_count, res.graph_breaks = ex.graph_count, ex.graph_break_count
    res.break_reasons = reasons


def _graph_runs() -> int:
    """Compiled-graph launches since the last ``reset_dynamo_metrics`` (the backend's counter)."""
    from torch._dynamo.utils import counters

    return counters["neuron"]["graph_runs"]


def _not_compiled_error(res: CompileCheckResult, fallback_reasons: list) -> dict:
    """Phase 1's error record when no graph compiled by the backend ran: the model ran eagerly
    under torch.compile (Dynamo traced nothing, or every graph fell back to eager)."""
    why = (
        f"every graph fell back to eager (fallback_execution): {fallback_reasons[0]}"
        if fallback_reasons
        else "Dynamo compiled no graph of the model's forward (torch.compiler.disable, or the whole "
        "forward skipped by Dynamo): it ran eagerly"
    )
    msg = f"{formatting.graphs_ran(res)}: {why}"
    return {
        "stage": "torch.compile(backend='neuron'): cold compile and first call",
        "compile_stage": "the first call: " + formatting.graphs_ran(res),
        "type": "NotCompiled",
        "message": msg,
        "short_message": msg[:300],
        "op": None,
        "op_source": None,
        "raised_at": None,
        "traceback": "",
        "hint": (
            "a model run under --mode compile or both must run at least one graph compiled by the "
            "backend; its figures would be eager ones"
            + (
                "; TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1 shows the lowering error"
                if fallback_reasons
                else ""
            )
        ),
    }


def check_compile(
    session, cfg, eager: dict, error_info, resident_bytes: int = 0
) -> CompileCheckResult:
    """Compiles ``session.model`` with backend "neuron"; ``error_info(e, stage)`` builds
    the error record. Returns phase 1's compile entry, with ``memory``: the compiled model's
    own peak (``memory.compiled_peak``; ``resident_bytes``: the model's and inputs' device
    bytes)."""
    from torchneuron.compiler import cache

    dev_type = torch.device(session.device).type
    res = CompileCheckResult(checked=True, modes=["eager", "compile"], ok=False)
    _explain(res, session, cfg, dev_type)
    old = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    tmp = tempfile.mkdtemp(prefix="torchneuron_check_neff_")
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = tmp
    stage = "cold compile and first call"
    try:
        torch._dynamo.reset()
        cache.clear_memory_cache()
        torch.neuron.reset_dynamo_metrics()
        compiled = torch.compile(session.model, backend="neuron")
        session.sync()
        t0 = time.perf_counter()
        out = T.flatten(T.call(compiled, session.inputs, dev_type, cfg.torch_dtype), numbers=True)
        session.sync()
        res.compile_s = time.perf_counter() - t0  # the cold first call
        res.cold_backend_compile_s = _backend_seconds()
        recs = torch.neuron.get_dynamo_metrics()
        res.compiled_graphs = len(recs)
        res.fallback_graphs = [r["graph_name"] for r in recs if r["fallback"]]
        res.graphs_ran_compiled = len(recs) - len(res.fallback_graphs)
        stage = "second call (recompile check)"
        n = len(recs)
        T.call(compiled, session.inputs, dev_type, cfg.torch_dtype)
        session.sync()
        res.recompiles = len(torch.neuron.get_dynamo_metrics()) - n
        res.graph_runs = _graph_runs()
        if not res.graph_runs or not res.graphs_ran_compiled:
            # the compiled model ran eagerly: its figures would be eager ones under the compiled label
            res.error = _not_compiled_error(res, [r["fallback"] for r in recs if r["fallback"]])
            return res
        out = T.to_cpu(out)
        session.compiled_outputs = out
        res.max_abs_diff_vs_eager = {
            k: T.max_abs_diff(out[k], v) for k, v in eager.items() if k in out
        }
        stage = "warm compile (NEFF cache hit)"
        torch._dynamo.reset()
        cache.clear_memory_cache()
        torch.neuron.reset_dynamo_metrics()
        compiled = torch.compile(session.model, backend="neuron")
        t0 = time.perf_counter()
        T.call(compiled, session.inputs, dev_type, cfg.torch_dtype)
        session.sync()
        res.warm_compile_s = time.perf_counter() - t0
        res.warm_backend_compile_s = _backend_seconds()
        res.warm_cache_hits = sum(r["cache"] == "disk" for r in torch.neuron.get_dynamo_metrics())
        stage = "peak memory of a warm call"
        res.memory = memory.compiled_peak(session, compiled, cfg.torch_dtype, resident_bytes)
        res.ok = True
    except Exception as e:
        res.error = err = error_info(e, f"torch.compile(backend='neuron'): {stage}")
        failure = _compile_failure(e)
        if failure:
            err["compile_stage"] = failure["stage"]
            if failure["op"]:
                err["op"], err["op_source"] = failure["op"], "neuron compiler"
            if failure["source"]:
                err["raised_at"] = failure["source"]
    finally:
        if old is None:
            os.environ.pop("TORCH_NEURONX_NEFF_CACHE_DIR", None)
        else:
            os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = old
        torch._dynamo.reset()  # the in-memory executables stay (--mode compile reuses them)
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def use_compiled(session, cfg) -> None:
    """--mode compile: phases 2 and 3 measure the compiled model. Replaces the session's
    model with its compiled form (executables from the in-memory cache) and its first
    outputs (what phase 2 compares) with the compiled model's."""
    dev_type = torch.device(session.device).type
    compiled = torch.compile(session.model, backend="neuron")
    out = T.flatten(T.call(compiled, session.inputs, dev_type, cfg.torch_dtype), numbers=True)
    session.sync()
    session.model = compiled
    session.outputs = T.to_cpu(out)
