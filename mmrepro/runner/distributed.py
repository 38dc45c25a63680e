"""The Runner's process group and DDP: a per-attempt store, DDP's settings made explicit.

The process group is set up by MMEngine's ``init_dist``, which mmrepro makes work
without CUDA and, under torchrun's agent store, per restart attempt
(:mod:`mmrepro.patches.distributed`); the per-attempt store is for the process groups
of ReproRunners only: ``ReproRunner.setup_env`` sets
:data:`~mmrepro.run.scopes.RUNNER_SETUP` while it runs. ``ReproRunner.wrap_model``
builds DDP with :func:`ddp_config`.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch
from mmengine.runner import Runner

from ..run.state import run_state

#: DDP settings that change bitwise results (bucket layout, buffer syncs), made explicit.
DDP_DEFAULTS: Dict[str, Any] = dict(type='MMDistributedDataParallel', broadcast_buffers=False,
                                    find_unused_parameters=False, bucket_cap_mb=25)


def ddp_config(runner: Runner, model_wrapper_cfg: Optional[Dict]) -> Optional[Dict]:
    """The ``model_wrapper_cfg`` to give MMEngine's ``Runner.wrap_model``.

    Without one, a distributed run gets :data:`DDP_DEFAULTS` (``find_unused_parameters``
    from the config); without CUDA, no ``device_ids``. The settings DDP is built with go
    into the run record. A run that is not distributed gets ``model_wrapper_cfg`` as it is.
    """
    if runner.distributed and model_wrapper_cfg is None:
        model_wrapper_cfg = dict(DDP_DEFAULTS, find_unused_parameters=runner.cfg.get(
            'find_unused_parameters', False))
    if runner.distributed and isinstance(model_wrapper_cfg, dict):
        model_wrapper_cfg = dict(model_wrapper_cfg)
        if not torch.cuda.is_available():
            model_wrapper_cfg.setdefault('device_ids', None)
        run_state(runner).ddp = {k: v for k, v in model_wrapper_cfg.items()
                                 if isinstance(v, (str, int, float, bool, type(None)))}
    return model_wrapper_cfg
