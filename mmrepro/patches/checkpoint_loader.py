"""Route MMEngine's local checkpoint loading through :func:`mmrepro.checkpoint_io.safe_load`."""
from __future__ import annotations

from mmengine.runner.checkpoint import CheckpointLoader

from ..checkpoint_io import safe_load


def load_from_local(filename: str, map_location=None):
    """MMEngine's ``''`` scheme loader, with ``weights_only=True`` and an allow-list."""
    return safe_load(filename, map_location=map_location)


def apply() -> None:
    """Register :func:`load_from_local` for plain file paths (MMEngine's public API)."""
    CheckpointLoader.register_scheme(prefixes='', loader=load_from_local, force=True)
