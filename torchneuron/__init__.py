"""torchneuron: a PyTorch ``neuron`` device on an emulated NeuronCore.

Importing this package (done automatically by ``import torch`` through the
``torch.backends`` entry point) loads the native extension, renames PyTorch's
PrivateUse1 backend to ``neuron`` and registers ``torch.neuron``.
"""


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: importing did the work.

    Defined before ``import torch``: when ``import torchneuron`` comes first, torch's
    backend autoload finds this package half-initialised and looks this name up.
    """


import torch  # noqa: E402

__version__ = "0.1.0"


from . import _C  # noqa: E402  (registers kernels, guard, allocator, hooks)
from . import device_module as _device_module  # noqa: E402


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() == "neuron":
        return
    torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", _device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True, for_packed_sequence=True
    )


_register()


__all__ = ["__version__"]


def _print_from_host() -> None:
    # Printing formats on the host: one device-to-host copy (a sync point, as
    # on CUDA) instead of many small device ops, each of them narrowed.
    import torch._tensor_str as ts

    if getattr(ts._tensor_str, "_torchneuron", False):
        return
    orig = ts._tensor_str

    def _tensor_str(self, indent):
        if self.device.type == "neuron":
            self = self.cpu()
        return orig(self, indent)

    _tensor_str._torchneuron = True
    ts._tensor_str = _tensor_str


_print_from_host()


def _drain_at_exit() -> None:
    # Let queued kernels finish before the interpreter and static objects
    # they use are torn down (a CUDA context is synchronized at exit too).
    # Errors of abandoned work have nobody left to report to. Compiled graphs
    # launched after this (atexit handlers registered before this import) wait
    # for their kernel: one still running at finalization aborted the process.
    _C._set_compiled_launches_blocking()
    _C._stop_concatenation_buffering()  # later native kernels go straight to the stream
    for i in range(_C._device_count()):
        try:
            _C._synchronize(i)
        except Exception:
            pass


import atexit as _atexit  # noqa: E402

_atexit.register(_drain_at_exit)


from . import distributed as _distributed  # noqa: E402,F401  (registers the c10d backend `neuron`)


def _register_compile_backend() -> None:
    # torch.compile(backend="neuron"): the torch_dynamo_backends entry point finds it
    # after a plain `import torch`; registering here as well covers a Dynamo that was
    # imported first. Importing Dynamo costs about a second, so it is not forced.
    import sys

    if "torch._dynamo" in sys.modules:
        from .compiler.backend import register

        register()


_register_compile_backend()

from .compiler import aot_cache as _aot_cache  # noqa: E402
from .compiler import cache_artifacts as _cache_artifacts  # noqa: E402,F401  (mega-cache types)

_aot_cache.use_torch_cache_dir_at_import()  # TORCHNEURON_AOT_CACHE=1 only


def _install_segment_runner() -> None:
    # Adaptive eager execution's fusing (TORCHNEURON_CONCATENATION_FUSE=1 on top
    # of TORCH_NEURONX_ENABLE_CONCATENATION=1): runs of buffered ops compiled
    # by the compile path (compiler/fused.py).
    import os

    env = os.environ
    if env.get("TORCH_NEURONX_ENABLE_CONCATENATION") == "1" and (
        env.get("TORCHNEURON_CONCATENATION_FUSE") == "1"
    ):  # (not _C._concatenation_enabled(): that starts the runtime)
        from .compiler import fused

        _C._set_segment_runner(fused.run)


_install_segment_runner()
