"""torch-mlir's conversion pipelines run in a forked child, so a crash in them (SIGSEGV,
SIGABRT inside C++) becomes a NeuronCompileError naming the graph and the op, and the
user's process lives on.

Why a fork of the current process: the graph is imported to MLIR here (Python, the FX
importer); only the conversion (C++ passes, where torch-mlir crashed) runs in the child,
which touches no torch tensor and no device, only the MLIR module it inherited, and
sends back the StableHLO text through a pipe. A fork shares the parent's memory copy-on-
write: no interpreter start, no re-import, no pickling of the graph (a spawned worker
would pay ~2 s of imports once and a serialization per graph). The child disables MLIR
multithreading (a fork copies no thread of the parent's pool). Measured costs are in
docs/design/compile_lowering_isolation.md.

On a crash, the op is found by triage: one more child lowers each distinct node of the
graph alone (its inputs as placeholders), writing the node's index to the pipe before it
starts; the last index read when that child dies is the op that crashed.
"""

from __future__ import annotations

import json
import operator
import os
import signal
import struct
import threading
import warnings

import torch

_OK, _ERR = b"O", b"E"


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks)


def _fork_call(work) -> tuple[bytes, int]:
    """Runs ``work(write_fd)`` in a forked child; returns (all bytes it wrote, wait status)."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        # JAX warns at every fork (its threads); the child runs no JAX, only MLIR
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        code = 0
        try:
            os.close(r)
            work(w)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    data = _read_all(r)
    _, status = os.waitpid(pid, 0)
    return data, status


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"torch-mlir's conversion crashed ({name}) in a child process"
    return f"torch-mlir's conversion exited with status {os.WEXITSTATUS(status)} in a child process"


class _Worker:
    """A child forked once that converts modules sent to it as text, one at a time
    (length-prefixed messages on two pipes). Forked again after it dies."""

    def __init__(self):
        self.pid = None
        self.lock = threading.Lock()

    def _start(self, pipelines) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        with warnings.catch_warnings():
            # JAX warns at every fork (its threads); the child runs no JAX, only MLIR
            warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
            pid = os.fork()
        if pid == 0:
            try:
                os.close(req_w)
                os.close(rep_r)
                _serve(req_r, rep_w, pipelines)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.req, self.rep = pid, req_w, rep_r

    def _stop(self) -> int:
        for fd in (self.req, self.rep):
            try:
                os.close(fd)
            except OSError:
                pass
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        return status

    def convert(self, text: str, pipelines) -> tuple[str | None, str | None, str | None]:
        with self.lock:
            if self.pid is None:
                self._start(pipelines)
            try:
                _send(self.req, text.encode())
                reply = _recv(self.rep)
            except OSError:
                reply = None
            if reply is None:  # it died: its status says how
                return None, None, describe_status(self._stop())
            if reply[:1] == _OK:
                return reply[1:].decode(), None, None
            return None, "\n".join(json.loads(reply[1:].decode())), None


def _send(fd: int, data: bytes) -> None:
    _write(fd, struct.pack("<Q", len(data)) + data)


def _recv(fd: int) -> bytes | None:
    def exactly(n):
        out = bytearray()
        while len(out) < n:
            b = os.read(fd, min(n - len(out), 1 << 20))
            if not b:
                return None
            out += b
        return bytes(out)

    head = exactly(8)
    if head is None:
        return None
    return exactly(struct.unpack("<Q", head)[0])


def _serve(req: int, rep: int, pipelines) -> None:
    """The worker's loop: a module's text in, its conversion (or error) out."""
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d

    while True:
        msg = _recv(req)
        if msg is None:
            return
        ctx = ir.Context()
        ctx.enable_multithreading(False)  # a fork copies no thread of the parent's pool
        torch_d.register_dialect(ctx)
        diagnostics: list[str] = []

        def on_diagnostic(d, diagnostics=diagnostics) -> bool:
            diagnostics.append(f"{d.location}: error: {d.message}")
            return True

        ctx.attach_diagnostic_handler(on_diagnostic)
        try:
            with ctx:
                module = ir.Module.parse(msg.decode())
                for p in pipelines:
                    p(module)
                payload = _OK + str(module).encode()
        except Exception as e:  # noqa: BLE001
            payload = _ERR + json.dumps(diagnostics + [str(e).strip()]).encode()
        _send(rep, payload)


_WORKER = _Worker()


def run_isolated(module, pipelines) -> tuple[str | None, str | None, str | None]:
    """Runs ``pipelines`` (callables of a module) on ``module`` (imported, torch dialect)
    in the worker child.

    Returns (text, error, crash): the converted module's text; or the conversion's error
    text (diagnostics and exception, as in-process); or a description of the crash.
    """
    return _WORKER.convert(str(module), pipelines)


def _single_node_graph(
    gm: torch.fx.GraphModule, node: torch.fx.Node
) -> torch.fx.GraphModule | None:
    """``node`` alone: its node inputs become placeholders (their ``meta["val"]``); its tensor
    results the outputs. None when it has no tensor result."""
    g = torch.fx.Graph()
    env: dict = {}

    def ph(a):
        if a not in env:
            p = g.placeholder(f"in{len(env)}")
            p.meta.update(a.meta)
            env[a] = p
        return env[a]

    n = g.node_copy(node, lambda a: g.get_attr(a.target) if a.op == "get_attr" else ph(a))
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        outs = [n]
    elif isinstance(val, (tuple, list)):
        outs = []
        for i, v in enumerate(val):
            if isinstance(v, torch.Tensor):
                gi = g.call_function(operator.getitem, (n, i))
                gi.meta["val"] = v
                outs.append(gi)
    else:
        return None
    if not outs:
        return None
    g.output(tuple(outs))
    return torch.fx.GraphModule(gm, g)


def triage(gm: torch.fx.GraphModule, lower_one) -> torch.fx.Node | None:
    """The first node of ``gm`` whose lowering alone crashes (``lower_one(single_gm)``
    lowers a graph in-process), found in one child; None when no node crashes alone."""
    nodes, seen = [], set()
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        key = (
            str(n.target),
            repr(
                torch.fx.node.map_arg(
                    (n.args, n.kwargs),
                    lambda a: (
                        (tuple(a.meta["val"].shape), a.meta["val"].dtype)
                        if isinstance(a.meta.get("val"), torch.Tensor)
                        else a.name
                    ),
                )
            ),
        )
        if key in seen:
            continue
        seen.add(key)
        nodes.append(n)

    def work(w):
        for i, n in enumerate(nodes):
            try:
                sub = _single_node_graph(gm, n)
            except Exception:  # noqa: BLE001
                continue
            if sub is None:
                continue
            _write(w, f"{i}\n".encode())
            try:
                lower_one(sub)
            except Exception:  # noqa: BLE001  (a plain failure is not the crash)
                pass
        _write(w, b"done\n")

    data, status = _fork_call(work)
    lines = data.decode().split()
    if not lines or lines[-1] == "done" or (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        return None
    return nodes[int(lines[-1])]
