"""MMEngine's loader of local checkpoint files: mmrepro's while a ReproRunner loads.

This is MMEngine's own extension point, ``CheckpointLoader.register_scheme``, but
schemes hold for the whole process: so :func:`load_from_local` is MMEngine's loader
except while :data:`~mmrepro.run.scopes.SAFE_LOADING` is set, which
``ReproRunner.load_checkpoint`` and ``ReproRunner.resume`` do.
"""
from __future__ import annotations

from mmengine.runner.checkpoint import CheckpointLoader

from ..resume.checkpoint_io import safe_load
from ..run.scopes import SAFE_LOADING

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
