"""``ReproRunner.setup_env`` and ``wrap_model``: its process group, DDP's settings fixed.

The process group is set up by MMEngine's ``init_dist``, which mmrepro makes work
without CUDA and, under torchrun's agent store, per restart attempt
(:mod:`mmrepro.patches.distributed`); the per-attempt store is for the process groups
of ReproRunners only (:data:`~mmrepro.run.scopes.RUNNER_SETUP`).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch

from ..run.scopes import RUNNER_SETUP, inside
from ..run.state import run_state

#: DDP settings that change bitwise results (bucket layout, buffer syncs), made explicit.
DDP_DEFAULTS: Dict[str, Any] = dict(type='MMDistributedDataParallel', broadcast_buffers=False,
                                    find_unused_parameters=False, bucket_cap_mb=25)


class DistributedMixin:
    """The Runner's ``setup_env`` and ``wrap_model`` (a part of ``ReproRunner``)."""

    def setup_env(self: Any, env_cfg: Dict) -> None:
        """``Runner.setup_env``, marking the process-group set-up as a ReproRunner's."""
        with inside(RUNNER_SETUP):
            return super().setup_env(env_cfg)

    def wrap_model(self: Any, model_wrapper_cfg: Optional[Dict], model: Any) -> Any:
        """``Runner.wrap_model`` with explicit DDP settings (and no device_ids on CPU).

        Without a ``model_wrapper_cfg``, a distributed run gets :data:`DDP_DEFAULTS`
        (``find_unused_parameters`` from the config); the settings DDP is built with go
        into the run record.
        """
        if self.distributed and model_wrapper_cfg is None:
            model_wrapper_cfg = dict(DDP_DEFAULTS, find_unused_parameters=self.cfg.get(
                'find_unused_parameters', False))
        if self.distributed and isinstance(model_wrapper_cfg, dict):
            model_wrapper_cfg = dict(model_wrapper_cfg)
            if not torch.cuda.is_available():
                model_wrapper_cfg.setdefault('device_ids', None)
            run_state(self).ddp = {k: v for k, v in model_wrapper_cfg.items()
                                   if isinstance(v, (str, int, float, bool, type(None)))}
        return super().wrap_model(model_wrapper_cfg, model)
