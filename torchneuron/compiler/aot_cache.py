"""Warm starts without AOTAutograd's tracing (TORCHNEURON_AOT_CACHE=1, issue 24).

With TORCHNEURON_AOT_CACHE=1 the backend calls AOTAutograd with a
``SerializableAOTDispatchCompiler`` whose graphs are ``NeuronOutputCode`` (an Inductor
``OutputCode``), under ``bundled_autograd_cache``: PyTorch's AOTAutogradCache then keeps
AOTAutograd's result (runtime wrappers, metadata, our OutputCodes) and a new process that
hits it skips the joint-graph trace and the partitioner. A NeuronOutputCode pickles as
what finds its executable in TorchNeuron's cache: the key text of its AOT graph
(graph_key.py; the index maps it, with the compiler options now, to the executable key
and the GraphPlan), its name and node count, and the graph itself (GraphPickler: node
metadata and fake values) for a rebuild. The executable stays in the NEFF cache folder.

Correctness of a hit: AOTAutogradCache's key covers the Dynamo graph, its inputs'
metadata (shape, stride, dtype, requires_grad), grad mode, autocast, AOTAutograd's and
Inductor's config and the torch version; it does not cover our decomposition table,
partitioner or passes. ``cache_tag()`` puts those in through
``torch.compiler.config.cache_key_tag`` (part of the key), patched for our call only: a
SHA-256 of every source file of torchneuron/compiler (decompositions, passes, backend,
this file), the partitioner setting, and the backend options. A loaded graph takes the
executable of the 64-bit narrowing switch now (its key text names it); when the index has
no entry for it (another NEFF cache folder, a cleared one, the other switch), the stored
graph is rebuilt, checked to have the same key text, and compiled as a cold start would
(a graph that does not rebuild identically raises, and AOTAutograd traces again).

PyTorch's cache folder is pointed at ``torch_cache_dir()``:
``$TORCH_NEURONX_NEFF_CACHE_DIR/torch/torchneuron-<sources fingerprint>-<partitioner>``
(under TORCHINDUCTOR_CACHE_DIR instead where the user set it), so the traces live beside
their executables and a changed compiler never finds old ones. It is pointed there from
torchneuron's import on (``torch.compiler.load_cache_artifacts()`` writes the entries it
carries into the folder current then); a folder that cannot be written warns once and
turns the flag off for it.

Dynamo's own output (guards, bytecode) is not kept by this flag: torch 2.13's caching
precompile (``torch._dynamo.config.caching_precompile``) was tried and fails on GPT-2 and
after a guard failure (docs/design/compile-performance.md section 2), so a new process runs
Dynamo's trace again. PyTorch's AOT compile (``torch.compile(fn, fullgraph=True)
.aot_compile(...)``, ``save_compiled_function``) keeps both traces; ``aot_compiling()`` makes
the backend return NeuronOutputCodes for it whatever the flag says.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
from collections.abc import Mapping

import torch

from . import config

_lock = threading.Lock()
_counts = {"stored": 0, "loaded": 0, "rebuilt": 0}


def enabled() -> bool:
    """The flag is on, the NEFF cache too, and PyTorch's cache folder for us can be
    written (else one warning, and AOTAutograd traces as without the flag)."""
    return config.aot_cache() and not config.neff_cache_disabled() and _writable()


def aot_compiling() -> bool:
    """PyTorch's AOT compile (``torch.compile(fn, fullgraph=True).aot_compile(...)``, whose
    result is saved with ``save_compiled_function``) is calling the backend: it patches
    these two settings around it, and it needs our graphs serializable whatever
    TORCHNEURON_AOT_CACHE says (else AOTAutograd fails: "expected OutputCode")."""
    fc = torch._functorch.config
    return bool(fc.force_autograd_cache and fc.bypass_autograd_cache_key)


_checked: dict = {}  # folder -> whether it could be written


def _writable() -> bool:
    """Whether ``torch_cache_dir()`` can be written, tried once per folder; if not, one
    warning naming it (PyTorch only logged "unable to serialize compiled graph" per
    graph). Where the NEFF cache folder cannot be written either, this one warning
    says so too, and the NEFF cache adds none."""
    from . import cache

    folder = torch_cache_dir()
    ok = _checked.get(folder)
    if ok is not None:
        return ok
    why = cache.cannot_write(folder)
    with _lock:
        first = folder not in _checked
        _checked[folder] = ok = not why
    if first and not ok:
        from .._warn import warn

        root = config.neff_cache_dir()
        under = folder.startswith(os.path.abspath(root) + os.sep)
        neff_too = under and cache.warned_unwritable(root)
        var = "TORCH_NEURONX_NEFF_CACHE_DIR" if under else "TORCHINDUCTOR_CACHE_DIR"
        warn(
            f"neuron compile cache: TORCHNEURON_AOT_CACHE=1, but the folder {folder} cannot "
            f"be written ({why}): AOTAutograd's traces are not kept, each process traces "
            "again"
            + (f", and compiled executables are not cached in {root}" if neff_too else "")
            + f". Set {var} to a writable folder. Warned once per folder.",
            RuntimeWarning,
        )
    return ok


def counts() -> dict:
    """Graphs this process stored in / loaded from AOTAutogradCache, and loaded graphs
    rebuilt from their stored FX graph (their executable was not indexed)."""
    return dict(_counts)


@functools.lru_cache(maxsize=2)
def sources_fingerprint(root: str | None = None) -> str:
    """SHA-256 of every .py file of torchneuron/compiler (``root``; its subfolders too): the
    decompositions, the partitioner's setup, the passes, the lowering, this file."""
    here = root or os.path.dirname(__file__)
    h = hashlib.sha256()
    for d, dirs, names in os.walk(here):
        dirs.sort()
        for f in sorted(names):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                h.update(os.path.relpath(path, here).encode())
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def cache_tag(opts: dict) -> str:
    """What AOTAutogradCache's key must also cover for our graphs (see the module doc)."""
    base = torch.compiler.config.cache_key_tag
    return (
        f"{base}|torchneuron:{sources_fingerprint()}:partitioner={config.partitioner()}"
        f":model={opts['model_name']}:fallback={int(opts['fallback_execution'])}"
    )


_dirs: dict = {"user": None, "set": None}  # the user's TORCHINDUCTOR_CACHE_DIR, ours


def torch_cache_dir() -> str:
    """Where PyTorch's caches go for our graphs: ``<base>/torchneuron-<fingerprint>``, base
    the TORCHINDUCTOR_CACHE_DIR the user set, else ``$TORCH_NEURONX_NEFF_CACHE_DIR/torch``.
    The folder is named by ``sources_fingerprint()`` and the partitioner, so entries made
    with other decompositions or passes are not even read."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    cur = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cur and cur not in (os.path.abspath(default_cache_dir()), _dirs["set"]):
        _dirs["user"] = cur  # set by the user (torch sets its default itself)
    base = _dirs["user"] or os.path.join(config.neff_cache_dir(), "torch")
    name = f"torchneuron-{sources_fingerprint()[:20]}-{config.partitioner()}"
    return os.path.abspath(os.path.join(base, name))


def use_torch_cache_dir() -> None:
    """Points TORCHINDUCTOR_CACHE_DIR (PyTorch's cache folder, this process's Inductor's
    too) at ``torch_cache_dir()``."""
    want = torch_cache_dir()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _dirs["set"] = want


def use_torch_cache_dir_at_import() -> None:
    """With the flag on, PyTorch's cache folder is ours from torchneuron's import on:
    ``torch.compiler.load_cache_artifacts()`` writes the AOTAutograd entries it carries
    into the folder current then (before our first compile, torch's default one, which
    our compiles never read). Left as it is where ours cannot be written. Called by
    torchneuron's ``__init__``."""
    try:
        on = config.aot_cache() and not config.neff_cache_disabled()
    except ValueError:  # a bad value: the first compile raises it, naming it
        return
    if not on:
        return
    from . import cache

    if not cache.cannot_write(torch_cache_dir()):
        use_torch_cache_dir()


@contextlib.contextmanager
def aot_context(opts: dict):
    """Around the backend's aot_autograd call: our key tag, bundled entries, and the
    backward graph compiled now rather than at the first backward (AOTAutograd stores a
    training entry when the backward has compiled, and reads whether to bundle it then:
    outside this context); Inductor's device backends not imported for the key."""
    use_torch_cache_dir()
    with (
        torch.compiler.config.patch(cache_key_tag=cache_tag(opts)),
        torch._functorch.config.patch(
            bundled_autograd_cache=True, force_non_lazy_backward_lowering=True
        ),
        _no_inductor_backend_registration(),
    ):
        yield


@contextlib.contextmanager
def _no_inductor_backend_registration():
    """AOTAutogradCache's key (Inductor's FxGraphHashDetails) first registers Inductor's
    code generators of the built-in devices, to list each device's custom Inductor pass:
    an import of Inductor's lowering and schedulers, ~3 s of a warm start's ~7 s (GPT-2 4
    layers, this host). Those registrations carry no custom pass (a user's pass is
    registered by the user, and listed either way), so skipping them drops only empty
    entries from the key: an entry made in a process that used Inductor first has more of
    them, and a process that did not misses it, never a wrong hit. Only the binding in
    torch._inductor.codecache is replaced, while our key is computed (an Inductor key made
    meanwhile in another thread lacks the same empty entries); Inductor's compiles
    register through their own binding."""
    try:
        from torch._inductor import codecache
    except Exception:  # another torch: nothing to skip
        yield
        return
    if not callable(getattr(codecache, "init_backend_registration", None)):
        yield
        return
    with _registration_lock:  # counted: compiles in several threads nest
        if _registration["depth"] == 0:
            _registration["saved"] = codecache.init_backend_registration
            codecache.init_backend_registration = _skip_registration
        _registration["depth"] += 1
    try:
        yield
    finally:
        with _registration_lock:
            _registration["depth"] -= 1
            if _registration["depth"] == 0:
                codecache.init_backend_registration = _registration.pop("saved")


def _skip_registration() -> None:
    pass


_registration_lock = threading.Lock()
_registration: dict = {"depth": 0}


class LazyDecompositions(Mapping):
    """``decompositions.decomposition_table()``, built on first use (~1.3 s on this host):
    AOTAutograd reads it only when it traces, which an AOTAutogradCache hit does not."""

    def __init__(self):
        self._table = None

    def _get(self) -> dict:
        if self._table is None:
            from .decompositions import decomposition_table

            self._table = decomposition_table()
        return self._table

    def __getitem__(self, op):
        return self._get()[op]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def serializable(compiler):
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    return SerializableAOTDispatchCompiler(NeuronOutputCode, compiler)


def _output_code_base():
    from torch._inductor.output_code import OutputCode

    return OutputCode


class NeuronOutputCode(_output_code_base()):
    """A compiled AOT graph as AOTAutogradCache keeps it (see the module doc)."""

    def __init__(self, run, state: dict):
        self._run = run  # args -> outputs; None once pickled, until post_compile
        self.state = state  # name, model_name, key_text, n_nodes, follows, gm/inputs or blob
        # on the instance: AOTAutograd wraps the backward's OutputCode with
        # torch._dynamo.disable, whose functools.wraps copies __dict__, not class attributes
        # (else it called the wrapper unboxed, warning "doesn't take boxed arguments")
        self._boxed_call = True

    def __call__(self, *args):
        # boxed (one list), as AOTAutograd calls it (_boxed_call); unboxed from a wrapper
        # that dropped the attribute: graph inputs are tensors and scalars, never a list
        if len(args) == 1 and isinstance(args[0], list):
            return self._run(args[0])
        return self._run(list(args))

    def __getstate__(self):
        return {"state": self.state}

    def __setstate__(self, d):
        self.state, self._run, self._boxed_call = d["state"], None, True

    def prepare_for_serialization(self) -> None:
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        st = dict(self.state)
        if st.get("key_text") is None:  # a fallback graph, or one with no key
            raise BypassAOTAutogradCache(
                f"neuron: graph {st.get('name')} cannot be saved: it is not one compiled "
                "executable (it runs op by op under fallback_execution, or an argument cannot "
                "be read by value); aot_compile and TORCHNEURON_AOT_CACHE keep only graphs "
                "the Neuron compiler compiled"
            )
        if "blob" not in st:
            from torch._subclasses.fake_tensor import unset_fake_temporarily
            from torch.fx._graph_pickler import GraphPickler

            try:
                with unset_fake_temporarily():  # real constants read as they are
                    st["blob"] = GraphPickler.dumps(
                        (st.pop("gm"), st.pop("inputs")), _pickle_options()
                    )
            except Exception as e:
                raise BypassAOTAutogradCache(f"neuron: graph not picklable: {e}") from e
        self.state, self._run = st, None  # a copy (pre_save): the live object keeps its own
        with _lock:
            _counts["stored"] += 1

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        self._run = _LoadedVariants(self.state)
        with _lock:
            _counts["loaded"] += 1

    def set_triton_bundle(self, triton_bundle) -> None:
        pass


_PICKLED_OP_NAMESPACES = ("aten", "prims", "fbgemm")


def _pickle_options():
    """GraphPickler's options for our AOT graphs: its default allows only aten (and fbgemm)
    ops, and our decompositions leave prims ops (``prims.convert_element_type``: MiniLM's
    graphs, every graph with a dtype cast) that every process with torch resolves too."""
    from torch.fx._graph_pickler import Options

    def ops_filter(name: str) -> bool:  # "torch.ops.<namespace>.<op>.<overload>"
        parts = name.split(".")
        return (
            len(parts) > 3
            and parts[:2] == ["torch", "ops"]
            and (parts[2] in _PICKLED_OP_NAMESPACES)
        )

    return Options(ops_filter=ops_filter)


class _LoadedVariants:
    """A loaded graph's run: the executable for the 64-bit narrowing switch at the first
    call, from the index (loading since the graph was loaded), or compiled from the stored
    graph; the other switch's on first use, as narrowing_variants.py does."""

    def __init__(self, state: dict):
        from .. import _C

        self.state = state
        self._lock = threading.Lock()
        self._follows = state["follows"]
        self._first = bool(_C._narrow_64bit()) if self._follows else state["narrow"]
        # Built at the first call; its executable starts loading now on a background
        # thread, while PyTorch finishes loading (guards): a warm start's load overlaps.
        self._runs = {}
        self._prefetch(self._first)

    def _prefetch(self, narrow: bool) -> None:
        from . import graph_compiler, graph_key

        st = self.state
        try:
            graph_compiler.prefetch_indexed(
                graph_key.with_narrow(st["key_text"], narrow), st["name"]
            )
        except Exception:  # the build at the first call finds (and reports) the problem
            pass

    def _build(self, narrow: bool, reason):
        from . import graph_compiler, graph_key

        st = self.state
        text = graph_key.with_narrow(st["key_text"], narrow)
        try:
            return graph_compiler.compile_indexed(
                text, st["n_nodes"], st["name"], st["model_name"], reason
            )
        except graph_compiler.NotIndexed:
            pass
        return self._rebuild(text, narrow, reason)

    def _rebuild(self, text: str, narrow: bool, reason):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        from . import graph_compiler, graph_key
        from .passes.policy.narrow_64bit import compiling_with

        st = self.state
        gm, inputs = GraphPickler.loads(st["blob"], FakeTensorMode(shape_env=ShapeEnv()))
        with compiling_with(narrow):
            got = graph_key.graph_key_text(gm, inputs)
            # the first line is the passes' fingerprint: another torchneuron compiles the
            # same graph with its own passes (a saved aot_compile loaded after an upgrade)
            if got is None or got.split("\n", 1)[1:] != text.split("\n", 1)[1:]:
                raise RuntimeError(
                    f"neuron: the cached graph {st['name']} does not rebuild identically "
                    "(saved by another torch?); compile it again"
                )
            out = graph_compiler.compile_graph(gm, inputs, st["name"], st["model_name"], reason)
        with _lock:
            _counts["rebuilt"] += 1
        return out

    def __call__(self, args):
        from .. import _C

        key = bool(_C._narrow_64bit()) if self._follows else self._first
        run = self._runs.get(key)
        if run is None:
            with self._lock:
                run = self._runs.get(key)
                if run is None:
                    reason = (
                        None
                        if key == self._first
                        else "64-bit narrowing switched "
                        + ("on" if key else "off")
                        + " since the last compile"
                    )
                    run = self._build(key, reason)
                    self._runs[key] = run
        if any(a is None for a in args):  # effect tokens, as backend.py's run
            args = [torch.empty(0) if a is None else a for a in args]
        return run(args)
