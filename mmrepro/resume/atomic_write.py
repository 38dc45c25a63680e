"""Atomic files: a run killed while saving never leaves a torn file under a good name.

:func:`atomic_write` writes a temporary file in the same directory (``.NAME.PID.tmp``),
flushes and fsyncs it and renames it onto its name with ``os.replace``. A temporary file
left by a kill never ends in ``.pth`` and ``last_checkpoint`` never names it, so
MMEngine's ``find_latest_checkpoint`` and resume ignore it; the next write of the same
name removes it.

:class:`AtomicLocalBackend` is MMEngine's local file backend writing that way,
registered with MMEngine's ``register_backend`` as :data:`ATOMIC_BACKEND`: MMEngine's
``save_checkpoint`` writes through whatever backend ``backend_args`` names, so
``ReproRunner.save_checkpoint`` names this one for local checkpoints.
"""
from __future__ import annotations

import builtins
import contextlib
import glob
import os
import os.path as osp
from pathlib import Path
from typing import IO, Any, Callable, Union

from mmengine.fileio import LocalBackend, register_backend

#: Suffix of the temporary files (a checkpoint's name never ends with it).
TMP_SUFFIX = '.tmp'
#: The name :class:`AtomicLocalBackend` is registered under (``backend_args['backend']``).
ATOMIC_BACKEND = 'mmrepro_atomic_local'


def temporary_name(path: str) -> str:
    """The temporary file a save of ``path`` writes first (same directory, hidden)."""
    directory, name = osp.split(osp.abspath(path))
    return osp.join(directory, f'.{name}.{os.getpid()}{TMP_SUFFIX}')


def atomic_write(path: str, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` so that it is either absent, as before, or complete.

    ``write`` fills a temporary file in the same directory, which is flushed, fsynced
    and renamed onto ``path`` (``os.replace``; the directory is fsynced after). A
    failure removes the temporary file; a kill leaves it, and the next write of
    ``path`` removes it.

    Args:
        path: Final file name.
        write: Called with the temporary file, opened ``'wb'``.
    """
    directory = osp.dirname(osp.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = temporary_name(path)
    try:
        with builtins.open(tmp, 'wb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    _fsync_directory(directory)
    pattern = osp.join(glob.escape(directory), f'.{glob.escape(osp.basename(path))}.*'
                       f'{TMP_SUFFIX}')
    for leftover in glob.glob(pattern):
        with contextlib.suppress(OSError):
            os.remove(leftover)


def _fsync_directory(directory: str) -> None:
    with contextlib.suppress(OSError):  # not every file system fsyncs directories
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@register_backend(ATOMIC_BACKEND, force=True)
class AtomicLocalBackend(LocalBackend):
    """MMEngine's ``LocalBackend`` whose writes are :func:`atomic_write`\\ s."""

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        """Write bytes to ``filepath``, atomically."""
        atomic_write(str(filepath), lambda f: f.write(obj))

    def put_text(self, obj: str, filepath: Union[str, Path], encoding: str = 'utf-8') -> None:
        """Write text to ``filepath``, atomically."""
        atomic_write(str(filepath), lambda f: f.write(obj.encode(encoding)))
