"""MMEngine's ``init_dist`` on CPU (gloo) and across torchrun restarts.

No registry chooses how ``mmengine.dist.init_dist`` starts a process group: it calls the
private ``_init_dist_pytorch`` / ``_init_dist_slurm`` by launcher name, from
``Runner.setup_env`` or from a script before any Runner exists. So both are replaced:
without CUDA they initialise the process group with gloo instead of failing in
``torch.cuda.set_device``.

torchrun's static rendezvous keeps the agent's TCPStore across worker restarts and, with
``TORCHELASTIC_USE_AGENT_STORE=True``, torch 2.13 gives the workers' process group no
per-attempt key prefix: restarted ranks can read the dead group's addresses and hang in
``init_process_group`` or fail with "Connection refused". For a ReproRunner, the
process group of such a launch gets a client of the agent's store under
``/worker/attempt_{TORCHELASTIC_RESTART_COUNT}`` (torch 2.1's own prefix), while
:data:`~mmrepro.run.scopes.RUNNER_SETUP` says a ReproRunner sets up its environment.
"""
from __future__ import annotations

import logging
import os
import subprocess
from typing import Any, Dict, Optional

import torch
import torch.distributed as torch_dist
from mmengine.dist import utils as dist_utils
from mmengine.logging import print_log

from ..run.scopes import RUNNER_SETUP

_original_init_dist_pytorch = dist_utils._init_dist_pytorch
_original_init_dist_slurm = dist_utils._init_dist_slurm



def _init_dist_pytorch(backend: str, init_backend: str = 'torch', **kwargs: Any) -> None:
    """MMEngine's ``_init_dist_pytorch``, also on machines without an accelerator.

    MMEngine calls ``torch.cuda.set_device`` unconditionally, which fails on CPU. Without
    CUDA this initialises the process group directly, with gloo in place of NCCL. While
    a ReproRunner sets up its environment, a torchrun launch with the agent store
    gets :func:`attempt_store_kwargs`.
    """
    if (init_backend == 'torch' and not _other_accelerator() and RUNNER_SETUP.get()
            and not {'init_method', 'store'} & set(kwargs)):
        kwargs = {**kwargs, **attempt_store_kwargs(kwargs.get('timeout'))}
    if torch.cuda.is_available() or init_backend != 'torch' or _other_accelerator():
        return _original_init_dist_pytorch(backend, init_backend=init_backend, **kwargs)
    torch_dist.init_process_group(backend=_cpu_backend(backend), **kwargs)


def attempt_store_kwargs(timeout: Any = None) -> Dict[str, Any]:
    """``store``, ``rank`` and ``world_size`` for ``init_process_group`` under torchrun's
    agent store: a client of that store, prefixed by the restart count.

    Empty where the launch is not torchrun with ``TORCHELASTIC_USE_AGENT_STORE=True``
    (its rendezvous is then torch's own, unchanged).

    Args:
        timeout: The process group's timeout (``datetime.timedelta``); None for torch's
            default.
    """
    if os.environ.get('TORCHELASTIC_USE_AGENT_STORE') != str(True):
        return {}
    from torch.distributed.constants import default_pg_timeout
    store = torch_dist.TCPStore(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']),
                                is_master=False, timeout=timeout or default_pg_timeout)
    attempt = os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')
    return dict(store=torch_dist.PrefixStore(f'/worker/attempt_{attempt}', store),
                rank=int(os.environ['RANK']), world_size=int(os.environ['WORLD_SIZE']))


def _init_dist_slurm(backend: str, port: Optional[int] = None, init_backend: str = 'torch',
                     **kwargs: Any) -> None:
    """MMEngine's ``_init_dist_slurm``, also on machines without an accelerator.

    MMEngine calls ``torch.cuda.set_device`` unconditionally, which fails on CPU.
    Without CUDA this sets the same environment as MMEngine (the first host of
    ``SLURM_NODELIST`` from ``scontrol`` unless ``MASTER_ADDR`` is set, ``MASTER_PORT``
    from ``port``, the environment or 29500, ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``)
    and initialises the process group with gloo in place of NCCL.
    """
    if torch.cuda.is_available() or init_backend != 'torch' or _other_accelerator():
        return _original_init_dist_slurm(backend, port=port, init_backend=init_backend,
                                         **kwargs)
    if port is not None:
        os.environ['MASTER_PORT'] = str(port)
    os.environ.setdefault('MASTER_PORT', '29500')
    if 'MASTER_ADDR' not in os.environ:
        nodes = os.environ['SLURM_NODELIST']
        os.environ['MASTER_ADDR'] = subprocess.getoutput(
            f'scontrol show hostname {nodes} | head -n1')
    os.environ['WORLD_SIZE'] = os.environ['SLURM_NTASKS']
    os.environ['RANK'] = os.environ['SLURM_PROCID']
    os.environ['LOCAL_RANK'] = os.environ.get('SLURM_LOCALID', '0')
    torch_dist.init_process_group(backend=_cpu_backend(backend), **kwargs)


def _cpu_backend(backend: str) -> str:
    if backend != 'nccl':
        return backend
    print_log('mmrepro: no CUDA device, using the gloo backend instead of nccl.',
              logger='current', level=logging.WARNING)
    return 'gloo'


def _other_accelerator() -> bool:
    """Whether an accelerator MMEngine knows besides CUDA is present (MLU, NPU, MUSA).

    Each check is looked up by name: MMEngine before 0.10.4 has no ``is_musa_available``.
    """
    from mmengine import device
    return any(getattr(device, name, lambda: False)() for name in (
        'is_mlu_available', 'is_npu_available', 'is_musa_available'))


def apply() -> None:
    """Install the patches of this module."""
    dist_utils._init_dist_pytorch = _init_dist_pytorch
    dist_utils._init_dist_slurm = _init_dist_slurm
