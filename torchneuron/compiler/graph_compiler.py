"""One AOTAutograd graph through the pipeline: FX passes -> lowering -> cache/compiler -> CompiledGraph.

Every compiled graph is recorded in metrics.py; with TORCH_NEURONX_DEBUG_DIR and
TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1 its artifacts are kept (artifacts.py).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from . import artifacts, cache, config, graph_key, metrics, neuron_cc
from .lowering import lower_to_stablehlo
from .passes import run_passes
from .plan import GraphPlan, cpu_outputs, output_alias_groups

if TYPE_CHECKING:
    from .executable import CompiledGraph

# The core's target name as neuronx-cc spells it (the emulated core is a Trn2 one).
DEFAULT_TARGET = "trn2"


def _spec(v) -> list:
    return [list(v.shape), str(v.dtype)]


def _lnc() -> int:
    try:
        return int(torch.neuron.runtime_info()["logical_nc_config"])
    except Exception:
        return 2


def _check_hbm(name: str, exe, in_specs: list, out_specs: list) -> int:
    """Static device memory of the graph vs the core's HBM (neuronx-cc fails at compile time).
    Returns the executable's temporaries in bytes (0 when XLA does not say)."""

    def nbytes(shape, dtype):
        n = 1
        for s in shape:
            n *= int(s)
        return n * dtype.itemsize

    io = sum(nbytes(s, d) for s, d in in_specs) + sum(nbytes(s, d) for s, d in out_specs)
    temp = 0
    try:
        temp = int(exe._loaded.get_compiled_memory_stats().temp_size_in_bytes)
    except Exception:
        pass
    cap = torch.neuron.get_device_properties(torch.neuron.current_device()).total_memory
    if io + temp > cap:
        raise torch.OutOfMemoryError(
            f"neuron compiler: graph {name} needs {io + temp} bytes of device memory "
            f"(inputs and outputs {io}, temporaries {temp}), more than the NeuronCore's "
            f"HBM capacity of {cap} bytes"
        )
    return temp


def compiler_options(graph_name: str) -> neuron_cc.CompilerOptions:
    """The compiler settings now (NEURON_CC_FLAGS over the defaults); NeuronCompileError
    for bad flags."""
    return neuron_cc.parse_flags(
        config.cc_flags(), DEFAULT_TARGET, _lnc(), config.opt_level(), graph_name
    )


def copy_graph(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of ``gm`` the passes may edit (AOTAutograd keeps the original)."""
    g = torch.fx.Graph()
    out = g.graph_copy(gm.graph, {})
    g.output(out)
    return torch.fx.GraphModule(gm, g)


def compile_graph(
    gm: torch.fx.GraphModule,
    example_inputs,
    graph_name: str,
    model_name: str,
    recompile_reason: str | None,
    hint=None,
) -> CompiledGraph:
    """Compiles AOTAutograd's graph ``gm`` (left unchanged) into a CompiledGraph.

    A warm start (the graph's key in the cache index, graph_key.py) takes the run plan
    from the index and the executable from the cache, and runs neither the passes nor
    the lowering; they run only when something must be built. ``hint``: the
    prefetch.Hint of the Dynamo graph this graph came from (its executables may be
    loading already), or None.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # AOTAutograd calls the backend inside its FakeTensorMode: there, reading a real
    # tensor constant (a lifted `torch.tensor(c)`: the graph key, torch-mlir's literal)
    # turns it into a fake without storage. The passes enter the graph's fake mode
    # themselves where they need it.
    with unset_fake_temporarily():
        return _compile_graph(gm, example_inputs, graph_name, model_name, recompile_reason, hint)


class NotIndexed(Exception):
    """compile_indexed: the graph key has no index entry (or its executable is gone)."""


def compile_indexed(key_text: str, n_nodes: int, graph_name: str, model_name: str, reason):
    """The CompiledGraph of a graph known only by its key text (graph_key.py), from the
    cache's index and executable entries (aot_cache.py's loaded graphs: no FX graph to
    lower). NotIndexed when the index or the executable entry is missing or unreadable."""
    return _compile_graph(None, None, graph_name, model_name, reason, None, key_text, n_nodes)


def prefetch_indexed(key_text: str, graph_name: str) -> None:
    """Starts loading the executable of a graph known by its key text (compile_indexed's)
    on the cache's background thread, when the index has it; compile_indexed then takes
    it, waiting only for what is left. Does nothing otherwise (compile_indexed decides)."""
    neuron_cc.start()
    opts = compiler_options(graph_name)
    version = neuron_cc.compiler_version()
    fx_key = cache.cache_key(
        key_text, [], opts.target, opts.lnc, opts.opt_level, opts.flags, version + "/graph"
    )
    rec = cache.index_lookup(fx_key)
    if rec is not None:
        cache.prefetch(rec["key"], lambda b: neuron_cc.NeuronExecutable.deserialize(b, opts))


def _compile_graph(
    gm, example_inputs, graph_name, model_name, recompile_reason, hint, key_text=None, n_nodes=0
):
    from .executable import CompiledGraph

    neuron_cc.start()  # the XLA client starts once per process; not part of compile_us
    # the hint's setup (before AOTAutograd) is backend time the user waited for
    t0 = time.perf_counter() - (hint.take_setup_us() * 1e-6 if hint is not None else 0.0)
    opts = compiler_options(graph_name)
    version = neuron_cc.compiler_version()
    if gm is not None:
        n_nodes = len(gm.graph.nodes)
        key_text = graph_key.graph_key_text(gm, example_inputs)
    fx_key = (
        None
        if key_text is None
        else cache.cache_key(
            key_text, [], opts.target, opts.lnc, opts.opt_level, opts.flags, version + "/graph"
        )
    )
    rec = cache.index_lookup(fx_key) if fx_key is not None else None
    if gm is None and rec is None:
        raise NotIndexed(graph_name)
    st = {"gm": None, "raw": None, "shlo": None}

    def prepare():  # the passes: the plan and the graph to lower
        if gm is None:  # compile_indexed: the executable entry went missing or is corrupt
            raise NotIndexed(graph_name)
        if st["gm"] is None:
            plan = GraphPlan.identity(gm)
            g = run_passes(copy_graph(gm), plan, list(example_inputs))
            plan.out_aliases = output_alias_groups(gm, plan)
            plan.cpu_outputs = cpu_outputs(gm, plan)
            phs = [n for n in g.graph.nodes if n.op == "placeholder"]
            out = next(n for n in g.graph.nodes if n.op == "output")
            out_vals = [o.meta["val"] for o in out.args[0]]
            st.update(
                gm=g,
                plan=plan,
                in_specs=[(tuple(p.meta["val"].shape), p.meta["val"].dtype) for p in phs],
                out_specs=[(tuple(v.shape), v.dtype) for v in out_vals],
                io_spec=[[_spec(p.meta["val"]) for p in phs], [_spec(v) for v in out_vals]],
            )
        return st["gm"]

    def lower():
        if st["shlo"] is None:
            st["raw"], st["shlo"] = lower_to_stablehlo(prepare(), graph_name)
        return st["shlo"]

    if rec is None:
        prepare()
        t1 = time.perf_counter()
        key = cache.cache_key(
            lower(), st["io_spec"], opts.target, opts.lnc, opts.opt_level, opts.flags, version
        )
        rec = {
            "key": key,
            "plan": st["plan"],
            "in_specs": st["in_specs"],
            "out_specs": st["out_specs"],
        }
        indexed = False
    else:
        t1 = time.perf_counter()
        key, indexed = rec["key"], True
    t2 = time.perf_counter()
    exe, source, payload, background_s = cache.get_or_compile_timed(
        key,
        lambda: neuron_cc.compile(
            lower(), opts.target, opts.lnc, opts.opt_level, opts.flags, graph_name
        ),
        lambda e: e.serialize(),
        lambda b: neuron_cc.NeuronExecutable.deserialize(b, opts),
    )
    if fx_key is not None and not indexed:
        cache.index_store(fx_key, rec)
    if hint is not None:
        hint.note(key)
    if source != "memory":  # for torch.compiler.save_cache_artifacts()
        from . import cache_artifacts

        cache_artifacts.record(key, payload, fx_key, rec)
    t3 = time.perf_counter()
    plan, in_specs, out_specs = rec["plan"], rec["in_specs"], rec["out_specs"]
    temp_bytes = _check_hbm(graph_name, exe, in_specs, out_specs)
    if artifacts.enabled() and gm is not None:
        lower()
        artifacts.save(
            graph_name,
            {
                "fx_graph.txt": st["gm"].print_readable(print_output=False),
                "torch_mlir_raw.mlir": st["raw"],
                "stablehlo.mlir": st["shlo"],
                "graph.neff": exe.serialize(),
                "compiler.txt": artifacts.compiler_txt(
                    {
                        "engine": version,
                        "target": opts.target,
                        "lnc": opts.lnc,
                        "opt_level": opts.opt_level,
                        "flags": opts.flags,
                        "NEURON_CC_FLAGS": config.cc_flags(),
                        "cache_key": key,
                        "cache": source,
                    }
                ),
            },
        )
    metrics.record(
        metrics.GraphMetrics(
            graph_id=key,
            graph_name=graph_name,
            model_name=model_name,
            graph_node_count=n_nodes,
            timestamp=time.time(),
            fx_passes_us=(t1 - t0) * 1e6,
            lower_us=(t2 - t1) * 1e6,
            compile_us=(t3 - t2) * 1e6,
            cache=source,
            recompile_reason=recompile_reason,
            background_load_us=background_s * 1e6,
            temp_bytes=temp_bytes,
        )
    )
    # AOTAutograd's graph names end in {forward|backward|inference}_{n}
    inference = graph_name.rsplit("_", 2)[-2:-1] == ["inference"]
    compiled = CompiledGraph(graph_name, exe, plan, out_specs, alias_outputs=inference)
    compiled.key_text, compiled.n_nodes = key_text, n_nodes  # aot_cache.py stores them
    return compiled
