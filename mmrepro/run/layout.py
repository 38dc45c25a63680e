"""A run's process layout: how one process takes its micro-batches from the global batches.

The global batch is ``batch_size x world_size x micro`` samples (``micro``: the
``accumulative_counts``); :mod:`mmrepro.data.global_stream` cuts it into
``world_size x micro`` slices, and rank ``r`` trains on slices ``r x micro`` to
``r x micro + micro - 1``.
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
        micro: Micro-batches per optimizer step (``accumulative_counts``).
    """

    batch_size: int
    rank: int = 0
    world_size: int = 1
    micro: int = 1

    @property
    def slices(self) -> int:
        """Micro-batches per global batch, over all ranks."""
        return self.world_size * self.micro

    @property
    def global_batch(self) -> int:
        """Samples per global batch."""
        return self.batch_size * self.slices


def step_and_slice(iteration: int, rank: int, micro: int) -> Tuple[int, int]:
    """``(optimizer step, slice of the global batch)`` of a rank's training ``iteration``.

    Args:
        iteration: The Runner's iteration (a micro-batch under accumulation).
        rank: This process's rank.
        micro: Micro-batches per optimizer step (``accumulative_counts``).
    """
    step, micro_index = divmod(iteration, micro)
    return step, rank * micro + micro_index
