"""The emulated Neuron compiler: StableHLO -> executable, XLA:CPU (jaxlib) standing in for neuronx-cc.

THE compiler interface of the compile path is ``compile(stablehlo, target, lnc,
opt_level, flags) -> NeuronExecutable``; nothing else in torchneuron/compiler
knows which engine is behind it, so a real neuronx-cc (or IREE) can replace it here.

Flags (NEURON_CC_FLAGS, neuronx-cc's spelling; anything else is a compiler error):
- ``--target=trn1|trn2|inf2``: the target recorded in the executable and cache key.
- ``--lnc=1|2`` (also ``--logical-nc-config``): logical NeuronCore config, likewise.
- ``-O1``/``-O2``/``-O3`` (also ``--optlevel N``): overrides NEURON_COMPILER_OPT_LEVEL.
  Meaning here: XLA:CPU's backend optimization level (the LLVM -O level of its code
  generation); numerics are the same at every level.
- ``--model-type=generic|transformer|unet-inference``: accepted, recorded, no effect
  (a scheduling hint on Trainium; XLA:CPU has no equivalent).
- ``--auto-cast=none``: accepted (what the emulation does); other auto-cast modes
  change numerics on Trainium and are not emulated: a compiler error says so.
- ``--verbose[=LEVEL]``: accepted, no effect.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shlex
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import _C
from .errors import NeuronCompileError

TARGETS = ("trn1", "trn2", "inf2")
_MODEL_TYPES = ("generic", "transformer", "unet-inference")
_lock = threading.Lock()
_client = None


def _backend():
    global _client
    with _lock:
        if _client is None:
            # jaxlib alone, not jax: `import jax` took ~0.95 s of every process's first
            # compiled call, jaxlib's client ~0.05 s (docs/design/compile-performance.md
            # section 2). jax sets this before loading jaxlib (jax/__init__.py); without
            # it XLA logs INFO lines (the device count) to stderr when the client starts.
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
            from jaxlib import xla_client

            # jax's CPU backend as jax._src.xla_bridge.make_cpu_client builds it outside
            # jax.distributed: asynchronous dispatch (jax_cpu_enable_async_dispatch's
            # default), no collectives, every CPU device XLA finds (we use the first).
            _client = xla_client.make_cpu_client(asynchronous=True)
            # Queued compiled graphs finish before the interpreter finalizes (the
            # client goes with the module then); atexit runs last-registered first, so
            # this runs before handlers registered earlier, e.g. the runtime's.
            atexit.register(_drain_devices)
        return _client


@functools.lru_cache(maxsize=1)
def _jaxlib():
    """jaxlib's ``_jax`` and ``xla_client``, loaded by the client's start (which sets
    the logging default first)."""
    _backend()
    from jaxlib import _jax, xla_client

    return _jax, xla_client


def client():
    """The XLA:CPU client every executable of this process is compiled for and run on."""
    return _backend()


def start() -> None:
    """Starts the compiler engine (the XLA:CPU client) if not started; idempotent."""
    _backend()


def _drain_devices() -> None:
    # from here on a compiled launch waits for its kernel (csrc/aten/compiled_launch.h)
    _C._set_compiled_launches_blocking()
    for i in range(torch.neuron.device_count()):
        try:
            torch.neuron.synchronize(i)
        except Exception:
            pass  # errors of abandoned work have nobody left to report to


@functools.lru_cache(maxsize=1)
def compiler_version() -> str:
    """Versions that decide the executable's bytes (part of the cache key); read once per
    process (importlib.metadata's lookups are ~1 ms each, on every graph's compile)."""
    import importlib.metadata as md

    opts = ",".join(f"{k}={v}" for k, v in _XLA_OPTIONS)
    return (
        f"xla-cpu/jaxlib-{md.version('jaxlib')}/torch-mlir-{md.version('torch-mlir')}/{opts}"
        f"/{','.join(_MODULE_REWRITES)}"
    )


@dataclass
class CompilerOptions:
    """Parsed compiler settings; ``flags`` is the normalized flag list (cache key)."""

    target: str
    lnc: int
    opt_level: int
    model_type: str = "generic"
    flags: list[str] = field(default_factory=list)


def parse_flags(
    flags: str | list[str], target: str, lnc: int, opt_level: int, graph_name: str = ""
) -> CompilerOptions:
    """Parses NEURON_CC_FLAGS-style flags over the given defaults.

    Raises NeuronCompileError(stage="compiler") for an unknown flag or a bad value.
    """
    toks = shlex.split(flags) if isinstance(flags, str) else list(flags)
    o = CompilerOptions(target, lnc, opt_level)

    def bad(msg):
        raise NeuronCompileError("compiler", graph_name or "<flags>", msg)

    i = 0
    while i < len(toks):
        t = toks[i]
        name, eq, val = t.partition("=")
        needs_value = name in (
            "--target",
            "--lnc",
            "--logical-nc-config",
            "--optlevel",
            "--model-type",
            "--auto-cast",
        )
        if needs_value and not eq:
            if i + 1 >= len(toks):
                bad(f"flag {name} needs a value")
            i += 1
            val = toks[i]
        if name == "--target":
            if val not in TARGETS:
                bad(f"--target={val}: unknown target (known: {', '.join(TARGETS)})")
            o.target = val
        elif name in ("--lnc", "--logical-nc-config"):
            if val not in ("1", "2"):
                bad(f"{name}={val}: the logical NeuronCore config is 1 or 2")
            o.lnc = int(val)
        elif name in ("-O1", "-O2", "-O3") and not eq:
            o.opt_level = int(name[2])
        elif name == "--optlevel":
            if val not in ("1", "2", "3"):
                bad(f"--optlevel={val}: the optimization level is 1, 2 or 3")
            o.opt_level = int(val)
        elif name == "--model-type":
            if val not in _MODEL_TYPES:
                bad(f"--model-type={val}: unknown (known: {', '.join(_MODEL_TYPES)})")
            o.model_type = val
        elif name == "--auto-cast":
            if val != "none":
                bad(
                    f"--auto-cast={val} is not emulated (only --auto-cast=none); use "
                    "torch.autocast('neuron') for reduced precision"
                )
        elif name == "--verbose":
            pass
        else:
            bad(
                f"unknown compiler flag {t!r} in NEURON_CC_FLAGS (known: --target, --lnc, "
                "-O1/-O2/-O3, --optlevel, --model-type, --auto-cast=none, --verbose)"
            )
        i += 1
    o.flags = [
        f"--target={o.target}",
        f"--lnc={o.lnc}",
        f"-O{o.opt_level}",
        f"--model-type={o.model_type}",
    ]
    return o


class NeuronExecutable:
    """A compiled graph: runs on the host CPU's XLA runtime over buffers it is given.

    ``execute(args)`` takes ``buffer_importer()``'s views of device memory in the
    graph's input order and returns the results in output order, each a read-only
    numpy array over XLA's result buffer (zero-copy), once the computation finished.
    """

    def __init__(self, loaded, options: CompilerOptions):
        self._loaded = loaded
        self.options = options
        # made with the executable (a warm start's on the prefetch thread), not at its run
        self._handlers, self._by_dlpack = _result_handlers(loaded)

    def execute(self, args) -> list[np.ndarray]:
        res = self._loaded.execute_sharded(args).consume_with_handlers(self._handlers)
        out = []
        for r, dl in zip(res, self._by_dlpack):
            r.block_until_ready()  # raises the computation's error, if any
            if not dl:
                try:
                    out.append(np.asarray(memoryview(r)))  # jaxlib's buffer protocol
                    continue
                except BufferError:  # a layout other than row-major
                    pass
            out.append(_dlpack_view(r))
        return out

    def serialize(self) -> bytes:
        """The executable's bytes (XLA's serialized executable): what the cache stores."""
        return bytes(_backend().serialize_executable(self._loaded))

    @classmethod
    def deserialize(cls, data: bytes, options: CompilerOptions) -> NeuronExecutable:
        b = _backend()
        return cls(b.deserialize_executable(data, _devices(b), _compile_options(options)), options)


def _devices(b):
    _, xla_client = _jaxlib()
    return xla_client.DeviceList(tuple(b.local_devices()[:1]))


class _Aval:
    """What jaxlib reads of jax's ShapedArray when it makes an array."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.weak_type = tuple(shape), np.dtype(dtype), False


@functools.lru_cache(maxsize=1)
def _sharding():
    """The first CPU device's sharding, as jaxlib's array functions take it.

    jaxlib's ``SingleDeviceSharding`` with the two methods jax adds to it in Python
    (jax/_src/sharding_impls.py), which ``batched_device_put`` calls. Arrays jaxlib
    makes itself (``execute``'s results, ``dlpack_managed_tensor_to_buffer``) import
    ``jax.core`` for their ShapedArray; made here with ``_Aval`` they do not.
    """
    _jax, xla_client = _jaxlib()
    replicated = xla_client.HloSharding.replicate()

    class _OneDevice(_jax.SingleDeviceSharding):
        def _to_xla_hlo_sharding(self, num_dimensions):
            return replicated

        @property
        def memory_kind(self):
            return self._memory_kind

    return _OneDevice(client().local_devices()[0])


def _result_handlers(loaded) -> tuple[list, list[bool]]:
    """One jaxlib result handler per output (its shape and dtype from the executable's
    program shape), and per output whether numpy gets it through DLPack: jaxlib's
    buffer protocol has no format for bfloat16 and the float8 types."""
    _jax, xla_client = _jaxlib()
    hlo = loaded.hlo_modules()[0].as_serialized_hlo_module_proto()
    shape = xla_client.XlaComputation(hlo).program_shape().result_shape()
    shapes = shape.tuple_shapes() if shape.is_tuple() else [shape]
    sharding = _sharding()
    handlers, by_dlpack = [], []
    for s in shapes:
        dt = np.dtype(s.numpy_dtype())
        handlers.append(_jax.array_result_handler(_Aval(s.dimensions(), dt), sharding, True, True))
        by_dlpack.append(dt.kind not in "biufc")
    return handlers, by_dlpack


_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _dlpack_view(r) -> np.ndarray:
    """numpy over an XLA array's buffer through DLPack (dtypes numpy has only through
    ml_dtypes, e.g. bfloat16): torch reads the capsule, numpy views its bytes."""
    _jax, _ = _jaxlib()
    t = torch.from_dlpack(_jax.buffer_to_dlpack_managed_tensor(r))
    dt = _numpy_of().get(t.dtype)
    if dt is None:
        return t.numpy()
    return t.view(_INT_OF_SIZE[t.element_size()]).numpy().view(dt)


@functools.lru_cache(maxsize=1)
def _numpy_of() -> dict:
    """torch dtype -> numpy dtype (ml_dtypes, jaxlib's dependency) where torch's
    ``.numpy()`` has none."""
    import ml_dtypes

    names = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    return {
        getattr(torch, n): np.dtype(getattr(ml_dtypes, n))
        for n in names
        if hasattr(torch, n) and hasattr(ml_dtypes, n)
    }


# XLA:CPU options every graph is compiled with (part of the cache key through
# compiler_version()). YNNPACK only for standalone dots and convolutions: jaxlib
# 0.10.2's default also gives YNN reductions, reduce-windows and the elementwise ops
# fused around dots/convolutions, whose max/min skip NaN (amax, max_pool2d, a relu
# fused before a mean gave numbers where ATen gives NaN; tests/compile/test_nan.py).
_XLA_OPTIONS = (
    (
        "xla_cpu_experimental_ynn_fusion_type",
        "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_INDIVIDUAL_CONVOLUTION",
    ),
)


# Rewrites of the StableHLO module before XLA:CPU compiles it (part of the cache key
# through compiler_version(): the executable changes with them, the module text does not).
_MODULE_REWRITES = ("column-sums-2d", "transposed-lhs-dots")

_COLUMN_SUM = re.compile(
    r"^(?P<ind>[ \t]*)(?P<res>%[-\w.$]+) = stablehlo\.reduce\((?P<x>%[-\w.$]+) "
    r"init: (?P<init>%[-\w.$]+)\) applies stablehlo\.add across dimensions = "
    r"\[(?P<dims>[\d, ]+)\] : \(tensor<(?P<shape>[\dx]+)xf32>, tensor<f32>\) -> "
    r"tensor<(?P<out>[\dx]*?)x?f32>$",
    re.M,
)


def column_sums_2d(stablehlo: str) -> str:
    """Sums of float32 over leading dimensions (``x.sum((0, 1))`` of a [B, T, C]
    tensor: the bias and layer-norm weight gradients of a backward graph) rewritten as
    the same sum over dimension 0 of a [rows, columns] reshape of ``x`` behind an
    ``optimization_barrier``.

    XLA:CPU folds such a reshape into the reduce and splits a reduction over more than
    32 elements into a reduce-window and a reduce (its tree reduction); over two leading
    dimensions the reduce-window is a slow strided loop: x.sum((0, 1)) of an [8, 64, 512]
    tensor took ~680 us, the same sum over the 2-d [512, 512] view ~90 us (with XLA's
    pairwise tree over 32-row windows: closer to the float64 sum than before, 1.2e-5 vs
    3.5e-5 there). The barrier (no computation: the reshape is a bitcast of the
    operand's buffer) keeps XLA from folding the reshape back. Same elements summed,
    with the same init and ``add``; NaN and infinities propagate as before. Applied
    where the leading dimensions hold more than 32 elements and the kept ones at least
    2; reduces of other forms are left as they are.
    """
    if "stablehlo.reduce" not in stablehlo:
        return stablehlo
    prefix = _fresh_prefix(stablehlo, "%ncs")
    count = 0

    def rewrite(m: re.Match) -> str:
        nonlocal count
        dims = [int(d) for d in m["dims"].split(",")]
        shape = [int(d) for d in m["shape"].split("x")]
        k = len(dims)
        if dims != list(range(k)) or k >= len(shape):
            return m[0]
        rows = int(np.prod(shape[:k]))
        cols = int(np.prod(shape[k:]))
        if rows <= 32 or cols < 2:
            return m[0]
        count += 1
        v, ind = f"{prefix}{count}", m["ind"]
        two = f"tensor<{rows}x{cols}xf32>"
        out = f"tensor<{m['out']}xf32>" if m["out"] else "tensor<f32>"
        return (
            f"{ind}{v}_x = stablehlo.reshape {m['x']} : (tensor<{m['shape']}xf32>) -> {two}\n"
            f"{ind}{v}_b = stablehlo.optimization_barrier {v}_x : {two}\n"
            f"{ind}{v}_s = stablehlo.reduce({v}_b init: {m['init']}) applies stablehlo.add "
            f"across dimensions = [0] : ({two}, tensor<f32>) -> tensor<{cols}xf32>\n"
            f"{ind}{m['res']} = stablehlo.reshape {v}_s : (tensor<{cols}xf32>) -> {out}"
        )

    return _COLUMN_SUM.sub(rewrite, stablehlo)


def _fresh_prefix(stablehlo: str, base: str) -> str:
    """An SSA name prefix (``base``, then ``base_``, ...) that no value of the module's
    text starts with followed by a digit: names a rewrite adds cannot clash."""
    prefix = base
    while re.search(re.escape(prefix) + r"\d", stablehlo):
        prefix += "_"
    return prefix


_TRANSPOSE_2D = re.compile(
    r"^[ \t]*(?P<res>%[-\w.$]+) = stablehlo\.transpose (?P<x>%[-\w.$]+), dims = \[1, 0\] : "
    r"\(tensor<(?P<r>\d+)x(?P<m>\d+)xf32>\) -> tensor<\d+x\d+xf32>$",
    re.M,
)
_DOT_2D = re.compile(
    r"^(?P<ind>[ \t]*)(?P<res>%[-\w.$]+) = stablehlo\.dot_general (?P<a>%[-\w.$]+), "
    r"(?P<b>%[-\w.$]+), contracting_dims = \[1\] x \[0\] : \(tensor<(?P<m>\d+)x(?P<r>\d+)xf32>, "
    r"tensor<\d+x(?P<n>\d+)xf32>\) -> tensor<\d+x\d+xf32>$",
    re.M,
)


def transposed_lhs_dots(stablehlo: str) -> str:
    """A float32 matrix product ``transpose(a) @ b`` (a [R, M], b [R, N]: the weight
    gradient of a linear layer, ``x.T @ grad``) given to XLA:CPU in a form its YNNPACK
    dot takes: ``transpose(a)`` materialized behind an ``optimization_barrier``, or,
    where that moves more data (R*M > R*N + M*N), ``transpose(transpose(b) @ a)``
    with both transposes materialized.

    XLA folds the transpose into the dot (contracting the lhs's dimension 0), and
    jaxlib 0.10.2's YNNPACK takes no such dot (``IsDotSupportedByYnn``: lhs not
    canonical): it ran on Eigen, slower than YNNPACK (a [512,512].T @ [512,128] product
    1.38 ms vs 0.88 ms with the transpose materialized, on the shared 2-core host); the
    GPT-2 training step's backward executable took 0.93-0.94x with this rewrite
    (docs/design/compile-performance.md section 1).
    The barriers keep XLA from folding the transposes back. The same products of the
    same values (YNNPACK's order of accumulation: results differ from Eigen's by
    rounding, ~1e-6 relative there). Dots below 2^18 multiply-adds are left as they are.
    """
    if "stablehlo.dot_general" not in stablehlo:
        return stablehlo
    transposed = {
        m["res"]: (m["x"], int(m["r"]), int(m["m"])) for m in _TRANSPOSE_2D.finditer(stablehlo)
    }
    if not transposed:
        return stablehlo
    prefix = _fresh_prefix(stablehlo, "%ntd")
    count = 0

    def rewrite(m: re.Match) -> str:
        nonlocal count
        t = transposed.get(m["a"])
        rows, mm, nn = int(m["r"]), int(m["m"]), int(m["n"])
        if t is None or t[1:] != (rows, mm) or mm < 2 or nn < 2 or rows * mm * nn < 1 << 18:
            return m[0]
        count += 1
        v, ind, a, b = f"{prefix}{count}", m["ind"], t[0], m["b"]
        at, bt = f"tensor<{mm}x{rows}xf32>", f"tensor<{nn}x{rows}xf32>"
        out, out_t = f"tensor<{mm}x{nn}xf32>", f"tensor<{nn}x{mm}xf32>"
        if rows * mm <= rows * nn + mm * nn:
            return (
                f"{ind}{v}_a = stablehlo.optimization_barrier {m['a']} : {at}\n"
                f"{ind}{m['res']} = stablehlo.dot_general {v}_a, {b}, contracting_dims = [1] x "
                f"[0] : ({at}, tensor<{rows}x{nn}xf32>) -> {out}"
            )
        return (
            f"{ind}{v}_t = stablehlo.transpose {b}, dims = [1, 0] : (tensor<{rows}x{nn}xf32>) -> {bt}\n"
            f"{ind}{v}_b = stablehlo.optimization_barrier {v}_t : {bt}\n"
            f"{ind}{v}_d = stablehlo.dot_general {v}_b, {a}, contracting_dims = [1] x [0] : "
            f"({bt}, tensor<{rows}x{mm}xf32>) -> {out_t}\n"
            f"{ind}{v}_e = stablehlo.optimization_barrier {v}_d : {out_t}\n"
            f"{ind}{m['res']} = stablehlo.transpose {v}_e, dims = [1, 0] : ({out_t}) -> {out}"
        )

    return _DOT_2D.sub(rewrite, stablehlo)


def prepare_module(stablehlo: str) -> str:
    """The module as XLA:CPU compiles it: ``_MODULE_REWRITES`` applied."""
    return transposed_lhs_dots(column_sums_2d(stablehlo))


def _compile_options(o: CompilerOptions):
    _, xla_client = _jaxlib()
    opts = xla_client.CompileOptions()
    # The optimization level and _XLA_OPTIONS (for NaN, not speed): the other XLA:CPU
    # options jaxlib 0.10.2 accepts (oneDNN, fast math, XNN fusion, opt presets, vector
    # width, ...) were measured on the benchmark models and none was faster beyond the
    # noise (docs/compile.md).
    opts.env_option_overrides = [("xla_backend_optimization_level", str(o.opt_level))] + list(
        _XLA_OPTIONS
    )
    return opts


def compile(
    stablehlo: str,
    target: str,
    lnc: int,
    opt_level: int,
    flags: str | list[str],
    graph_name: str = "",
) -> NeuronExecutable:
    """Compiles StableHLO text into an executable.

    Args: stablehlo: a module with one public ``func.func @main`` (static shapes).
    target: "trn1", "trn2" or "inf2"; lnc: 1 or 2; opt_level: 1..3; flags:
    NEURON_CC_FLAGS-style flags that override those. graph_name: for errors.
    Raises: NeuronCompileError(stage="compiler") for bad flags or a module XLA rejects.
    """
    options = parse_flags(flags, target, lnc, opt_level, graph_name)
    b = _backend()
    try:
        loaded = b.compile_and_load(
            prepare_module(stablehlo), _devices(b), _compile_options(options)
        )
    except Exception as e:
        raise NeuronCompileError(
            "compiler", graph_name, str(e).strip().splitlines()[0][:500]
        ) from e
    return NeuronExecutable(loaded, options)


def host_view(a: np.ndarray):
    """An executable input over a host numpy array's memory (zero-copy where XLA can:
    C-contiguous, 64-byte aligned; else XLA copies it)."""
    _jax, xla_client = _jaxlib()
    return _jax.batched_device_put(
        _Aval(a.shape, a.dtype),
        _sharding(),
        [a],
        [client().local_devices()[0]],
        True,  # committed
        False,  # force_copy
        xla_client.HostBufferSemantics.ZERO_COPY,
        True,  # 64-bit values stay 64-bit (jax's default, x64 off, would narrow them)
    )


@functools.lru_cache(maxsize=1)
def buffer_importer():
    """The function ``neuron tensor -> executable input`` over the same bytes
    (zero-copy where XLA can; ``buffer_pointer`` tells).

    The tensor's bytes as a numpy array (``_C._cpu_alias``: a CPU tensor over device
    memory that owns nothing; read inside a kernel) handed to jaxlib's
    ``batched_device_put`` with zero-copy semantics: ~13 us a view, like the
    ``dlpack_managed_tensor_to_buffer`` import it replaces, which imported jax (its
    arrays' ShapedArray). XLA may drop its reference from its own threads: jaxlib
    defers that decref to its next call under the GIL (its PythonRefManager), so no
    thread of XLA's takes the GIL.
    """
    _jax, xla_client = _jaxlib()
    put = _jax.batched_device_put
    sharding, cpu = _sharding(), [client().local_devices()[0]]
    zero_copy = xla_client.HostBufferSemantics.ZERO_COPY
    alias, numpy_of, int_of = _C._cpu_alias, _numpy_of(), _INT_OF_SIZE

    def to_buffer(t: torch.Tensor):
        a = alias(t)
        dt = numpy_of.get(t.dtype)
        n = a.numpy() if dt is None else a.view(int_of[t.element_size()]).numpy().view(dt)
        return put(_Aval(n.shape, n.dtype), sharding, [n], cpu, True, False, zero_copy, True)

    return to_buffer


def buffer_pointer(x) -> int:
    """The address of the bytes an executable input (``buffer_importer``'s) lives in:
    the tensor's own when XLA did not copy it."""
    _jax, _ = _jaxlib()
    return torch.from_dlpack(_jax.buffer_to_dlpack_managed_tensor(x)).data_ptr()
