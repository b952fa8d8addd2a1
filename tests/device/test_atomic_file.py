"""torchneuron._atomic_file: the NEFF cache's and the check's baselines' writes replace a
file atomically and give it the mode open() would (mkstemp's 0600 made a baseline or a
cache entry unreadable to the other users of a shared folder)."""

import os
import stat

import pytest

from torchneuron._atomic_file import write_atomic


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_mode_follows_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        p = tmp_path / "f.json"
        write_atomic(str(p), b"new", fsync=True)
        plain = tmp_path / "plain"
        plain.write_bytes(b"x")  # what open() gives under this umask
    finally:
        os.umask(old)
    assert p.read_bytes() == b"new"
    assert stat.S_IMODE(p.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~umask


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "f.json"
    p.write_bytes(b"old")

    with pytest.raises(TypeError):
        write_atomic(str(p), object())  # not bytes: f.write raises
    assert p.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["f.json"]
