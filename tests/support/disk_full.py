"""A test hook that fills the disk while one checkpoint is written.

``DiskFullHook(name='epoch_3.pth', after_bytes=N)``: the first file opened for writing in
binary whose name holds ``name`` (the checkpoint, or the temporary file a save writes
first) takes ``N`` bytes, then its next write raises ``OSError(ENOSPC)``, as a full
disk does; files opened after that are written as usual.
"""
from __future__ import annotations

import builtins
import errno
import os
import os.path as osp
from typing import Any

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from support.restart_plugin import LimitedWriter


class _FillingWriter(LimitedWriter):
    """A file wrapper whose write fails with ENOSPC once ``limit`` bytes are written."""

    def stop(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@HOOKS.register_module()
class DiskFullHook(Hook):
    """The disk fills while the file named ``name`` is written (see the module).

    Args:
        name: Part of the file's name, e.g. ``epoch_3.pth``.
        after_bytes: Bytes that still fit.
    """

    def __init__(self, name: str, after_bytes: int = 1 << 16) -> None:
        self.name, self.after_bytes = name, after_bytes
        self._real_open = None

    def before_train(self, runner) -> None:
        real_open = self._real_open = builtins.open

        def filling_open(file: Any, mode: str = 'r', *args: Any, **kwargs: Any) -> Any:
            opened = real_open(file, mode, *args, **kwargs)
            if 'w' in mode and 'b' in mode and self.name in osp.basename(str(file)):
                builtins.open = real_open  # once
                return _FillingWriter(opened, self.after_bytes)
            return opened

        builtins.open = filling_open

    def after_run(self, runner) -> None:
        if self._real_open is not None:
            builtins.open = self._real_open
