"""PyTorch's deterministic mode, and the cuBLAS workspace it needs on older CUDA builds.

It reads torch; the ``randomness`` settings that choose it are validated above it
(:mod:`mmrepro.run.settings`).
"""
from __future__ import annotations

import logging
import os
from typing import Optional

import torch
from torch.torch_version import TorchVersion

#: Value of ``CUBLAS_WORKSPACE_CONFIG`` mmrepro sets when torch needs it and it is missing.
CUBLAS_WORKSPACE_DEFAULT = ':4096:8'


#: The first torch release without its ``CUBLAS_WORKSPACE_CONFIG`` check.
CUBLAS_CHECK_DROPPED = '2.10'


def cublas_config_needed_by_version() -> bool:
    """Whether the installed torch, judged by its build, checks ``CUBLAS_WORKSPACE_CONFIG``.

    CPU-only builds never need it. CUDA builds before :data:`CUBLAS_CHECK_DROPPED`
    raise on a cuBLAS call in deterministic mode unless it is set; later ones allocate
    cuBLAS workspaces per handle and stream themselves and dropped the check
    (pytorch/pytorch#161749).
    """
    if torch.version.cuda is None:
        return False
    return TorchVersion(torch.__version__) < CUBLAS_CHECK_DROPPED


def _cublas_config_needed_at_run_time() -> bool:
    """Ask the running torch: does a deterministic cuBLAS matmul raise without the variable?

    Only called once CUDA has started (so the probe starts nothing new).
    """
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        probe = torch.ones(2, 2, device='cuda')
        torch.mm(probe, probe)
    except RuntimeError as err:
        if 'CUBLAS_WORKSPACE_CONFIG' in str(err):
            return True
        raise
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    return False


def prepare_cublas_workspace_config() -> None:
    """Set ``CUBLAS_WORKSPACE_CONFIG`` early, if the installed torch needs it.

    Called when :mod:`mmrepro` is imported: ``Config.fromfile`` imports
    ``custom_imports`` before the Runner exists, and so before ``init_dist`` starts
    CUDA (MMDetection's own launcher). Does nothing if the variable is set, CUDA has
    started, or torch does not need it (:func:`cublas_config_needed_by_version`).
    """
    if os.environ.get('CUBLAS_WORKSPACE_CONFIG') or not cublas_config_needed_by_version():
        return
    if not torch.cuda.is_initialized():
        os.environ['CUBLAS_WORKSPACE_CONFIG'] = CUBLAS_WORKSPACE_DEFAULT


def ensure_cublas_workspace_config() -> None:
    """Make sure deterministic cuBLAS is possible before deterministic mode starts.

    - The variable is set: nothing to do.
    - CUDA has not started: the variable is set if the installed torch needs it
      (:func:`cublas_config_needed_by_version`); cuBLAS reads it when its first handle
      is created.
    - CUDA has started (``init_dist`` calls ``torch.cuda.set_device`` before the
      Runner seeds): the running torch is asked with one deterministic 2x2 matmul; if it
      needs the variable, it is too late to set it and this raises.

    Raises:
        RuntimeError: CUDA is initialised, the variable is missing and this torch
            needs it.
    """
    if os.environ.get('CUBLAS_WORKSPACE_CONFIG'):
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        if _cublas_config_needed_at_run_time():
            raise RuntimeError(
                'deterministic=True needs CUBLAS_WORKSPACE_CONFIG with this torch '
                f'({torch.__version__}) to be set before CUDA starts, but CUDA is already '
                'initialised and the variable is missing. Fix: `export '
                f'CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE_DEFAULT}` before launching, '
                "or add mmrepro to the config's custom_imports (it sets the variable when "
                "imported), or start training with mmrepro's tools/train.py.")
        return
    if cublas_config_needed_by_version():
        os.environ['CUBLAS_WORKSPACE_CONFIG'] = CUBLAS_WORKSPACE_DEFAULT


def set_deterministic(deterministic: bool,
                      warn_only: bool = False,
                      fill_uninitialized_memory: Optional[bool] = None) -> None:
    """Switch PyTorch's deterministic mode on or off.

    Args:
        deterministic: Turn deterministic algorithms and cuDNN determinism on.
        warn_only: With ``deterministic``, warn instead of raising on an op that has
            no deterministic implementation. Defaults to False.
        fill_uninitialized_memory: Set
            ``torch.utils.deterministic.fill_uninitialized_memory``; None keeps
            PyTorch's default (True). A value is validated by the caller
            (:func:`mmrepro.run.settings.check_fill_uninitialized_memory`: a bool, and a
            torch that has it). Defaults to None.
    """
    if not deterministic:
        return
    ensure_cublas_workspace_config()
    if torch.backends.cudnn.benchmark:
        logging.getLogger('mmrepro').warning(
            'torch.backends.cudnn.benchmark was True; set to False for determinism.')
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    if fill_uninitialized_memory is not None:
        import torch.utils.deterministic as torch_deterministic  # torch >= 2.2 (validated)
        torch_deterministic.fill_uninitialized_memory = fill_uninitialized_memory


def has_fill_uninitialized_memory() -> bool:
    """Whether this torch has ``torch.utils.deterministic.fill_uninitialized_memory``."""
    try:
        import torch.utils.deterministic as deterministic
    except ImportError:
        return False
    return hasattr(deterministic, 'fill_uninitialized_memory')
