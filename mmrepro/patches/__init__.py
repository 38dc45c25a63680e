"""Every change mmrepro makes to MMEngine / MMDetection, applied in one place.

:func:`apply_patches` runs once, on ``import mmrepro``. Each patch acts only for a
Runner whose config enables mmrepro (:mod:`mmrepro.run.enable`: ``custom_imports``
naming ``mmrepro``, or ``ReproducibilityHook`` in ``custom_hooks``); any other Runner
runs MMEngine's code unchanged. What they change (also listed in docs/internals.md):

1. ``Runner.set_randomness`` goes through :func:`mmrepro.rng.seeding.set_random_seed`
   (validation, a seed that is never None, deterministic mode done fully) --
   :mod:`.runner_randomness`.
2. ``Runner.build_dataloader``, when called on a Runner, makes every loader
   reproducible (:func:`mmrepro.data.make_reproducible`) -- :mod:`.runner_dataloader`.
3. ``EpochBasedTrainLoop.run_epoch`` numbers the batches of a resumed, partly done
   epoch from where it stopped instead of 0 -- :mod:`.epoch_loop`.
4. MMEngine's loader for local checkpoint files loads with ``weights_only=True``
   and mmrepro's allow-list while an enabled Runner's ``load_checkpoint`` or
   ``resume`` runs -- :mod:`.checkpoint_loader`.
5. ``mmdet.apis.init_random_seed`` / ``set_random_seed`` exist again (MMDetection
   2.x names) -- :mod:`.mmdet_apis`.
6. ``init_dist('pytorch')`` and ``init_dist('slurm')`` work without CUDA (gloo instead
   of NCCL, no ``cuda.set_device``); under torchrun with the agent's store, an enabled
   Runner's process group uses that store under a per-attempt prefix, so a restarted
   group never reads the dead group's addresses; and ``Runner.wrap_model`` builds DDP
   with explicit settings (``broadcast_buffers=False``, ``bucket_cap_mb=25``, ...) that
   the run record keeps -- :mod:`.distributed`.
7. ``Runner.build_model``, in deterministic mode, audits the model for mmcv ops that
   are nondeterministic on CUDA and replaces ``mmcv.ops.RoIAlign`` with
   :class:`mmrepro.ops.DeterministicRoIAlign` -- :mod:`.model_audit`.
8. ``Runner.__init__`` records its ``custom_hooks``/``resume``/``load_from``
   arguments (a Runner built with keyword arguments has an empty ``cfg``), and
   ``Runner.register_hooks`` adds ``ReproducibilityHook`` where an enabled config
   lacks it -- :mod:`.runner_init`.
9. ``mmengine.config.utils.MODULE2PACKAGE`` gains ``'mmrepro'``, so that configs can
   inherit ``mmrepro::`` paths -- :mod:`mmrepro.configs`.
10. Under gradient accumulation with the global stream, ``Runner.build_param_scheduler``
    converts epochs with optimizer steps per epoch and ``ParamSchedulerHook``
    steps iteration-based schedules once per optimizer step -- :mod:`.step_clock`.
11. ``Runner.scale_lr`` (``auto_scale_lr``, ``--auto-scale-lr``) scales by the global
    batch, ``batch_size x ranks x accumulative_counts``, instead of ``batch_size x
    ranks`` -- :mod:`.auto_scale_lr`.
12. ``Runner.save_checkpoint`` and ``CheckpointHook`` save atomically: a local checkpoint
    goes to a temporary file in its directory, is fsynced and renamed onto its name,
    and ``last_checkpoint`` is written the same way after it -- :mod:`.atomic_save`.
"""
from __future__ import annotations

_APPLIED = False


def apply_patches() -> None:
    """Apply every patch; calling it again does nothing."""
    global _APPLIED
    if _APPLIED:
        return
    from . import (
        atomic_save,
        auto_scale_lr,
        checkpoint_loader,
        distributed,
        epoch_loop,
        mmdet_apis,
        model_audit,
        runner_dataloader,
        runner_init,
        runner_randomness,
        step_clock,
    )
    runner_init.apply()
    runner_randomness.apply()
    runner_dataloader.apply()
    epoch_loop.apply()
    checkpoint_loader.apply()
    mmdet_apis.apply()
    distributed.apply()
    model_audit.apply()
    step_clock.apply()
    auto_scale_lr.apply()
    atomic_save.apply()
    _APPLIED = True
