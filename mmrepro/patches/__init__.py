"""The changes mmrepro makes where MMEngine, mmcv and MMDetection offer no extension point.

Everything mmrepro changes in a Runner is a method of
:class:`~mmrepro.runner.ReproRunner` (registered in ``RUNNERS``), with its loop and hooks
registered in ``LOOPS`` and ``HOOKS``. What is left is applied here, once, on ``import
mmrepro``; docs/internals.md lists each replaced attribute with the reason no extension
point serves it, and a test holds the list:

1. ``Runner.__new__`` constructs a ``ReproRunner`` where a config or keyword arguments
   enable mmrepro without naming it -- :mod:`mmrepro.runner.entry`.
2. MMEngine's loader for local checkpoint files (scheme ``''``) loads with
   ``weights_only=True`` and mmrepro's allow-list while a ReproRunner's
   ``load_checkpoint`` or ``resume`` runs -- :mod:`.checkpoint_scheme`.
3. ``init_dist('pytorch')`` and ``init_dist('slurm')`` work without CUDA (gloo instead
   of NCCL, no ``cuda.set_device``); under torchrun with the agent's store, a
   ReproRunner's process group uses that store under a per-attempt prefix, so a
   restarted group never reads the dead group's addresses -- :mod:`.distributed`.
4. ``mmdet.apis.init_random_seed`` / ``set_random_seed`` exist again (MMDetection 2.x
   names) -- :mod:`.mmdet_apis`.
5. ``mmengine.config.utils.MODULE2PACKAGE`` gains ``'mmrepro'``, so that configs can
   inherit ``mmrepro::`` paths -- :mod:`mmrepro.configs`.
"""
from __future__ import annotations

_APPLIED = False


def apply_patches() -> None:
    """Apply every patch; calling it again does nothing."""
    global _APPLIED
    if _APPLIED:
        return
    from ..runner import entry
    from . import checkpoint_scheme, distributed, mmdet_apis
    entry.install()
    checkpoint_scheme.apply()
    mmdet_apis.apply()
    distributed.apply()
    _APPLIED = True
