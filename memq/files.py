"""Files as memq writes and checks them: atomic writes, and the sha256 that manifests record.

Every file memq writes for later (a memory bank, a cache entry, a saved state, a derived data set) is
written at a temporary name beside its target and renamed onto it, so a reader never sees half a file and a
crash leaves the old one: :func:`write_atomic` for bytes in hand, :func:`atomic_path` for a file or a
directory that something else writes. :func:`sha256_file` names the file a manifest, cache or run summary saw,
and :func:`read_manifest` checks a saved directory's files against its manifest. :func:`shown_path` is a path as
records and summaries write it: never one of the machine that ran it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository (or installed package's parent) directory: paths under it are shown relative to it."""


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of the file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(manifest: Path, files: Iterable[str], version: int, error: type[Exception],
                  missing: str = "") -> dict:
    """The JSON ``manifest`` of a saved directory, checked: readable, ``format_version`` equal to ``version``, and a
    sha256 listed for every name in ``files`` that matches the file beside it. Raises ``error`` naming the file that
    failed; ``missing`` is added to the message when there is no manifest at all (how to build one)."""
    if not manifest.is_file():
        raise error(f"{manifest}: no such {missing or 'manifest'}")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        found, listed = data["format_version"], data["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise error(f"{manifest}: unreadable manifest ({exc})") from None
    if found != version:
        raise error(f"{manifest}: format_version {found!r}, this memq reads {version}")
    for name in files:
        path = manifest.parent / name
        if name not in listed:
            raise error(f"{manifest}: lists no sha256 for {name}")
        if not path.is_file():
            raise error(f"{path}: missing")
        if sha256_file(path) != listed[name]:
            raise error(f"{path}: sha256 does not match the manifest (file changed or corrupt)")
    return data


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


def shown_path(path: str | Path | None) -> str | None:
    """``path`` relative to the repository or the working directory, else its name alone: what summaries,
    records and /health show, so that no path of the machine that ran it is written down."""
    if path is None:
        return None
    p = Path(path).resolve()
    for base in (ROOT, Path.cwd()):
        try:
            return str(p.relative_to(base.resolve()))
        except ValueError:
            continue
    return p.name
