"""Files as memq writes and checks them: atomic writes, and the sha256 that manifests record.

Every file memq writes for later (a memory bank, a cache entry, a saved state, a derived data set) is
written at a temporary name beside its target and renamed onto it, so a reader never sees half a file and a
crash leaves the old one: :func:`write_atomic` for bytes in hand, :func:`atomic_path` for a file or a
directory that something else writes. :func:`sha256_file` names the file a manifest, cache or run summary saw.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of the file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder (flushed to disk) and a rename."""
    path = Path(path)
    tmp = _temporary(path)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write a file or a directory at; renamed onto ``path`` (replacing
    what was there) when the block ends, removed when it raises."""
    path = Path(path)
    tmp = _temporary(path)
    _remove(tmp)  # a leftover of a process that had this id and died
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    if tmp.is_dir() and path.is_dir():
        shutil.rmtree(path)
    os.replace(tmp, path)
