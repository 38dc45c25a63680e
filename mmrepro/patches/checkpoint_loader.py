"""Load local checkpoint files with mmrepro's rules, for Runners that enable mmrepro."""
from __future__ import annotations

import contextvars
import functools
from typing import Any, Callable

from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader

from ..resume.checkpoint_io import safe_load
from ..run.state import enabled

#: True while an enabled Runner loads a checkpoint (read by the local-file loader).
SAFE_LOADING = contextvars.ContextVar('mmrepro_safe_loading', default=False)


def with_safe_loading(method: Callable) -> Callable:
    """Wrap a Runner method so that, for an enabled Runner, loads inside it are mmrepro's."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not enabled(self):
            return method(self, *args, **kwargs)
        token = SAFE_LOADING.set(True)
        try:
            return method(self, *args, **kwargs)
        finally:
            SAFE_LOADING.reset(token)
    return wrapper


_original_loader = CheckpointLoader._schemes['']


def load_from_local(filename: str, map_location=None):
    """MMEngine's ``''`` scheme loader; inside an enabled Runner's load, mmrepro's.

    mmrepro's (:func:`mmrepro.resume.checkpoint_io.safe_load`) loads with
    ``weights_only=True`` and an allow-list of what MMEngine checkpoints hold, which
    torch >= 2.6 otherwise refuses. Everywhere else MMEngine's loader runs unchanged.
    """
    if SAFE_LOADING.get():
        return safe_load(filename, map_location=map_location)
    return _original_loader(filename, map_location)


def apply() -> None:
    """Register :func:`load_from_local` (MMEngine's public API); scope the Runner's loads."""
    CheckpointLoader.register_scheme(prefixes='', loader=load_from_local, force=True)
    Runner.load_checkpoint = with_safe_loading(Runner.load_checkpoint)
    Runner.resume = with_safe_loading(Runner.resume)
