"""Each rank batches its own share, as MMEngine does; every index keyed by its place."""
from __future__ import annotations

from collections import deque
from typing import Any, Dict, Iterator, List

from .data_position import rank_position
from .global_stream import Slot
from .seeded_batch_sampler import SeededBatchSampler


class RankBatchSampler(SeededBatchSampler):
    """This rank's batch sampler, decided exactly as before, its indices keyed.

    Sample ``n`` of this rank in an epoch is at stream position ``n x world_size +
    rank``; a batch sampler whose ``global_order`` is true (evaluation's
    :class:`~mmrepro.data.eval_batch_sampler.EvalBatchSampler`) puts index ``i`` at
    position ``i`` on every layout. Its position in a checkpoint counts this rank's batches
    (``dict(epoch, batches, unit='rank')``), which only the same layout resumes.

    Args:
        batch_sampler: The batch sampler to wrap.
        seed: The run's seed (the same on every rank).
        rank: This process's rank.
        world_size: Number of ranks.
        diff_rank_seed: Mix the rank into every key (per-rank augmentation).
        logger: Where warnings go (``print_log``'s ``logger``). Defaults to
            ``'current'``.
        history: How many earlier samples of the epoch each index lists in its
            ``history`` (the look-back of the pipeline's keyed caches). Defaults to 0.
    """

    def __init__(self, batch_sampler: Any, seed: int, rank: int = 0, world_size: int = 1,
                 diff_rank_seed: bool = False, logger: Any = 'current',
                 history: int = 0) -> None:
        super().__init__(batch_sampler, batch_sampler, seed, rank, diff_rank_seed, logger,
                         history)
        self.world_size = world_size
        self._global_order = getattr(batch_sampler, 'global_order', False) is True

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def _slots(self, epoch: int) -> Iterator[List[Slot]]:
        local = 0
        # (position, index) of this rank's latest samples; skipped batches count too.
        earlier: deque = deque(maxlen=self.history)
        for batch in self._isolated(epoch):
            slots = []
            for index in batch:
                position = (int(index) if self._global_order
                            else local * self.world_size + self.rank)
                slots.append((position, int(index), tuple(earlier)))
                if self.history:
                    earlier.append((position, int(index)))
                local += 1
            yield slots

    def _state(self, epoch: int, batches: int) -> Dict[str, Any]:
        return rank_position(epoch, batches)

    def _accumulation(self, global_batch: int) -> int:
        """``global_batch / (batch_size x world_size)``: this rank's batches per global
        batch."""
        per_step = self.batch_size * self.world_size if isinstance(self.batch_size, int) else 0
        if not per_step or global_batch % per_step:
            raise ValueError(
                f"mmrepro: cannot position the train loader: the position counts global "
                f"batches of {global_batch} samples, which this loader's per-rank batches "
                'do not divide.')
        return global_batch // per_step
