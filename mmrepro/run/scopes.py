"""What a ReproRunner is in the middle of, for the patches that act only then.

Two patches (:mod:`mmrepro.patches`) act for a ReproRunner only, and only during one of
its calls: MMEngine's loader of local checkpoint files loads with mmrepro's allow-list
while a ReproRunner loads a checkpoint (:data:`SAFE_LOADING`), and ``init_dist`` gives
the process group a per-attempt store under torchrun while a ReproRunner sets up its
environment (:data:`RUNNER_SETUP`). The Runner (:mod:`mmrepro.runner`) sets a flag for
the length of the call with :func:`inside`; the patches read it. They are context
variables: another thread's load or set-up is not concerned.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

#: True while a ReproRunner loads a checkpoint (``load_checkpoint``, ``resume``).
SAFE_LOADING = contextvars.ContextVar('mmrepro_safe_loading', default=False)
#: True while a ReproRunner initialises its distributed environment (``setup_env``).
RUNNER_SETUP = contextvars.ContextVar('mmrepro_runner_setup', default=False)


@contextlib.contextmanager
def inside(flag: contextvars.ContextVar[bool]) -> Iterator[None]:
    """Set ``flag`` while the block runs; its value before is back after, on error too."""
    token = flag.set(True)
    try:
        yield
    finally:
        flag.reset(token)
