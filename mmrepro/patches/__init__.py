"""Every change mmrepro makes to MMEngine / MMDetection, applied in one place.

:func:`apply_patches` runs once, on ``import mmrepro``. What it changes (also listed
in README, "What importing mmrepro patches"):

1. ``Runner.set_randomness`` goes through :func:`mmrepro.seeding.set_random_seed`
   (validation, a seed that is never None, deterministic mode done fully) --
   :mod:`.runner_randomness`.
2. ``Runner.build_dataloader``, when called on a Runner, makes every loader
   reproducible (:func:`mmrepro.data.make_reproducible`) -- :mod:`.runner_dataloader`.
3. ``EpochBasedTrainLoop.run_epoch`` numbers the batches of a resumed, partly done
   epoch from where it stopped instead of 0 -- :mod:`.epoch_loop`.
4. MMEngine's loader for local checkpoint files loads with ``weights_only=True``
   and mmrepro's allow-list -- :mod:`.checkpoint_loader`.
5. ``mmdet.apis.init_random_seed`` / ``set_random_seed`` exist again (MMDetection
   2.x names) -- :mod:`.mmdet_apis`.
"""
from __future__ import annotations

_APPLIED = False


def apply_patches() -> None:
    """Apply every patch; calling it again does nothing."""
    global _APPLIED
    if _APPLIED:
        return
    from . import checkpoint_loader, epoch_loop, mmdet_apis, runner_dataloader, runner_randomness
    runner_randomness.apply()
    runner_dataloader.apply()
    epoch_loop.apply()
    checkpoint_loader.apply()
    mmdet_apis.apply()
    _APPLIED = True
