"""A run's process layout: how one process takes its micro-batches from the global batches.

The global batch is ``batch_size x world_size x accumulation`` samples
(``accumulation``: the ``accumulative_counts``, micro-batches per optimizer step);
:mod:`mmrepro.data.global_stream` cuts it into ``world_size x accumulation`` slices, and
rank ``r`` trains on slices ``r x accumulation`` to ``r x accumulation + accumulation - 1``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple


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
