"""A run's process layout: how one process takes its micro-batches from the global batches.

The global batch is ``batch_size x world_size x accumulation`` samples
(``accumulation``: the ``accumulative_counts``, micro-batches per optimizer step);
:mod:`mmrepro.data.global_stream` cuts it into ``world_size x accumulation`` slices, and
rank ``r`` trains on slices ``r x accumulation`` to ``r x accumulation + accumulation - 1``.

:func:`accumulative_counts` reads ``accumulation`` from an optimizer wrapper (a config or
a built one), and :func:`check_global_batch` refuses a layout that misses
``randomness.global_batch``, saying what to set (:func:`global_batch_fix`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple


@dataclass(frozen=True)
class Layout:
    """How one process takes its micro-batches from the global batches.

    Attributes:
        batch_size: Samples per micro-batch (the config's per-rank batch size).
        rank: This process's rank.
        world_size: Number of ranks.
        accumulation: Micro-batches per optimizer step (``accumulative_counts``).
    """

    batch_size: int
    rank: int = 0
    world_size: int = 1
    accumulation: int = 1

    @property
    def slices(self) -> int:
        """Micro-batches per global batch, over all ranks."""
        return self.world_size * self.accumulation

    @property
    def global_batch(self) -> int:
        """Samples per global batch."""
        return self.batch_size * self.slices


def step_and_slice(iteration: int, rank: int, accumulation: int) -> Tuple[int, int]:
    """``(optimizer step, slice of the global batch)`` of a rank's training ``iteration``.

    Args:
        iteration: The Runner's iteration (a micro-batch under accumulation).
        rank: This process's rank.
        accumulation: Micro-batches per optimizer step (``accumulative_counts``).
    """
    step, micro_batch = divmod(iteration, accumulation)
    return step, rank * accumulation + micro_batch


def accumulative_counts(optim_wrapper: Any) -> int:
    """``accumulative_counts`` of a Runner's optimizer wrapper (config or built).

    For several wrappers (``OptimWrapperDict``), their common count; 1 where they
    differ or none is given.
    """
    if isinstance(optim_wrapper, Mapping):
        if 'optimizer' in optim_wrapper or 'type' in optim_wrapper:
            return int(optim_wrapper.get('accumulative_counts', 1))
        counts = {accumulative_counts(value) for value in optim_wrapper.values()}
        return counts.pop() if len(counts) == 1 else 1
    counts = {getattr(wrapper, '_accumulative_counts', 1)
              for wrapper in getattr(optim_wrapper, 'values', lambda: [optim_wrapper])()}
    return int(counts.pop()) if len(counts) == 1 else 1


def check_global_batch(expected: Optional[int], layout: Layout) -> None:
    """Raise unless ``layout`` trains ``expected`` samples per optimizer step.

    Args:
        expected: ``randomness.global_batch`` (None accepts any layout).
        layout: This run's layout.

    Raises:
        ValueError: the layout's global batch differs, saying how to reach
            ``expected`` with this number of ranks (or that no batch size can).
    """
    if expected is None or expected == layout.global_batch:
        return
    raise ValueError(f'randomness.global_batch={expected}, but this run trains '
                     f'{describe(layout)} samples per optimizer step. '
                     f'{global_batch_fix(expected, layout.world_size)}')


def describe(layout: Layout) -> str:
    """``'2 rank(s) x batch_size 2 x accumulative_counts 1 = 4'``."""
    return (f'{layout.world_size} rank(s) x batch_size {layout.batch_size} x '
            f'accumulative_counts {layout.accumulation} = {layout.global_batch}')


def global_batch_fix(expected: int, world_size: int) -> str:
    """What to set so that ``world_size`` ranks train ``expected`` samples per step."""
    if expected % world_size:
        return (f'{expected} is not a multiple of {world_size} ranks, so no batch size gives '
                f'it: launch a number of ranks that divides {expected}.')
    return (f'Set train_dataloader.batch_size x optim_wrapper.accumulative_counts to '
            f'{expected // world_size} for {world_size} rank(s).')
