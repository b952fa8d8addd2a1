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
import shlex
import threading
from dataclasses import dataclass, field

import torch
import torch.utils.dlpack

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
            import jax
            from jax._src import xla_bridge

            # Graphs may keep 64-bit values (TORCHNEURON_NARROW_64BIT=0): jax must not
            # truncate 64-bit buffers it receives through DLPack.
            jax.config.update("jax_enable_x64", True)
            _client = xla_bridge.get_backend("cpu")
            # jax tears its clients down at exit (atexit); queued compiled graphs must
            # finish first. atexit runs last-registered first, so this runs before jax's.
            atexit.register(_drain_devices)
        return _client


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


def compiler_version() -> str:
    """Versions that decide the executable's bytes (part of the cache key)."""
    import importlib.metadata as md

    opts = ",".join(f"{k}={v}" for k, v in _XLA_OPTIONS)
    return f"xla-cpu/jaxlib-{md.version('jaxlib')}/torch-mlir-{md.version('torch-mlir')}/{opts}"


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

    ``execute(args)`` takes jax arrays (zero-copy DLPack views of device memory) in
    the graph's input order and returns jax arrays in output order.
    """

    def __init__(self, loaded, options: CompilerOptions):
        self._loaded = loaded
        self.options = options

    def execute(self, args):
        return self._loaded.execute(args)

    def serialize(self) -> bytes:
        """The executable's bytes (XLA's serialized executable): what the cache stores."""
        return bytes(_backend().serialize_executable(self._loaded))

    @classmethod
    def deserialize(cls, data: bytes, options: CompilerOptions) -> NeuronExecutable:
        b = _backend()
        return cls(b.deserialize_executable(data, _devices(b), _compile_options(options)), options)


def _devices(b):
    from jax._src.lib import xla_client as xc

    return xc.DeviceList(tuple(b.local_devices()[:1]))


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


def _compile_options(o: CompilerOptions):
    from jax._src.lib import xla_client as xc

    opts = xc.CompileOptions()
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
        loaded = b.compile_and_load(stablehlo, _devices(b), _compile_options(options))
    except Exception as e:
        raise NeuronCompileError(
            "compiler", graph_name, str(e).strip().splitlines()[0][:500]
        ) from e
    return NeuronExecutable(loaded, options)


class _DeviceBytes:
    """DLPack producer over a neuron tensor's bytes (CPU-addressable inside a kernel).
    Its capsule holds no Python object: XLA releases imported buffers from its own
    threads, possibly while the interpreter shuts down, when taking the GIL is fatal."""

    def __init__(self, t: torch.Tensor):
        self.t = t

    def __dlpack__(self, stream=None, **kwargs):
        return _C._cpu_alias_dlpack(self.t)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0


@functools.lru_cache(maxsize=1)
def buffer_importer():
    """The function ``neuron tensor -> jax array`` over the same bytes (zero-copy).

    jaxlib's ``dlpack_managed_tensor_to_buffer`` straight from our capsule:
    ``jax.dlpack.from_dlpack`` around it cost ~60 us a view in Python checks (device
    and stream look-ups) against ~10 us, i.e. ~3 ms of a ResNet call with its 63
    inputs (~5 ms of XLA time). Falls back to ``jax.dlpack.from_dlpack`` where that
    entry point is missing or has another signature (it is private to jaxlib).
    """
    import jax.dlpack

    try:
        from jax._src.lib import _jax

        cpu = client().local_devices()[0]
        probe = torch.zeros(16, dtype=torch.float32)
        arr = _jax.dlpack_managed_tensor_to_buffer(
            torch.utils.dlpack.to_dlpack(probe), cpu, None, None, _KDLCPU
        )
        if arr.unsafe_buffer_pointer() != probe.data_ptr():
            raise TypeError("not zero-copy")
    except Exception:
        return lambda t: jax.dlpack.from_dlpack(_DeviceBytes(t))
    to_buffer = _jax.dlpack_managed_tensor_to_buffer
    capsule = _C._cpu_alias_dlpack
    return lambda t: to_buffer(capsule(t), cpu, None, None, _KDLCPU)


_KDLCPU = 1  # DLPack's kDLCPU
