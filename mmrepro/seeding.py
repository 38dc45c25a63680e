"""Seeding core: validate ``randomness`` settings, draw and broadcast seeds, seed RNGs.

These are the functions MMEngine's ``Runner.set_randomness`` is routed through once
:mod:`mmrepro` is imported (see :mod:`mmrepro.patches`).
"""
from __future__ import annotations

import logging
import os
import random
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np
import torch
from torch.torch_version import TorchVersion

from .cpu_isa import check_cpu_isa

MAX_SEED = 2**32 - 1

#: Accepted keys of the ``randomness`` config dict, with their defaults.
RANDOMNESS_DEFAULTS: Dict[str, Any] = dict(
    seed=None,
    deterministic=False,
    diff_rank_seed=False,
    sample_seeding=True,
    keyed_cache=True,
    global_stream=True,
    global_batch=None,
    warn_only=False,
    strict=False,
    fill_uninitialized_memory=None,
    threads=None,
    cpu_isa=None,
)

#: Value of ``CUBLAS_WORKSPACE_CONFIG`` mmrepro sets when torch needs it and it is missing.
CUBLAS_WORKSPACE_DEFAULT = ':4096:8'
#: The first torch release without its ``CUBLAS_WORKSPACE_CONFIG`` check.
CUBLAS_CHECK_DROPPED = '2.10'

_BOOL_KEYS = ('deterministic', 'diff_rank_seed', 'sample_seeding', 'keyed_cache',
              'global_stream', 'warn_only', 'strict')


def check_seed(seed: Any, key: str = 'randomness.seed') -> int:
    """Return ``seed`` if it is a valid seed, else raise.

    Args:
        seed: The value to check.
        key: Name of the setting, used in the error message.

    Returns:
        int: ``seed`` as a plain ``int``.

    Raises:
        TypeError: ``seed`` is not an int (``bool`` is rejected too).
        ValueError: ``seed`` is outside ``[0, 2**32 - 1]``.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(
            f'{key} must be an int in [0, {MAX_SEED}], got {seed!r} '
            f'({type(seed).__name__}). Set it to a whole number, e.g. '
            f'`randomness=dict(seed=42)` or `--seed 42`.')
    seed = int(seed)
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(
            f'{key} must be in [0, {MAX_SEED}] (2**32 - 1), got {seed}. '
            f'Pick a seed in that range, e.g. `{seed % (MAX_SEED + 1)}`.')
    return seed


def check_flag(value: Any, key: str) -> bool:
    """Return ``value`` if it is a bool, else raise a TypeError naming ``key``."""
    if not isinstance(value, bool):
        raise TypeError(
            f'{key} must be True or False, got {value!r} ({type(value).__name__}). '
            f'Write `{key.split(".")[-1]}=True` or `=False` in the config.')
    return value


def validate_randomness(randomness: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Validate a ``randomness`` config dict and fill in the defaults.

    Args:
        randomness: The ``randomness`` dict of a config (``None`` means empty).

    Returns:
        dict: A new dict with every key of :data:`RANDOMNESS_DEFAULTS`.

    Raises:
        TypeError: ``randomness`` is not a dict, or a value has the wrong type.
        ValueError: an unknown key, or a seed out of range.
    """
    if randomness is None:
        randomness = {}
    if not isinstance(randomness, Mapping):
        raise TypeError(
            f'`randomness` must be a dict such as dict(seed=0, deterministic=True), '
            f'got {randomness!r} ({type(randomness).__name__}).')
    unknown = sorted(set(randomness) - set(RANDOMNESS_DEFAULTS))
    if unknown:
        raise ValueError(
            f'Unknown key(s) {unknown} in `randomness`; accepted keys are '
            f'{sorted(RANDOMNESS_DEFAULTS)}. Check the spelling or remove them.')
    out = dict(RANDOMNESS_DEFAULTS)
    out.update(randomness)
    if out['seed'] is not None:
        out['seed'] = check_seed(out['seed'])
    for key in _BOOL_KEYS:
        check_flag(out[key], f'randomness.{key}')
    check_fill_uninitialized_memory(out['fill_uninitialized_memory'])
    check_threads(out['threads'])
    check_cpu_isa(out['cpu_isa'])
    check_positive(out['global_batch'], 'randomness.global_batch',
                   'samples per optimizer step over all ranks',
                   'Set e.g. `randomness=dict(global_batch=16)`, or remove the key to '
                   'accept any layout.')
    return out


def check_threads(value: Any, key: str = 'randomness.threads') -> None:
    """Raise unless ``value`` is None or a whole number >= 1 (intra-op threads).

    Raises:
        TypeError: not an int.
        ValueError: below 1.
    """
    check_positive(value, key, 'PyTorch intra-op threads per process',
                   'Set e.g. `randomness=dict(threads=1)`, or remove the key to keep '
                   'PyTorch\'s default (OMP_NUM_THREADS, else the number of cores).')


def check_positive(value: Any, key: str, meaning: str, fix: str) -> None:
    """Raise unless ``value`` is None or a whole number >= 1.

    Args:
        value: The value to check.
        key: Name of the setting, used in the error message.
        meaning: What the number counts, for the message.
        fix: How to set it, for the message.

    Raises:
        TypeError: not an int.
        ValueError: below 1.
    """
    if value is None:
        return
    message = f'{key} must be a whole number >= 1 ({meaning}), got {value!r}. {fix}'
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(message)
    if value < 1:
        raise ValueError(message)


def check_fill_uninitialized_memory(value: Optional[bool],
                                    key: str = 'randomness.fill_uninitialized_memory') -> None:
    """Raise unless ``value`` is None, or a bool this torch can apply.

    Raises:
        TypeError: not a bool.
        ValueError: torch < 2.2, which has no ``torch.utils.deterministic``.
    """
    if value is None:
        return
    check_flag(value, key)
    if not has_fill_uninitialized_memory():
        raise ValueError(
            f'{key}={value} needs torch >= 2.2 (torch.utils.deterministic), but torch '
            f'{torch.__version__} is installed. Remove the key to keep this torch\'s '
            'behaviour, or upgrade torch.')


def has_fill_uninitialized_memory() -> bool:
    """Whether this torch has ``torch.utils.deterministic.fill_uninitialized_memory``."""
    try:
        import torch.utils.deterministic as deterministic
    except ImportError:
        return False
    return hasattr(deterministic, 'fill_uninitialized_memory')


def _dist_ready() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def get_rank() -> int:
    """Rank of this process (0 when torch.distributed is not initialised)."""
    return torch.distributed.get_rank() if _dist_ready() else 0


def get_world_size() -> int:
    """World size (1 when torch.distributed is not initialised)."""
    return torch.distributed.get_world_size() if _dist_ready() else 1


def _broadcast_device(device: Optional[Union[str, torch.device]]) -> torch.device:
    if device is not None:
        return torch.device(device)
    if torch.distributed.get_backend() == 'nccl':
        return torch.device('cuda', torch.cuda.current_device())
    return torch.device('cpu')


def init_random_seed(seed: Optional[int] = None,
                     device: Optional[Union[str, torch.device]] = None) -> int:
    """Return the run's seed: ``seed`` if given, else one drawn on rank 0 and broadcast.

    The draw uses the operating system's entropy, not a global RNG, so it does not
    depend on (or disturb) any seeding done earlier in the process. Every rank
    returns rank 0's value. Works without torch.distributed initialised.

    Args:
        seed: A seed to use as is. Defaults to None (draw one).
        device: Device of the broadcast tensor. Defaults to None: ``cuda`` for
            NCCL, ``cpu`` otherwise (gloo, mpi).

    Returns:
        int: A seed in ``[0, 2**32 - 1]``, the same on every rank.
    """
    if seed is not None:
        return check_seed(seed, 'seed')
    drawn = int.from_bytes(os.urandom(4), 'little')
    if not _dist_ready() or get_world_size() == 1:
        return drawn
    tensor = torch.tensor(drawn, dtype=torch.int64, device=_broadcast_device(device))
    torch.distributed.broadcast(tensor, src=0)
    return int(tensor.item())


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
            PyTorch's default (True). Defaults to None.
    """
    if not deterministic:
        return
    check_fill_uninitialized_memory(fill_uninitialized_memory, 'fill_uninitialized_memory')
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


def set_random_seed(seed: int,
                    deterministic: bool = False,
                    diff_rank_seed: bool = False,
                    warn_only: bool = False,
                    fill_uninitialized_memory: Optional[bool] = None) -> int:
    """Seed python ``random``, numpy's global RNG, torch CPU and every CUDA device.

    Args:
        seed: The run's seed, an int in ``[0, 2**32 - 1]``.
        deterministic: Also switch on deterministic algorithms (see
            :func:`set_deterministic`). Defaults to False.
        diff_rank_seed: Add the rank to the seed so each rank draws its own stream.
            Defaults to False.
        warn_only: Passed to :func:`set_deterministic`. Defaults to False.
        fill_uninitialized_memory: Passed to :func:`set_deterministic`.

    Returns:
        int: The seed actually used (``seed + rank`` with ``diff_rank_seed``).
    """
    seed = check_seed(seed, 'seed')
    check_flag(deterministic, 'deterministic')
    check_flag(diff_rank_seed, 'diff_rank_seed')
    if diff_rank_seed:
        seed = (seed + get_rank()) % (MAX_SEED + 1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too (lazily if not started)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    set_deterministic(deterministic, warn_only, fill_uninitialized_memory)
    return seed
