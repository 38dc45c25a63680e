"""MMEngine's loader of local checkpoint files: mmrepro's while a ReproRunner loads.

This is MMEngine's own extension point, ``CheckpointLoader.register_scheme``, but
schemes hold for the whole process: so :func:`load_from_local` is MMEngine's loader
except while :data:`SAFE_LOADING` is set, which ``ReproRunner.load_checkpoint`` and
``ReproRunner.resume`` do (:mod:`mmrepro.runner.checkpoints`).
"""
from __future__ import annotations

import contextvars

from mmengine.runner.checkpoint import CheckpointLoader

from ..resume.checkpoint_io import safe_load

#: True while a ReproRunner loads a checkpoint (read by the local-file loader).
SAFE_LOADING = contextvars.ContextVar('mmrepro_safe_loading', default=False)

_original_loader = CheckpointLoader._schemes['']


def load_from_local(filename: str, map_location=None):
    """MMEngine's ``''`` scheme loader; inside a ReproRunner's load, mmrepro's.

    mmrepro's (:func:`mmrepro.resume.checkpoint_io.safe_load`) loads with
    ``weights_only=True`` and an allow-list of what MMEngine checkpoints hold, which
    torch >= 2.6 otherwise refuses. Everywhere else MMEngine's loader runs unchanged.
    """
    if SAFE_LOADING.get():
        return safe_load(filename, map_location=map_location)
    return _original_loader(filename, map_location)


def apply() -> None:
    """Register :func:`load_from_local` for the scheme ``''`` (MMEngine's public API)."""
    CheckpointLoader.register_scheme(prefixes='', loader=load_from_local, force=True)
