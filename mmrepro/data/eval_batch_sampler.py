"""Evaluation batches that are the same for any number of ranks.

MMDetection pads every image of a batch to the largest of the batch, so an image's
predictions depend on which images share its batch. MMEngine's ``DefaultSampler``
(``shuffle=False``) gives rank ``r`` of ``W`` the indices ``r, r + W, r + 2W, ...``, so
the batches, and an image's padding, change with ``W``. :class:`EvalBatchSampler`
forms the batches of one rank (global batch ``k`` holds the indices ``[k x B, min((k +
1) x B, N))``) and deals them out whole: rank ``r`` runs global batches ``r, r + W, r +
2W, ...``. On one rank these are exactly MMEngine's batches.

MMEngine's ``collect_results`` assumes ``DefaultSampler``'s assignment when it puts the
ranks' results back in dataset order; :func:`default_sampler_share` says which indices
``DefaultSampler`` gives a rank, in its order, so that the evaluation loops
(:mod:`mmrepro.runner.evaluation`) can hand every rank the results it expects.
"""
from __future__ import annotations

import math
from typing import Any, Iterator, List, Optional

from mmengine.dist import get_dist_info
from mmengine.registry import DATA_SAMPLERS


@DATA_SAMPLERS.register_module()
class EvalBatchSampler:
    """This rank's share of the global evaluation batches (see the module docstring).

    Args:
        sampler: The sampler MMEngine built for the loader (a ``DefaultSampler``). Only
            its dataset, rank and world size are read; it stays the loader's ``sampler``.
        batch_size: Images per batch.
        size: Number of samples (default: ``len(sampler.dataset)``).
        rank: This process's rank (default: the sampler's, else MMEngine's).
        world_size: Number of ranks (default: the sampler's, else MMEngine's).

    Raises:
        ValueError: ``batch_size`` is not a positive integer, or ``rank`` is not in
            ``[0, world_size)``.
    """

    #: Sample ``i`` is at position ``i`` of the evaluation's one stream, on any layout
    #: (:class:`~mmrepro.data.rank_batch_sampler.RankBatchSampler` keys it so).
    global_order = True
    drop_last = False

    def __init__(self, sampler: Any, batch_size: int, size: Optional[int] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f'EvalBatchSampler: batch_size={batch_size!r}, expected a '
                             'positive int; fix: set the loader\'s batch_size to 1 or more.')
        dist_rank, dist_world = get_dist_info()
        self.sampler = sampler
        self.batch_size = batch_size
        self.size = len(sampler.dataset) if size is None else int(size)
        self.rank = int(getattr(sampler, 'rank', dist_rank) if rank is None else rank)
        self.world_size = int(getattr(sampler, 'world_size', dist_world)
                              if world_size is None else world_size)
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f'EvalBatchSampler: rank={self.rank} with world_size='
                             f'{self.world_size}, expected 0 <= rank < world_size.')

    def global_batches(self) -> List[List[int]]:
        """Every global batch: ``[k x B, min((k + 1) x B, N))`` for each ``k``."""
        step = self.batch_size
        return [list(range(start, min(start + step, self.size)))
                for start in range(0, self.size, step)]

    def rank_batches(self, rank: Optional[int] = None) -> List[List[int]]:
        """The global batches ``rank`` (default: this one) runs, in order."""
        rank = self.rank if rank is None else rank
        return self.global_batches()[rank::self.world_size]

    def indices(self) -> List[int]:
        """This rank's indices in the order it processes them."""
        return [index for batch in self.rank_batches() for index in batch]

    def __iter__(self) -> Iterator[List[int]]:
        return iter(self.rank_batches())

    def __len__(self) -> int:
        batches = math.ceil(self.size / self.batch_size)
        return len(range(self.rank, batches, self.world_size))


def default_sampler_share(size: int, rank: int, world_size: int,
                          round_up: bool = True) -> List[int]:
    """The indices MMEngine's ``DefaultSampler(shuffle=False)`` gives ``rank``, in order.

    With ``round_up`` the dataset is repeated to a multiple of ``world_size`` samples
    (``DefaultSampler`` wraps around to the first indices), and rank ``r`` takes every
    ``world_size``-th from ``r``; ``collect_results`` interleaves the shares and cuts
    them at ``size``, which gives back ``0, 1, ..., size - 1``.

    Args:
        size: Number of samples.
        rank: The rank.
        world_size: Number of ranks.
        round_up: ``DefaultSampler``'s ``round_up``. Defaults to True.

    Returns:
        list[int]: The dataset indices, in the order that rank processes them.
    """
    indices = list(range(size))
    if not round_up or not indices:
        return indices[rank::world_size]
    total = math.ceil(size / world_size) * world_size
    indices = (indices * (total // size + 1))[:total]
    return indices[rank:total:world_size]
