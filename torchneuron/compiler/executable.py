"""Running a compiled graph on the current stream of its neuron device.

A call allocates the outputs in device memory (through the HBM allocator, so they
count like any tensor), draws the random key (if the graph has random ops), then launches one kernel on the
current stream: in order with eager kernels and asynchronous like them. Inside the
kernel (device memory accessible, also under TORCHNEURON_PROTECT_MEMORY=1) the
inputs reach XLA as zero-copy views of device memory (XLA copies a buffer that is
not 64-byte aligned; the HBM allocator's blocks are), the executable runs, and its
results (numpy arrays over XLA's result buffers) are copied into the outputs (one
host memcpy per output: XLA allocates its own result buffers; a result that only updates a mutated
input is copied into that input, with no output tensor of its own). Outputs that alias each other in eager (y and
y[0] of an intermediate y) are views of one buffer, as eager's. Mutated inputs are
written back in place. A graph's host prologue (small computations on CPU inputs,
host_prologue.py) runs on the calling thread first: the CPU inputs it updates are
written on the host, and the values the device reads are staged in one copy per dtype.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import _C
from .._warn import at_user_line
from . import config, metrics, neuron_cc
from .host_prologue import HostPrologue
from .plan import GraphPlan


def _xla_view(t: torch.Tensor):
    return neuron_cc.buffer_importer()(t)


class _ViewCache:
    """The XLA views of one graph's inputs, kept from call to call: parameters and
    buffers come back as the same tensors, and the tensors a graph gets new every call
    (a backward's saved activations, the gradients an optimizer step reads) come back
    at the same addresses, the caching allocator's blocks being reused in the same
    order. A view is ~10-15 us to make (~0.6 ms of a ResNet call; ~1.1 ms of a GPT-2
    training step's 5 graphs, 2026-12-07, when only the same tensor objects reused
    theirs). An entry of input position k is used for the input at the same address,
    shape, strides and dtype (a transposed square tensor at the same address is another
    view), and only if XLA did not copy it on import (a view over the memory
    itself, so in-place updates show through). A view does not own the memory (the
    DLPack alias is non-owning and holds no reference to the tensor or its storage):
    it is only an address, shape, strides and dtype, so it reads whatever tensor occupies that
    memory when it is used, and it is used only for a live input occupying exactly
    that memory (an entry whose tensor died is replaced by the next input of another
    address). Used on the device's worker threads (the launch runs there); dict
    operations are atomic under the GIL."""

    def __init__(self):
        self._d: dict[int, tuple] = {}

    def views(self, ins: list) -> list:
        make = neuron_cc.buffer_importer()
        d = self._d
        out = []
        for k, t in enumerate(ins):
            e = d.get(k)
            key = (t.data_ptr(), t.shape, t.stride(), t.dtype)
            if e is not None and e[0] == key:
                out.append(e[1])
                continue
            v = make(t)
            if neuron_cc.buffer_pointer(v) == key[0]:
                d[k] = (key, v)
            else:
                d.pop(k, None)
            out.append(v)
        return out


def _host_bytes(t: torch.Tensor):
    """A contiguous tensor's bytes as a writable numpy uint8 array (device memory,
    inside a kernel)."""
    return _C._cpu_alias(t).reshape(-1).view(torch.uint8).numpy()


def _result_bytes(src: np.ndarray) -> np.ndarray:
    return src.reshape(-1).view(np.uint8)


def _result_tensor(src: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A result (numpy, possibly read-only: a copy then, torch warns on those) as a
    flat CPU tensor of ``dtype``, through its bytes (numpy lacks bfloat16 & co.)."""
    b = _result_bytes(src)
    return torch.from_numpy(b if b.flags.writeable else b.copy()).view(dtype)


def _copy_result(dst: torch.Tensor, src: np.ndarray) -> None:
    """Copies ``src`` (an XLA result: a numpy array over its buffer) into the device
    tensor ``dst`` of its shape and dtype. Through numpy: ``torch.from_dlpack`` +
    ``copy_`` cost ~10x as much on the launch thread (84 outputs of the GPT-2
    optimizer step, 19 MB: 39 ms vs 3.7 ms, docs/design/compile-performance.md
    section 1)."""
    if not dst.is_contiguous():  # a view of an alias group's buffer
        _C._cpu_alias(dst).copy_(_result_tensor(src, dst.dtype).view(dst.shape))
        return
    np.copyto(_host_bytes(dst), _result_bytes(src))


def _contiguous_strides(shape) -> tuple:
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(st))


def _overlaps_itself(shape, stride) -> bool:
    """Whether a view's elements share memory (an expand's stride 0, an unfold):
    dims of size > 1 by stride, each stride must pass the extent of the smaller ones."""
    dims = sorted((abs(int(st)), int(n)) for n, st in zip(shape, stride) if int(n) > 1)
    extent = 0  # elements spanned by the dims so far, minus one
    for st, n in dims:
        if st <= extent:
            return True
        extent += (n - 1) * st
    return False


_cpu_warned = False


def _warn_cpu_graph(name: str, device) -> None:
    global _cpu_warned
    if _cpu_warned:
        return
    _cpu_warned = True
    import warnings

    warnings.warn(
        f"neuron backend: compiled graph {name} got its tensors on the CPU: it runs on "
        f"{device}, with its inputs copied there and its outputs copied back to the CPU at "
        "every call. Move the model and its inputs to the device (model.to('neuron'), "
        "x.to('neuron')) to keep them there. Warned once.",
        UserWarning,
        stacklevel=3,
    )


class CompiledGraph:
    """Callable over the AOT graph's flat arguments; returns its flat outputs (a list).

    ``out_specs``: [(shape, dtype)] of the executable's outputs. ``name``: the
    kernel's name in errors and traces.
    """

    def __init__(
        self, name: str, exe, plan: GraphPlan, out_specs: list, alias_outputs: bool = True
    ):
        self.name, self.exe, self.plan, self.out_specs = name, exe, plan, out_specs
        self._views = _ViewCache()
        # plans indexed before the host prologue have none
        self._host = HostPrologue(name, plan) if getattr(plan, "host", None) else None
        self._warned = False  # the narrowing warning of the first launch went to the user's line
        # outputs that alias each other (plan.out_aliases), kept for inference graphs
        # only: in training AOTAutograd regenerates the aliases that require grad from
        # their base, and views there let an in-place change of an output reach a tensor
        # saved for backward unnoticed (tried: a gradient of the changed value where
        # eager raises). j -> (group, stride, offset, flat positions when the view
        # overlaps itself, e.g. an expand, else None); the member that is the whole
        # storage (y itself) is the group's buffer, not a view of it, as in eager.
        self._groups = list(getattr(plan, "out_aliases", ())) if alias_outputs else []
        self._aliased: dict[int, tuple] = {}
        self._roots: dict[int, int] = {}  # group -> j of its whole-storage member
        for g, (nbytes, members) in enumerate(self._groups):
            for j, stride, off in members:
                shape, dtype = out_specs[j]
                n = math.prod(shape)
                if (
                    g not in self._roots
                    and off == 0
                    and n * dtype.itemsize == nbytes
                    and tuple(stride) == _contiguous_strides(shape)
                ):
                    self._roots[g] = j
                pos = None
                if _overlaps_itself(shape, stride):
                    pos = torch.arange(nbytes // dtype.itemsize).as_strided(shape, stride, off)
                    pos = pos.reshape(-1)
                self._aliased[j] = (g, stride, off, pos)
        # outputs that only update a mutated input (an optimizer's parameters and
        # states): j -> i. Copied from XLA's result straight into the input, with no
        # output tensor of their own (one copy, not two).
        returned = {v for kind, v in plan.outputs if kind == "out"}
        self._mut_only = {
            j: i
            for i, j in plan.mutations
            if j not in returned
            and j not in self._aliased
            and j not in getattr(plan, "cpu_outputs", ())
        }

    def _outputs(self, device, into: dict | None = None) -> tuple[list, dict, list]:
        """The output tensors (``into``'s tensor for the outputs it names, j -> tensor);
        for self-overlapping views (j -> (flat buffer of their dtype, positions)) where a
        plain copy cannot write them; the groups' buffers."""
        bufs = []
        for g, (nbytes, _) in enumerate(self._groups):
            root = self._roots.get(g)
            if root is None:
                bufs.append(torch.empty(nbytes, dtype=torch.uint8, device=device))
            else:
                bufs.append(
                    torch.empty(
                        self.out_specs[root][0], dtype=self.out_specs[root][1], device=device
                    )
                )
        outs, scatter = [], {}
        for j, (shape, dtype) in enumerate(self.out_specs):
            if j in self._mut_only:
                outs.append(None)
                continue
            a = self._aliased.get(j)
            if a is None:
                t = into.get(j) if into else None
                outs.append(torch.empty(shape, dtype=dtype, device=device) if t is None else t)
                continue
            if self._roots.get(a[0]) == j:
                outs.append(bufs[a[0]])
                continue
            flat = bufs[a[0]].view(-1).view(torch.uint8).view(dtype)
            outs.append(flat.as_strided(shape, a[1], a[2]))
            if a[3] is not None:
                scatter[j] = (flat, a[3])
        return outs, scatter, bufs

    def _to_cpu(self, outs: list, bufs: list, cpu: tuple) -> list:
        """``outs`` with the outputs ``cpu`` copied to the CPU; aliased ones as views of
        their group's buffer copied once, so they stay aliases."""
        res, cpu_bufs = list(outs), {}
        for j in cpu:
            a = self._aliased.get(j)
            if a is None:
                res[j] = outs[j].cpu()
                continue
            g = a[0]
            if g not in cpu_bufs:
                cpu_bufs[g] = bufs[g].cpu()
            if self._roots.get(g) == j:
                res[j] = cpu_bufs[g]
            else:
                shape, dtype = self.out_specs[j]
                flat = cpu_bufs[g].view(-1).view(torch.uint8).view(dtype)
                res[j] = flat.as_strided(shape, a[1], a[2])
        return res

    def _stage_cpu_inputs(self, args: list, device) -> dict[int, torch.Tensor]:
        """Device copies of the CPU tensor inputs, made with one host-to-device copy per
        dtype (AdamW's 0-dim ``step`` tensors: one copy each cost ~30 us of launch and
        wait, 28 of them per GPT-2 step); {} when there are fewer than two or the copy
        is turned off (the per-input path then copies or raises). ``non_blocking``: the
        bytes of pageable memory are taken at the call, and the host does not wait for
        the stream (a blocking copy does, as CUDA's)."""
        if config.cpu_autocopy_disabled():
            return {}
        by_dtype: dict[torch.dtype, list[int]] = {}
        for src in self.plan.inputs:
            if src[0] != "arg":
                continue
            t = args[src[1]]
            if t.device.type == "cpu" and src[1] not in by_dtype.get(t.dtype, ()):
                by_dtype.setdefault(t.dtype, []).append(src[1])
        out: dict[int, torch.Tensor] = {}
        for idx in by_dtype.values():
            if len(idx) < 2:
                continue
            flat = torch.cat([args[i].reshape(-1) for i in idx]).to(device, non_blocking=True)
            pos = 0
            for i in idx:
                n = args[i].numel()
                out[i] = flat[pos : pos + n].view(args[i].shape)
                pos += n
        return out

    @staticmethod
    def _write_back(pairs: list) -> None:
        """``dst.copy_(src)`` for each (argument, staged copy) that differ; CPU arguments
        from one device-to-host copy per dtype (one wait for the stream, not one each)."""
        to_cpu: dict[torch.dtype, list] = {}
        for dst, src in pairs:
            if src is dst:
                continue
            if dst.device.type == "cpu" and src.device.type != "cpu" and dst.dtype == src.dtype:
                to_cpu.setdefault(dst.dtype, []).append((dst, src))
            else:
                dst.copy_(src)
        for group in to_cpu.values():
            if len(group) == 1:
                group[0][0].copy_(group[0][1])
                continue
            flat = torch.cat([src.reshape(-1) for _, src in group]).cpu()
            pos = 0
            for dst, src in group:
                n = src.numel()
                dst.copy_(flat[pos : pos + n].view(src.shape))
                pos += n

    def _device(self, args) -> torch.device:
        for a in args:
            if isinstance(a, torch.Tensor) and a.device.type == "neuron":
                return a.device
        return torch.device("neuron", torch.neuron.current_device())

    def _note_narrowing(self) -> None:
        # counted per launch, as eager counts its calls (passes/narrow_64bit.py)
        if self.plan.narrowed:
            _C._note_compiled_narrowing(self.plan.narrowed, False)
        if self.plan.full_width:
            _C._note_compiled_narrowing(self.plan.full_width, True)

    def _into(self, into: list, device, args: list) -> dict:
        """j -> the tensor of ``into`` (one per returned value, None: none) that output j
        is written into instead of a new tensor: a contiguous device tensor of its shape
        and dtype, sharing no storage with an argument (the launch reads every argument
        before it writes an output, but a mutated input is written in place)."""
        if len(into) != len(self.plan.outputs) or getattr(self.plan, "cpu_outputs", ()):
            return {}
        taken = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        out = {}
        for (kind, j), t in zip(self.plan.outputs, into):
            if (
                kind != "out"
                or t is None
                or j in out
                or j in self._mut_only
                or j in self._aliased
                or t.device != device
                or t.dtype != self.out_specs[j][1]
                or tuple(t.shape) != tuple(self.out_specs[j][0])
                or not t.is_contiguous()
                or t.untyped_storage().data_ptr() in taken
            ):
                continue
            taken.add(t.untyped_storage().data_ptr())
            out[j] = t
        return out

    def __call__(self, args, into: list | None = None):
        """Launches the graph on ``args`` (its flat arguments) and returns its outputs.
        ``into``: per returned value, a tensor to write it into, or None (the fused
        segments' result tensors, ``segment.py``); a returned value is that tensor where
        it qualifies (``_into``), a new one otherwise."""
        args = list(args)
        device = self._device(args)
        host = self._host.run(args) if self._host is not None else None
        staged: dict[int, torch.Tensor] = {}  # arg index -> device tensor used
        staged.update(self._stage_cpu_inputs(args, device))
        ins = []
        for src in self.plan.inputs:
            if src[0] == "rng_key":
                # two 32-bit words from the device's generator, drawn on the current
                # stream: in order with eager draws, and it advances the generator
                ins.append(torch.randint(0, 2**32, (2,), dtype=torch.int64, device=device))
                continue
            if src[0] == "host_pack":
                ins.append(self._host.pack(host, src[1], device))
                continue
            i = src[1]
            t = staged.get(i, args[i])
            if t.device != device:
                if t.device.type == "cpu" and not config.cpu_autocopy_disabled():
                    # pageable memory is staged: no wait for the stream
                    t = t.to(device, non_blocking=not t.is_pinned())
                else:
                    raise RuntimeError(
                        f"compiled graph {self.name}: input {i} is on {t.device}, expected "
                        f"{device}"
                        + (
                            " (TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1 turns off "
                            "copying CPU inputs)"
                            if t.device.type == "cpu"
                            else ""
                        )
                    )
            if not t.is_contiguous():
                t = t.contiguous()
            staged[i] = t
            ins.append(t)
        outs, scatter, bufs = self._outputs(
            device, self._into(into, device, args) if into else None
        )
        # The launch may run after this call returns: it holds detached tensors (the same
        # memory, other TensorImpls), so the outputs' use counts are the caller's alone.
        # AccumulateGrad steals a gradient whose use count is 1 and copies it otherwise:
        # held here, the copies would depend on the worker thread's timing.
        mut_only = self._mut_only
        # mutated inputs written from XLA's result directly (j -> input), or from the
        # output tensor (an output also returned)
        dsts = [
            staged[mut_only[j]].detach() if o is None else o.detach() for j, o in enumerate(outs)
        ]
        mut_dst = [
            (staged[i].detach(), dsts[j]) for i, j in self.plan.mutations if j not in mut_only
        ]
        in_ptrs = {t.data_ptr() for t in ins} if mut_only else ()
        exe = self.exe
        cache = self._views

        def run():
            res = exe.execute(cache.views(ins))
            direct = []
            for j, (r, dst) in enumerate(zip(res, dsts)):
                if j in mut_only:  # written after the other outputs, which may read inputs
                    if dst.numel():
                        direct.append((dst, r))
                elif j in scatter:  # aliased positions get the same value from each
                    flat, pos = scatter[j]
                    _C._cpu_alias(flat)[pos] = _result_tensor(r, flat.dtype)
                elif dst.numel():
                    _copy_result(dst, r)
            if any(r.ctypes.data in in_ptrs for _, r in direct):
                # a result XLA left in an input's memory: read all before writing any
                direct = [(dst, np.array(r, copy=True)) for dst, r in direct]
            for dst, r in direct:
                _copy_result(dst, r)
            for dst, src in mut_dst:
                if dst.numel():
                    np.copyto(_host_bytes(dst), _host_bytes(src))

        _C._launch_compiled(device.index, self.name, run)
        metrics.count("graph_runs")  # callers can tell a compiled run from an eager one
        # the first launch's warnings point at the user's line, not at this file
        if self.plan.narrowed or self.plan.full_width:
            if self._warned:
                self._note_narrowing()
            else:
                at_user_line(self._note_narrowing)
                self._warned = True
        # Mutated arguments that were staged (CPU copies, contiguous copies) get the result.
        self._write_back([(args[i], staged[i]) for i, _ in self.plan.mutations])
        if host is not None:
            self._host.write(args, host)  # on the host: no wait for the device
        cpu = getattr(self.plan, "cpu_outputs", ())
        if cpu:  # all inputs on the CPU: the outputs go back there, as eager's
            _warn_cpu_graph(self.name, device)
            outs = self._to_cpu(outs, bufs, cpu)
        result = []
        for kind, v in self.plan.outputs:
            result.append(
                outs[v]
                if kind == "out"
                else args[v]
                if kind == "arg"
                else host[v]
                if kind == "host"
                else v
            )
        return result
