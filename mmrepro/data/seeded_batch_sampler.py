"""A batch-sampler wrapper that tags every index with its per-sample seed key."""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Iterator, List, Optional, Tuple

from mmengine.logging import print_log

from .rng_state import IsolatedHostRNGs
from .sampler_isolation import needs_isolation
from .seeded_index import SeededIndex
from .seeds import SAMPLER, sample_key


class SeededBatchSampler:
    """Wrap a DataLoader's batch sampler; yield :class:`SeededIndex` batches.

    The wrapped batch sampler (torch's ``BatchSampler`` or mmdet's
    ``AspectRatioBatchSampler``) decides order and batching exactly as before; this
    wrapper only attaches to each index the key ``(seed, epoch, global position,
    index[, rank])``. The epoch is the inner sampler's ``epoch`` attribute (set by
    ``DistSamplerSeedHook``), or 0 for samplers without one (one infinite stream).

    Unless every sampler in it is known to draw only from its own generator
    (:func:`~mmrepro.data.sampler_isolation.needs_isolation`), the wrapped batch
    sampler runs with host RNGs of its own, seeded from ``(seed, epoch)``: samplers
    that draw from global ``np.random`` (mmdet's ``GroupMultiSourceSampler``) or the
    global torch RNG (torch's ``RandomSampler`` without a generator) get an order
    that depends on ``(seed, epoch)`` only, and do not shift the model's draws in the
    main process.

    It can also be positioned for resume: :meth:`resume_at` makes the next pass
    skip batches at the index level, without loading or augmenting them.

    Args:
        batch_sampler: The batch sampler to wrap.
        seed: The run's seed (the same on every rank).
        rank: This process's rank.
        world_size: Number of ranks.
        diff_rank_seed: Mix the rank into every key (per-rank augmentation).
        history: How many earlier samples of the epoch each index lists in its
            ``history`` (the look-back of the pipeline's keyed caches). Defaults to 0.
        logger: Where warnings go (``print_log``'s ``logger``). Defaults to
            ``'current'``.
    """

    def __init__(self, batch_sampler: Any, seed: int, rank: int = 0, world_size: int = 1,
                 diff_rank_seed: bool = False, logger: Any = 'current',
                 history: int = 0) -> None:
        self.batch_sampler = batch_sampler
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.diff_rank_seed = diff_rank_seed
        self.logger = logger
        self.history = history
        self._resume: Optional[Tuple[int, int]] = None
        self._isolate = needs_isolation(batch_sampler)
        #: The last position given to :meth:`resume_at` (kept after it is used).
        self.positioned: Optional[Tuple[int, int]] = None

    @property
    def sampler(self) -> Any:
        """The sampler inside the wrapped batch sampler."""
        return getattr(self.batch_sampler, 'sampler', None)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this wrapper lacks (batch_size, drop_last, ...).
        if name == 'batch_sampler':
            raise AttributeError(name)
        return getattr(self.batch_sampler, name)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def current_epoch(self) -> int:
        """The epoch the next pass is keyed with."""
        epoch = getattr(self.sampler, 'epoch', 0)
        return epoch if isinstance(epoch, int) else 0

    def resume_at(self, epoch: int, batches: int) -> None:
        """Make the next pass of ``epoch`` start after ``batches`` batches.

        The skipped batches are drawn from the wrapped batch sampler (index lists
        only, so stateful batch samplers evolve exactly as in the original run) and
        their positions are counted, so the following samples get the keys they
        had in the run that wrote the checkpoint.
        """
        self._resume = self.positioned = (int(epoch), int(batches))

    def __iter__(self) -> Iterator[List[SeededIndex]]:
        epoch = self.current_epoch()
        skip = 0
        if self._resume is not None:
            resume_epoch, skip = self._resume
            self._resume = None
            if resume_epoch != epoch:
                print_log(
                    f'mmrepro: the data position to resume is in epoch {resume_epoch} but '
                    f'the sampler is at epoch {epoch}; not skipping any batch.',
                    logger=self.logger, level=logging.WARNING)
                skip = 0
        rank = self.rank if self.diff_rank_seed else -1
        local = 0
        # (position, index) of this rank's latest samples; skipped batches count too.
        earlier: deque = deque(maxlen=self.history)
        for n, batch in enumerate(self._isolated(epoch)):
            seeded = []
            for index in batch:
                position = local * self.world_size + self.rank
                if n >= skip:
                    seeded.append(SeededIndex(
                        int(index), sample_key(self.seed, epoch, position, int(index), rank),
                        tuple(earlier)))
                if self.history:
                    earlier.append((position, int(index)))
                local += 1
            if n >= skip:
                yield seeded

    def _isolated(self, epoch: int) -> Iterator[List[int]]:
        if not self._isolate:
            yield from self.batch_sampler
            return
        rngs = IsolatedHostRNGs((SAMPLER, self.seed, epoch))
        with rngs:
            batches = iter(self.batch_sampler)
        while True:
            with rngs:
                batch = next(batches, None)
            if batch is None:
                return
            yield batch
