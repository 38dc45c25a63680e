"""Seeding core: draw and broadcast the run's seed, seed every global RNG.

These are the functions ``ReproRunner.set_randomness`` seeds with
(:mod:`mmrepro.runner.randomness`).
"""
from __future__ import annotations

import os
import random
from typing import Optional, Union

import numpy as np
import torch

from ..determinism.mode import set_deterministic
from ..run.settings import MAX_SEED, check_fill_uninitialized_memory, check_flag, check_seed


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
        fill_uninitialized_memory: Passed to :func:`set_deterministic` (checked here,
            with ``deterministic``: a bool, and a torch that has it).

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
    if deterministic:
        check_fill_uninitialized_memory(fill_uninitialized_memory, 'fill_uninitialized_memory')
    set_deterministic(deterministic, warn_only, fill_uninitialized_memory)
    return seed
