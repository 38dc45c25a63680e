"""The model's own random draws, keyed by the global micro-batch they serve.

Inside a training step the model draws from the process's global RNGs: RPN and R-CNN
``RandomSampler`` (``torch.randperm``), dropout, DINO's denoising-query noise,
batch-level augments of the data preprocessor (``BatchSyncRandomResize`` draws from
python ``random``). Left alone, these streams follow the process: rank 1 of a 2-rank
run and the second micro-batch of one process with ``accumulative_counts=2`` draw
from different states although they train on the same samples.

Before every training iteration, :func:`seed_step` seeds python ``random``, numpy's
global RNG, torch's CPU generator and the current CUDA device's generator from the
key ``(seed, optimizer step, slice)``, where ``slice = rank x k + micro-batch`` is the
micro-batch's place in the global batch (:mod:`mmrepro.data.global_stream`). So each
draw depends on which data it serves, not on which process serves it, and a resumed
run draws what the uninterrupted one drew without any saved RNG state.
"""
from __future__ import annotations

import torch

from ..run.layout import step_and_slice
from .host_state import seed_host_rngs
from .keys import MODEL, derive_seed


def step_key(seed: int, iteration: int, rank: int, accumulation: int) -> tuple:
    """``(MODEL, seed, optimizer step, slice)`` of a rank's training ``iteration``.

    Args:
        seed: The run's seed.
        iteration: The Runner's iteration (a micro-batch under accumulation).
        rank: This process's rank.
        accumulation: Micro-batches per optimizer step (``accumulative_counts``).
    """
    return (MODEL, seed, *step_and_slice(iteration, rank, accumulation))


def seed_step(key: tuple) -> None:
    """Seed every global RNG a training step may draw from with ``key``."""
    seed_host_rngs(key)
    if torch.cuda.is_initialized():  # False without CUDA, or before CUDA started
        torch.cuda.manual_seed(derive_seed(*key))
