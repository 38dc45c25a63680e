"""Multi-process training on CPU (gloo) and DDP settings that are fixed and recorded."""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional

import torch
import torch.distributed as torch_dist
from mmengine.dist import utils as dist_utils
from mmengine.logging import print_log
from mmengine.runner import Runner

from .scope import enabled

#: Runner attribute holding the DDP settings used (for the run record).
DDP_ATTR = '_mmrepro_ddp'
#: DDP settings that change bitwise results (bucket layout, buffer syncs), made explicit.
DDP_DEFAULTS: Dict[str, Any] = dict(type='MMDistributedDataParallel', broadcast_buffers=False,
                                    find_unused_parameters=False, bucket_cap_mb=25)

_original_init_dist_pytorch = dist_utils._init_dist_pytorch
_original_wrap_model = Runner.wrap_model


def _init_dist_pytorch(backend: str, init_backend: str = 'torch', **kwargs: Any) -> None:
    """MMEngine's ``_init_dist_pytorch``, also on machines without an accelerator.

    MMEngine calls ``torch.cuda.set_device`` unconditionally, which fails on CPU. Without
    CUDA this initialises the process group directly, with gloo in place of NCCL.
    """
    if torch.cuda.is_available() or init_backend != 'torch' or _other_accelerator():
        return _original_init_dist_pytorch(backend, init_backend=init_backend, **kwargs)
    if backend == 'nccl':
        print_log('mmrepro: no CUDA device, using the gloo backend instead of nccl.',
                  logger='current', level=logging.WARNING)
        backend = 'gloo'
    torch_dist.init_process_group(backend=backend, **kwargs)


def _other_accelerator() -> bool:
    from mmengine.device import is_mlu_available, is_musa_available, is_npu_available
    return is_mlu_available() or is_npu_available() or is_musa_available()


def wrap_model(self: Runner, model_wrapper_cfg: Optional[Dict], model: Any) -> Any:
    """``Runner.wrap_model`` with explicit DDP settings (and no device_ids on CPU).

    For a Runner that does not enable mmrepro it is MMEngine's, unchanged.
    """
    if not enabled(self):
        return _original_wrap_model(self, model_wrapper_cfg, model)
    if self.distributed and model_wrapper_cfg is None:
        model_wrapper_cfg = dict(DDP_DEFAULTS, find_unused_parameters=self.cfg.get(
            'find_unused_parameters', False))
    if self.distributed and isinstance(model_wrapper_cfg, dict):
        model_wrapper_cfg = dict(model_wrapper_cfg)
        if not torch.cuda.is_available():
            model_wrapper_cfg.setdefault('device_ids', None)
        setattr(self, DDP_ATTR, {k: v for k, v in model_wrapper_cfg.items()
                                 if isinstance(v, (str, int, float, bool, type(None)))})
    return _original_wrap_model(self, model_wrapper_cfg, model)


def apply() -> None:
    """Install both patches."""
    dist_utils._init_dist_pytorch = _init_dist_pytorch
    Runner.wrap_model = wrap_model
