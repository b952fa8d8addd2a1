"""Atomic file replacement shared by the NEFF cache and ``torchneuron check``'s baselines.

The data goes to a temporary file in the same folder, which is then renamed over the
target, so a reader sees the old file or the new one, never half of one, and a failed
write leaves the old file. ``tempfile.mkstemp`` creates the temporary file with mode
0600; it gets the mode ``open()`` would have given (0666 less the umask), so that a
cache or baseline folder shared by several users stays readable as their umask allows.
"""

from __future__ import annotations

import os
import tempfile


def _umask() -> int:
    try:
        with open("/proc/self/status") as f:  # Linux: read without changing it
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, rarely reached)
    os.umask(old)
    return old


def write_atomic(path: str, data: bytes, fsync: bool = False) -> None:
    """Replaces ``path`` with ``data`` atomically (mode 0666 & ~umask). ``fsync``: flush
    the data to disk before the rename. Raises OSError; the temporary file is removed."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
