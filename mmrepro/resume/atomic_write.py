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

A write that the disk, the quota, the permissions or a read-only file system refuses
raises :class:`SaveError`, one line saying what was being written, how much space it
needed and how much was free (where space was the problem), and that nothing was
replaced; ``ReproRunner`` adds how to continue.
"""
from __future__ import annotations

import builtins
import contextlib
import errno
import glob
import os
import os.path as osp
import shutil
from pathlib import Path
from typing import IO, Any, Callable, Optional, Union

from mmengine.fileio import LocalBackend, register_backend

#: Suffix of the temporary files (a checkpoint's name never ends with it).
TMP_SUFFIX = '.tmp'
#: The name :class:`AtomicLocalBackend` is registered under (``backend_args['backend']``).
ATOMIC_BACKEND = 'mmrepro_atomic_local'
#: The write failures a run cannot get past by itself: ``errno -> (what, the fix)``.
SAVE_FAILURES = {
    errno.ENOSPC: ('no space left on the device', 'free space'),
    errno.EDQUOT: ('the disk quota is exceeded', 'free space or raise the quota'),
    errno.EACCES: ('permission denied', 'make the directory writable'),
    errno.EPERM: ('operation not permitted', 'make the directory writable'),
    errno.EROFS: ('the file system is read-only', 'make the file system writable'),
}


class SaveError(OSError):
    """A file could not be written (no space, no permission, a read-only file system);
    nothing was replaced.

    Attributes:
        path: The file being written.
        fix: What lets the write succeed (e.g. ``free space``).
    """

    def __init__(self, code: int, message: str, path: str, fix: str) -> None:
        super().__init__(code, message, path)
        self.message, self.path, self.fix = message, path, fix

    def __str__(self) -> str:
        return self.message

    def but(self, message: str) -> SaveError:
        """The same failure said with ``message``."""
        return SaveError(self.errno, message, self.path, self.fix)


def save_error(path: str, err: OSError, size: Optional[int] = None) -> SaveError:
    """:class:`SaveError` for a write of ``path`` that ``err`` stopped (an errno of
    :data:`SAVE_FAILURES`), the temporary file already removed.

    Args:
        path: The file being written.
        err: The error.
        size: Bytes the file needed, where known.
    """
    what, fix = SAVE_FAILURES[err.errno]
    space = ''
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        directory = osp.dirname(osp.abspath(path))
        needs = f'it needs {_size(size)}, ' if size is not None else ''
        with contextlib.suppress(OSError):
            space = f' ({needs}{_size(shutil.disk_usage(directory).free)} free in {directory})'
    return SaveError(err.errno, f'cannot write {path}: {what}{space}; nothing was replaced '
                     'and no partial file is left', path, fix)


def _size(count: int) -> str:
    """``512 B``, ``9.8 MiB``."""
    for unit, scale in (('GiB', 2**30), ('MiB', 2**20), ('KiB', 2**10)):
        if count >= scale:
            return f'{count / scale:.1f} {unit}'
    return f'{count} B'


def temporary_name(path: str) -> str:
    """The temporary file a save of ``path`` writes first (same directory, hidden)."""
    directory, name = osp.split(osp.abspath(path))
    return osp.join(directory, f'.{name}.{os.getpid()}{TMP_SUFFIX}')


def atomic_write(path: str, write: Callable[[IO[bytes]], Any],
                 size: Optional[int] = None) -> None:
    """Write ``path`` so that it is either absent, as before, or complete.

    ``write`` fills a temporary file in the same directory, which is flushed, fsynced
    and renamed onto ``path`` (``os.replace``; the directory is fsynced after). A
    failure removes the temporary file; a kill leaves it, and the next write of
    ``path`` removes it.

    Args:
        path: Final file name.
        write: Called with the temporary file, opened ``'wb'``.
        size: Bytes it writes, where known (said when the disk is full).

    Raises:
        SaveError: No space, no permission or a read-only file system (one line).
    """
    directory = osp.dirname(osp.abspath(path))
    tmp = temporary_name(path)
    try:
        os.makedirs(directory, exist_ok=True)
        with builtins.open(tmp, 'wb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(err, OSError) and not isinstance(err, SaveError) and \
                err.errno in SAVE_FAILURES:
            raise save_error(path, err, size) from err
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
        atomic_write(str(filepath), lambda f: f.write(obj), size=len(obj))

    def put_text(self, obj: str, filepath: Union[str, Path], encoding: str = 'utf-8') -> None:
        """Write text to ``filepath``, atomically."""
        data = obj.encode(encoding)
        atomic_write(str(filepath), lambda f: f.write(data), size=len(data))
