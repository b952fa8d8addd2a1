"""Persistent cache of compiled executables (TorchNeuron's NEFF cache), with an in-memory cache in front.

Layout: ``$TORCH_NEURONX_NEFF_CACHE_DIR/ab/cd/<key>.neff`` (key = SHA-256 hex; ab, cd its
first four hex digits). An entry is written to a temporary file in the same folder
and renamed into place (readers never see half an entry); a per-key file lock
(``<key>.lock``, fcntl) makes concurrent processes compile a graph once: the first
compiles, the others wait and read. Entry format: magic ``TNNEFF1\\n``, 8-byte
little-endian payload length, 32-byte SHA-256 of the payload, payload (the
compiler's serialized executable). A truncated or corrupt entry fails that check:
it is reported with a warning and rebuilt.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import struct
import tempfile
import threading
import warnings

from . import config

MAGIC = b"TNNEFF1\n"
_HEADER = len(MAGIC) + 8 + 32
_memory: dict[str, object] = {}
_memory_lock = threading.Lock()


def cache_key(stablehlo: str, io_spec: list, target: str, lnc: int, opt_level: int,
              flags: list[str], compiler_version: str) -> str:
    """SHA-256 hex of everything that decides the executable's bytes."""
    h = hashlib.sha256()
    h.update(stablehlo.encode())
    h.update(json.dumps({"io": io_spec, "target": target, "lnc": lnc, "opt": opt_level,
                         "flags": flags, "compiler": compiler_version},
                        sort_keys=True).encode())
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
    (n,) = struct.unpack("<Q", data[len(MAGIC):len(MAGIC) + 8])
    digest = data[len(MAGIC) + 8:_HEADER]
    payload = data[_HEADER:]
    if len(payload) != n or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _write_atomic(path: str, data: bytes) -> None:
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".neff")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def get_or_compile(key: str, compile_fn, serialize_fn, deserialize_fn):
    """The executable for ``key``: memory, else disk, else ``compile_fn()`` (then stored).

    Returns (executable, source) with source "memory", "disk" or "compiled".
    serialize_fn(exe) -> bytes; deserialize_fn(bytes) -> exe.
    """
    with _memory_lock:
        if key in _memory:
            return _memory[key], "memory"
    if config.neff_cache_disabled():
        exe = compile_fn()
        with _memory_lock:
            _memory[key] = exe
        return exe, "compiled"
    path = entry_path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path[:-len(".neff")] + ".lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            exe, source = None, "compiled"
            if os.path.exists(path):
                with open(path, "rb") as f:
                    payload = decode(f.read())
                if payload is None:
                    warnings.warn(f"neuron compile cache: entry {path} is truncated or corrupt; "
                                  "rebuilding it", RuntimeWarning, stacklevel=2)
                else:
                    try:
                        exe, source = deserialize_fn(payload), "disk"
                    except Exception as e:  # written by an incompatible compiler build
                        warnings.warn(f"neuron compile cache: entry {path} cannot be loaded "
                                      f"({e}); rebuilding it", RuntimeWarning, stacklevel=2)
            if exe is None:
                exe = compile_fn()
                _write_atomic(path, encode(serialize_fn(exe)))
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    with _memory_lock:
        _memory[key] = exe
    return exe, source


def clear_memory_cache() -> None:
    """Drops the in-memory caches (the next lookup reads the disk)."""
    with _memory_lock:
        _memory.clear()
        _index_memory.clear()


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


# ---- Graph index: FX graph key -> executable key ----
# The executable's key needs the StableHLO, i.e. a lowering (about a second for a BERT
# layer stack). A warm start looks the executable up by a key of the FX graph after the
# passes (its printed form carries shapes, dtypes and ops) instead, and lowers only on
# a miss. Entries: <root>/ab/cd/<fx key>.index, the executable key as text.

_index_memory: dict[str, str] = {}


def index_lookup(fx_key: str) -> str | None:
    """The executable key recorded for an FX graph key, if its entry exists and is valid."""
    with _memory_lock:
        if fx_key in _index_memory:
            return _index_memory[fx_key]
    if config.neff_cache_disabled():
        return None
    try:
        with open(entry_path(fx_key)[:-len(".neff")] + ".index") as f:
            key = f.read().strip()
    except OSError:
        return None
    if len(key) != 64 or not os.path.exists(entry_path(key)):
        return None
    return key


def index_store(fx_key: str, key: str) -> None:
    with _memory_lock:
        _index_memory[fx_key] = key
    if config.neff_cache_disabled():
        return
    path = entry_path(fx_key)[:-len(".neff")] + ".index"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _write_atomic(path, key.encode())
