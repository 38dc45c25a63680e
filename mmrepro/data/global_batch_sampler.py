"""Every rank takes its slices of one global batch stream (see :mod:`.global_stream`)."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List

from ..run.layout import Layout
from .global_stream import Slot, micro_batches
from .seeded_batch_sampler import SeededBatchSampler


class GlobalBatchSampler(SeededBatchSampler):
    """The global stream's batches, this rank's slices of each, every index keyed.

    The batches are drawn from ``global_batches``, a batch sampler built for the whole
    world at the global batch size, and this rank takes its slices of each (``layout``):
    the order, the batching and every sample's key are the same for every number of
    ranks and ``accumulative_counts``. This rank's own batch sampler only says the
    sampler epoch, the batch size and ``drop_last``.

    Its position in a checkpoint counts global batches (optimizer steps):
    ``dict(epoch=e, global_batches=g, global_batch=G)``, plus ``micro_batches=r,
    micro=k`` when this rank is ``r`` of its ``k`` micro-batches into the next one; any
    layout of the same global batch resumes it at a step boundary.

    Args:
        batch_sampler: This rank's batch sampler, as MMEngine built it.
        global_batches: The batch sampler of the global stream.
        layout: This process's place in the global batches (the Runner's, built once
            with the train loader).
        seed: The run's seed (the same on every rank).
        diff_rank_seed: Mix the rank into every key (per-rank augmentation).
        logger: Where warnings go (``print_log``'s ``logger``). Defaults to
            ``'current'``.
        history: How many earlier samples of the stream each index lists in its
            ``history``. Defaults to 0.
    """

    def __init__(self, batch_sampler: Any, global_batches: Any, layout: Layout, seed: int,
                 diff_rank_seed: bool = False, logger: Any = 'current',
                 history: int = 0) -> None:
        super().__init__(batch_sampler, global_batches, seed, layout.rank, diff_rank_seed,
                         logger, history)
        self.global_batches = global_batches
        self.layout = layout
        self._steps_only = False

    def __len__(self) -> int:
        """Micro-batches per epoch (this rank's ``accumulative_counts`` per global batch),
        or optimizer steps inside :meth:`counting_steps`."""
        return len(self.global_batches) * (1 if self._steps_only else self.layout.accumulation)

    @contextlib.contextmanager
    def counting_steps(self) -> Iterator[None]:
        """Inside, ``len`` counts optimizer steps (global batches), not micro-batches.

        MMEngine converts epoch-based parameter schedules with ``len(train_dataloader)``
        and takes no other epoch length; under accumulation that must count optimizer
        steps (:mod:`mmrepro.runner.schedules`).
        """
        self._steps_only = True
        try:
            yield
        finally:
            self._steps_only = False

    def _slots(self, epoch: int) -> Iterator[List[Slot]]:
        global_sampler = getattr(self.global_batches, 'sampler', None)
        if hasattr(global_sampler, 'set_epoch'):
            global_sampler.set_epoch(epoch)
        complete = getattr(global_sampler, 'round_up', True) or self.layout.slices > 1
        yield from micro_batches(self._isolated(epoch), self.layout, self.history,
                                 complete=complete)

    def _state(self, epoch: int, batches: int) -> Dict[str, Any]:
        steps, partial = divmod(batches, self.layout.accumulation)
        state = dict(epoch=epoch, global_batches=steps, global_batch=self.layout.global_batch)
        if partial:
            state.update(micro_batches=partial, micro=self.layout.accumulation)
        return state

    def _accumulation(self, global_batch: int) -> int:
        """This layout's ``accumulation``, for global batches of this run's size only."""
        if global_batch != self.layout.global_batch:
            raise ValueError(
                f"mmrepro: cannot position the train loader: the position counts global "
                f"batches of {global_batch} samples, this run's are "
                f'{self.layout.global_batch}.')
        return self.layout.accumulation
