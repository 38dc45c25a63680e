"""Test-only hooks that kill their own process at an event of the run, in one attempt only.

A launch's attempt is ``TORCHELASTIC_RESTART_COUNT`` (torchrun) or ``SLURM_RESTART_COUNT``
(a requeued Slurm job); a plain process is attempt 0 until it has killed itself once in
its work dir (a marker file), then attempt 1. Every kill writes a marker file
``killed-...`` in the work dir first, so a test can check that it happened.
"""
from __future__ import annotations

import builtins
import os
import os.path as osp
import signal
from typing import IO, Any

from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


def attempt(work_dir: str) -> int:
    """This launch's attempt (see the module docstring)."""
    for name in ('TORCHELASTIC_RESTART_COUNT', 'SLURM_RESTART_COUNT'):
        if os.environ.get(name):
            return int(os.environ[name])
    return int(any(name.startswith('killed-') for name in os.listdir(work_dir)))


def _die(marker: str, text: str = '') -> None:
    with open(marker, 'w') as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


@HOOKS.register_module()
class AttemptKillHook(Hook):
    """Rank ``rank`` SIGKILLs itself after iteration ``at_iter`` in attempt ``attempt``.

    It runs last after the iteration (priority LOWEST), after any checkpoint due then.

    Args:
        rank: The rank that dies.
        at_iter: Iterations done (global count) when it dies.
        attempt: The attempt in which it dies.
    """

    priority = 'LOWEST'

    def __init__(self, rank: int = 0, at_iter: int = 1, attempt: int = 0) -> None:
        self.rank, self.at_iter, self.attempt = rank, at_iter, attempt

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if (get_rank() == self.rank and runner.iter + 1 == self.at_iter
                and attempt(runner.work_dir) == self.attempt):
            _die(osp.join(runner.work_dir,
                          f'killed-attempt{self.attempt}-rank{self.rank}-iter{self.at_iter}'))


class LimitedWriter:
    """A file wrapper that writes ``limit`` bytes, then calls :meth:`stop` (a subclass's:
    the process dies, the disk is full...)."""

    def __init__(self, file: IO[bytes], limit: int) -> None:
        self.file, self.limit, self.written = file, limit, 0

    def write(self, data: Any) -> int:
        data = memoryview(data).cast('B')
        if self.written + len(data) < self.limit:
            self.written += len(data)
            return self.file.write(data)
        self.file.write(data[:self.limit - self.written])
        self.written = self.limit
        self.stop()
        return 0  # not reached

    def stop(self) -> None:
        """What happens once ``limit`` bytes are written."""
        raise NotImplementedError

    def flush(self) -> None:
        self.file.flush()

    def fileno(self) -> int:
        return self.file.fileno()

    @property
    def name(self) -> str:
        return self.file.name

    def __enter__(self) -> LimitedWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.file.close()


class _KillingWriter(LimitedWriter):
    """A file wrapper that SIGKILLs the process once ``limit`` bytes are written."""

    def __init__(self, file: IO[bytes], limit: int, marker: str) -> None:
        super().__init__(file, limit)
        self.marker = marker

    def stop(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        _die(self.marker, f'{self.file.name}\n{self.limit}\n')


@HOOKS.register_module()
class SaveKillHook(Hook):
    """Rank ``rank`` SIGKILLs itself while the checkpoint of iteration ``at_iter`` is
    written to a file, after ``after_bytes`` bytes, in attempt ``attempt``.

    It arms when that checkpoint is about to be saved (``before_save_checkpoint``):
    the next file opened for writing in binary whose name holds ``iter_{at_iter}.pth``
    (the checkpoint itself, or the temporary file a save writes first) gets a writer
    that dies part-way.

    Args:
        rank: The rank that dies (the one that writes checkpoints: 0).
        at_iter: ``meta['iter']`` of the checkpoint (iterations done when saved).
        after_bytes: Bytes written to the file before the kill.
        attempt: The attempt in which it dies.
    """

    def __init__(self, rank: int = 0, at_iter: int = 1, after_bytes: int = 1 << 16,
                 attempt: int = 0) -> None:
        self.rank, self.at_iter, self.attempt = rank, at_iter, attempt
        self.after_bytes = after_bytes
        self._armed = False

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if (get_rank() != self.rank or checkpoint['meta'].get('iter') != self.at_iter
                or attempt(runner.work_dir) != self.attempt or self._armed):
            return
        self._armed = True
        real_open = builtins.open
        marker = osp.join(runner.work_dir,
                          f'killed-attempt{self.attempt}-rank{self.rank}-save{self.at_iter}')
        limit, name = self.after_bytes, f'iter_{self.at_iter}.pth'

        def killing_open(file: Any, mode: str = 'r', *args: Any, **kwargs: Any) -> Any:
            opened = real_open(file, mode, *args, **kwargs)
            if 'w' in mode and 'b' in mode and name in osp.basename(str(file)):
                return _KillingWriter(opened, limit, marker)
            return opened

        builtins.open = killing_open
