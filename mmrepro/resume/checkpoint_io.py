"""Load MMEngine checkpoints safely on every supported torch.

``torch.load`` refuses MMEngine's own checkpoints under ``weights_only=True``:
the message hub holds ``HistoryBuffer`` objects and numpy arrays. Rather than
falling back to loading arbitrary pickles, mmrepro allow-lists exactly the globals
its checkpoints contain (:func:`mmrepro.resume.safe_unpickler.allowed_globals`) for the duration
of each load: through ``torch.serialization.safe_globals`` where it takes that list
(torch 2.6+), otherwise through a restricted unpickler with the same allow-list
(:mod:`mmrepro.resume.safe_unpickler`, which owns both).
"""
from __future__ import annotations

import os.path as osp
import pickle
import threading
from typing import Any, Callable, Optional, Union

import torch

from .safe_unpickler import allowed_globals, has_safe_globals, torch_load_restricted

#: ``torch.serialization.safe_globals`` edits one process-wide list and its exit removes
#: the entries, so two loads in threads would drop each other's allow-list: one at a time.
_SAFE_GLOBALS_LOCK = threading.Lock()


class CheckpointLoadError(ValueError):
    """A checkpoint could not be read: missing, truncated, corrupt or unsafe."""


def safe_load(filename: str, map_location: Union[str, Callable, None] = 'cpu',
              mmap: bool = False) -> Any:
    """Load a checkpoint with ``weights_only=True`` and mmrepro's allow-list.

    Args:
        filename: Path of a local checkpoint file.
        map_location: As for :func:`torch.load`. Defaults to ``'cpu'``.
        mmap: Memory-map tensors instead of reading them (cheap peeking).

    Returns:
        The loaded checkpoint.

    Raises:
        CheckpointLoadError: the file is missing, not a complete checkpoint, or
            holds an object outside the allow-list.
    """
    filename = osp.expanduser(filename)
    if osp.isdir(filename):
        raise CheckpointLoadError(
            f'Checkpoint {filename!r} is a directory, not a checkpoint file. Give one of '
            'its .pth files to --resume / load_from.')
    if not osp.isfile(filename):
        raise CheckpointLoadError(
            f'Checkpoint {filename!r} does not exist. Check the path given to '
            '--resume / load_from.')
    _check_format(filename)
    try:
        if not has_safe_globals():
            return torch_load_restricted(filename, map_location, mmap)
        with _SAFE_GLOBALS_LOCK, torch.serialization.safe_globals(allowed_globals()):
            return torch.load(filename, map_location=map_location, weights_only=True,
                              mmap=mmap)
    except pickle.UnpicklingError as err:
        raise CheckpointLoadError(
            f'Checkpoint {filename!r} holds an object mmrepro does not load: '
            f'{_unsupported(err)}. Checkpoints written by MMEngine/mmrepro load safely; '
            'this one may come from another tool or have been tampered with. If you '
            'trust the file and its origin, convert it with '
            'torch.load(..., weights_only=False) yourself; mmrepro never unpickles '
            'arbitrary objects.') from err
    except (RuntimeError, EOFError, OSError) as err:
        raise CheckpointLoadError(
            f'Checkpoint {filename!r} cannot be read ({_first_line(err)}); it is '
            'probably truncated (a run killed while saving) or corrupt. Resume from '
            'an earlier checkpoint; nothing was written.') from err


#: How a file ``torch.save`` wrote begins: a zip archive (torch >= 1.6), or the pickled
#: magic number of the legacy format (pickle protocol 2 or later: opcode PROTO, 0x80).
ZIP_START, LEGACY_START = b'PK\x03\x04', b'\x80'


def _check_format(filename: str) -> None:
    """Refuse a file that is not a ``torch.save`` file at all (so not a damaged one).

    Raises:
        CheckpointLoadError: It cannot be opened, or begins as no file ``torch.save``
            writes.
    """
    head = _head(filename)
    if not head.startswith((ZIP_START, LEGACY_START)):
        what = 'is empty' if not head else f'begins with {head!r}'
        raise CheckpointLoadError(
            f'Checkpoint {filename!r} is not a PyTorch checkpoint: it {what}, expected a '
            "file torch.save wrote (a zip archive, beginning with b'PK'). Check the path.")


def peek(filename: str) -> Optional[dict]:
    """Load a checkpoint with its tensors memory-mapped (read lazily).

    Files in torch's legacy format (``_use_new_zipfile_serialization=False``) cannot be
    memory-mapped: they are read whole.
    """
    zipped = osp.isfile(osp.expanduser(filename)) and _head(filename).startswith(ZIP_START)
    return safe_load(filename, map_location='cpu', mmap=zipped)


def _head(filename: str) -> bytes:
    """The first four bytes of ``filename``.

    Raises:
        CheckpointLoadError: It cannot be opened.
    """
    try:
        with open(osp.expanduser(filename), 'rb') as f:
            return f.read(4)
    except OSError as err:
        raise CheckpointLoadError(f'Checkpoint {filename!r} cannot be opened ({err}); check '
                                  'its permissions.') from None


def _unsupported(err: BaseException) -> str:
    """The useful line of torch's weights_only refusal (what it refused)."""
    boilerplate = ('Weights only load failed', 'Please file an issue', 'Check the documentation',
                   '(1)', '(2)', 'In PyTorch 2.6')
    for line in str(err).splitlines():
        line = line.strip()
        if line.startswith('WeightsUnpickler error:'):
            line = line[len('WeightsUnpickler error:'):].strip()
        if line and not line.startswith(boilerplate):
            return line.rstrip(".")
    return _first_line(err)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
