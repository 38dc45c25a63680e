"""Atomic checkpoints: a run killed while saving never leaves a torn file under a good name.

MMEngine writes ``iter_N.pth`` / ``epoch_N.pth`` in place (``LocalBackend.put``), then
``last_checkpoint`` (``open(..., 'w')`` in ``CheckpointHook``); a run killed during
either leaves a truncated file that ``--resume`` picks. While an enabled Runner saves
(``Runner.save_checkpoint``, and ``CheckpointHook``'s save-then-record step), a local
checkpoint is serialised straight into a temporary file in the same directory
(``.NAME.PID.tmp``), flushed, fsynced and renamed onto its name with ``os.replace``;
``last_checkpoint`` is written the same way, after the checkpoint is complete. A
temporary file left by a kill never ends in ``.pth`` and ``last_checkpoint`` never names
it, so MMEngine's ``find_latest_checkpoint`` and resume ignore it; the next save of the
same name removes it. Other backends, and every other Runner, are MMEngine's.
"""
from __future__ import annotations

import builtins
import contextlib
import contextvars
import functools
import glob
import io
import locale
import os
import os.path as osp
from typing import IO, Any, Callable, Optional

import torch
from mmengine.fileio import LocalBackend, get_file_backend
from mmengine.hooks import CheckpointHook
from mmengine.hooks import checkpoint_hook as hook_module
from mmengine.runner import Runner
from mmengine.runner import runner as runner_module

from ..run.state import enabled

#: The work dir of the enabled Runner saving now (None: not saving, or not enabled).
_SAVING: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    'mmrepro_atomic_save', default=None)
#: Suffix of the temporary files (a checkpoint's name never ends with it).
TMP_SUFFIX = '.tmp'

_original_save_checkpoint = runner_module.save_checkpoint
_original_runner_save = Runner.save_checkpoint
_original_save_with_step = CheckpointHook._save_checkpoint_with_step


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


def save_checkpoint(checkpoint: dict, filename: str, file_client_args: Optional[dict] = None,
                    backend_args: Optional[dict] = None) -> None:
    """MMEngine's ``save_checkpoint``; while an enabled Runner saves a local file, atomic."""
    if (_SAVING.get() is None or file_client_args is not None or not isinstance(filename, str)
            or not isinstance(get_file_backend(filename, backend_args=backend_args),
                              LocalBackend)):
        return _original_save_checkpoint(checkpoint, filename,
                                         file_client_args=file_client_args,
                                         backend_args=backend_args)
    atomic_write(filename, lambda f: torch.save(checkpoint, f))


class _AtomicText(io.StringIO):
    """A text file written with :func:`atomic_write` when its ``with`` block ends well."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path

    def __exit__(self, kind: Any, *rest: Any) -> None:
        text = self.getvalue()
        super().__exit__(kind, *rest)
        if kind is None:
            encoding = locale.getpreferredencoding(False)
            atomic_write(self._path, lambda f: f.write(text.encode(encoding)))


def _hook_open(file: Any, mode: str = 'r', *args: Any, **kwargs: Any) -> Any:
    """``open`` as ``CheckpointHook`` sees it: ``last_checkpoint`` of the enabled Runner
    saving now is written atomically; everything else is the builtin."""
    work_dir = _SAVING.get()
    if (work_dir is not None and mode == 'w' and not args and not kwargs
            and isinstance(file, str)
            and osp.abspath(file) == osp.abspath(osp.join(work_dir, 'last_checkpoint'))):
        return _AtomicText(file)
    return builtins.open(file, mode, *args, **kwargs)


def _saving(method: Callable, runner_of: Callable[..., Any]) -> Callable:
    """Wrap ``method`` so that, for an enabled Runner, the saves inside it are atomic."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        runner = runner_of(self, *args, **kwargs)
        if not enabled(runner):
            return method(self, *args, **kwargs)
        token = _SAVING.set(runner.work_dir)
        try:
            return method(self, *args, **kwargs)
        finally:
            _SAVING.reset(token)
    return wrapper


def apply() -> None:
    """Install the atomic saves (scoped to enabled Runners, see the module docstring)."""
    runner_module.save_checkpoint = save_checkpoint
    hook_module.open = _hook_open
    Runner.save_checkpoint = _saving(_original_runner_save, lambda runner, *_, **__: runner)
    CheckpointHook._save_checkpoint_with_step = _saving(
        _original_save_with_step, lambda hook, runner, *_, **__: runner)
