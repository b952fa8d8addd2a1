"""Persistent cache of compiled executables (TorchNeuron's NEFF cache), with an in-memory cache in front.

Layout: ``$TORCH_NEURONX_NEFF_CACHE_DIR/ab/cd/<key>.neff`` (key = SHA-256 hex; ab, cd its
first four hex digits). An entry is written to a temporary file in the same folder
and renamed into place (readers never see half an entry); a per-key file lock
(``<key>.lock``, fcntl) makes concurrent processes compile a graph once: the first
compiles, the others wait and read. Entry format: magic ``TNNEFF1\\n``, 8-byte
little-endian payload length, 32-byte SHA-256 of the payload, payload (the
compiler's serialized executable). A truncated or corrupt entry fails that check:
it is reported with a warning and rebuilt. A folder that cannot be written warns once
(``warn_unwritable``) and nothing is stored; a folder in an entry's place is named in a
warning and the graph compiles uncached. ``prefetch()`` loads entries on a background
thread ahead of their lookup (prefetch.py); a lookup takes a loaded one only under its key.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
import struct
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor

from . import config

MAGIC = b"TNNEFF1\n"
_HEADER = len(MAGIC) + 8 + 32
_memory: dict[str, object] = {}
_memory_lock = threading.Lock()
# Background loads started by prefetch(): key -> Future of (exe, payload, seconds) or None.
_pending: dict[str, Future] = {}
_loader: ThreadPoolExecutor | None = None


def cache_key(
    stablehlo: str,
    io_spec: list,
    target: str,
    lnc: int,
    opt_level: int,
    flags: list[str],
    compiler_version: str,
) -> str:
    """SHA-256 hex of everything that decides the executable's bytes."""
    h = hashlib.sha256()
    h.update(stablehlo.encode())
    h.update(
        json.dumps(
            {
                "io": io_spec,
                "target": target,
                "lnc": lnc,
                "opt": opt_level,
                "flags": flags,
                "compiler": compiler_version,
            },
            sort_keys=True,
        ).encode()
    )
    return h.hexdigest()


def entry_path(key: str, root: str | None = None) -> str:
    """Where the entry of ``key`` lives: <root>/ab/cd/<key>.neff."""
    root = root or config.neff_cache_dir()
    return os.path.join(root, key[:2], key[2:4], f"{key}.neff")


def encode(payload: bytes) -> bytes:
    return MAGIC + struct.pack("<Q", len(payload)) + hashlib.sha256(payload).digest() + payload


def decode(data: bytes) -> bytes | None:
    """The payload of an entry, or None when the entry is truncated or corrupt."""
    if len(data) < _HEADER or not data.startswith(MAGIC):
        return None
    (n,) = struct.unpack("<Q", data[len(MAGIC) : len(MAGIC) + 8])
    digest = data[len(MAGIC) + 8 : _HEADER]
    payload = data[_HEADER:]
    if len(payload) != n or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _write_atomic(path: str, data: bytes) -> None:
    from .._atomic_file import write_atomic

    write_atomic(path, data, fsync=True)


def get_or_compile(key: str, compile_fn, serialize_fn, deserialize_fn):
    """The executable for ``key``: memory, else disk, else ``compile_fn()`` (then stored).

    Returns (executable, source, payload): source "memory", "disk" or "compiled";
    payload the executable's serialized bytes (None from memory).
    serialize_fn(exe) -> bytes; deserialize_fn(bytes) -> exe.
    """
    exe, source, payload, _ = get_or_compile_timed(key, compile_fn, serialize_fn, deserialize_fn)
    return exe, source, payload


def get_or_compile_timed(key: str, compile_fn, serialize_fn, deserialize_fn):
    """get_or_compile, plus the seconds a background load (prefetch) spent on this
    executable (0.0 when it was not prefetched): that time is not waited for here."""
    with _memory_lock:
        if key in _memory:
            return _memory[key], "memory", None, 0.0
        fut = _pending.pop(key, None)
    if fut is not None and fut.cancel():
        fut = None  # not started (the loader is on another key): load here
    if fut is not None:
        loaded = fut.result()  # waits only for what the background load has left
        if loaded is not None:
            exe, payload, secs = loaded
            with _memory_lock:
                _memory[key] = exe
            return exe, "disk", payload, secs
    if config.neff_cache_disabled():
        exe = compile_fn()
        with _memory_lock:
            _memory[key] = exe
        return exe, "compiled", serialize_fn(exe), 0.0
    path = entry_path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lock = open(path[: -len(".neff")] + ".lock", "a+")
    except OSError as e:  # read-only or unwritable folder: read what is there, store nothing
        warn_unwritable(path, e)
        exe, source, payload = _disk_or_compile(
            path, compile_fn, serialize_fn, deserialize_fn, store=False
        )
    else:
        with lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                exe, source, payload = _disk_or_compile(
                    path, compile_fn, serialize_fn, deserialize_fn, store=True
                )
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    with _memory_lock:
        _memory[key] = exe
    return exe, source, payload, 0.0


_unwritable: set = set()  # cache folders warned about


def warn_unwritable(path: str, e: OSError) -> None:
    """Warns once per cache folder that ``path`` in it cannot be written: executables
    are then compiled and used, not cached."""
    root = config.neff_cache_dir()
    with _memory_lock:
        if root in _unwritable:
            return
        _unwritable.add(root)
    warnings.warn(
        f"neuron compile cache: cannot write {path} in the cache folder {root} "
        f"({type(e).__name__}: {e.strerror or e}); compiled executables will not be "
        "cached there (set TORCH_NEURONX_NEFF_CACHE_DIR to a writable folder, or "
        "TORCH_NEURONX_DISABLE_NEFF_CACHE=1). Warned once per folder.",
        RuntimeWarning,
        stacklevel=3,
    )


def cannot_write(folder: str) -> str:
    """Why ``folder`` (made if missing) cannot be written, or "" when it can."""
    import tempfile

    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return ""
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"


def warned_unwritable(root: str) -> bool:
    """Whether cache folder ``root`` cannot be written; if so it counts as warned about
    (aot_cache.py's warning names it), so ``warn_unwritable`` adds no second warning."""
    if not cannot_write(root):
        return False
    with _memory_lock:
        _unwritable.add(root)
    return True


def _disk_or_compile(path: str, compile_fn, serialize_fn, deserialize_fn, store: bool):
    """(exe, source, payload) from the entry at ``path``, else compiled (and stored when
    ``store``)."""
    exe, source, payload = None, "compiled", None
    if os.path.isdir(path):
        warnings.warn(
            f"neuron compile cache: entry path {path} is a folder, not a cache "
            "entry; compiling the graph without caching it (remove that folder)",
            RuntimeWarning,
            stacklevel=3,
        )
        store = False
    elif os.path.exists(path):
        try:
            with open(path, "rb") as f:
                payload = decode(f.read())
        except OSError as e:
            warnings.warn(
                f"neuron compile cache: entry {path} cannot be read ({e}); rebuilding it",
                RuntimeWarning,
                stacklevel=3,
            )
            payload = None
        else:
            if payload is None:
                warnings.warn(
                    f"neuron compile cache: entry {path} is truncated or corrupt; rebuilding it",
                    RuntimeWarning,
                    stacklevel=3,
                )
            else:
                try:
                    exe, source = deserialize_fn(payload), "disk"
                except Exception as e:  # written by an incompatible compiler build
                    warnings.warn(
                        f"neuron compile cache: entry {path} cannot be loaded ({e}); rebuilding it",
                        RuntimeWarning,
                        stacklevel=3,
                    )
    if exe is None:
        exe = compile_fn()
        payload = serialize_fn(exe)
        if store:
            try:
                _write_atomic(path, encode(payload))
            except OSError as e:
                warn_unwritable(path, e)
    return exe, source, payload


def _load(path: str, deserialize_fn):
    """The background half of prefetch(): (exe, payload, seconds), or None when the entry
    is missing, corrupt or does not load (the foreground lookup then warns and rebuilds)."""
    t0 = time.perf_counter()
    try:
        with open(path, "rb") as f:
            payload = decode(f.read())
        if payload is None:
            return None
        return deserialize_fn(payload), payload, time.perf_counter() - t0
    except Exception:
        return None


def prefetch(key: str, deserialize_fn) -> None:
    """Starts loading the disk entry of ``key`` on a background thread (XLA's deserialization
    releases the GIL); get_or_compile then takes it, waiting for what is left. Nothing is
    started when the key is in memory or already loading, or the cache is disabled."""
    global _loader
    if config.neff_cache_disabled():
        return
    path = entry_path(key)
    with _memory_lock:
        if key in _memory or key in _pending:
            return
        if _loader is None:
            _loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="neuron-prefetch")
        _pending[key] = _loader.submit(_load, path, deserialize_fn)


def _after_fork_in_child() -> None:
    # the loader's thread does not exist in a forked child: a new one is made on demand
    global _loader
    _loader = None
    _pending.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def discard_prefetch(keys) -> None:
    """Forgets background loads of ``keys`` (a stale hint's): not yet started ones are
    cancelled, finished ones freed."""
    with _memory_lock:
        futs = [_pending.pop(k) for k in keys if k in _pending]
    for f in futs:
        f.cancel()


def clear_memory_cache() -> None:
    """Drops the in-memory caches and forgets background loads (the next lookup reads the disk)."""
    with _memory_lock:
        _memory.clear()
        _index_memory.clear()
        _pending.clear()


def store_entry(key: str, payload: bytes) -> None:
    """Writes an entry from serialized bytes (load_cache_artifacts)."""
    path = entry_path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _write_atomic(path, encode(payload))


def read_entry(key: str) -> bytes | None:
    """The payload stored for ``key`` on disk, or None."""
    try:
        with open(entry_path(key), "rb") as f:
            return decode(f.read())
    except OSError:
        return None


# ---- Graph index: graph key -> executable key + run plan ----
# The executable's key needs the StableHLO, i.e. the FX passes and a lowering (about
# 0.3 + 0.6 s for MiniLM). A warm start looks the executable up by the key of the
# AOT graph as received (graph_key.py) instead: the index entry holds the executable
# key and what the passes produced for the run (the GraphPlan, the I/O specs), so a
# hit skips the graph copy, the passes and the lowering. Entries:
# <root>/ab/cd/<graph key>.index, in the executable entries' checksummed format
# (a corrupt one is a miss, warned about, and rewritten); payload: a pickled dict.

_index_memory: dict[str, dict] = {}


def index_path(fx_key: str) -> str:
    return entry_path(fx_key)[: -len(".neff")] + ".index"


def index_decode(payload: bytes) -> dict | None:
    """An index record from its payload, or None when it is not a valid record."""
    try:
        rec = pickle.loads(payload)
    except Exception:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("key"), str) or len(rec["key"]) != 64:
        return None
    return rec


def index_lookup(fx_key: str) -> dict | None:
    """The record (``key``, ``plan``, ``in_specs``, ``out_specs``) stored for a graph key,
    if its entry and its executable's entry exist and the record is valid."""
    with _memory_lock:
        if fx_key in _index_memory:
            return _index_memory[fx_key]
    if config.neff_cache_disabled():
        return None
    path = index_path(fx_key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    payload = decode(data)
    rec = index_decode(payload) if payload is not None else None
    if rec is None:
        warnings.warn(
            f"neuron compile cache: index entry {path} is truncated or corrupt; "
            "lowering the graph again and rewriting it",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    if not os.path.exists(entry_path(rec["key"])):
        return None
    return rec


def index_payload(rec: dict) -> bytes:
    return pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL)


def index_store(fx_key: str, rec: dict) -> None:
    with _memory_lock:
        _index_memory[fx_key] = rec
    if config.neff_cache_disabled():
        return
    path = index_path(fx_key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write_atomic(path, encode(index_payload(rec)))
    except OSError as e:  # a warm start then lowers again; nothing else is lost
        warn_unwritable(path, e)
