"""One batch stream for every process layout: global batches, sliced per rank.

MMEngine's samplers split the epoch's indices between ranks first, and each rank then
batches its share (by aspect ratio, for MMDetection's ``AspectRatioBatchSampler``). So
which images share a batch depends on the number of ranks. Here the order and the
batching are done once, for the whole world, at the global batch size
``G = batch_size x world_size x accumulative_counts``: the config's sampler and batch
sampler, built as if for one process, group ``G`` images at a time. Each global batch
is then cut into ``world_size x accumulative_counts`` slices of ``batch_size``; rank
``r`` trains on slices ``r x k .. r x k + k - 1``, one per micro-batch. Sample ``s`` of
global batch ``g`` sits at stream position ``g x G + s`` in every layout, so its
per-sample key, and its augmentation, do not depend on the layout either.

The last global batch of an epoch, if short, is completed with the epoch's first
samples (what MMEngine's ``DefaultSampler`` does per rank with ``round_up``), so every
slice holds ``batch_size`` samples in every layout.
"""
from __future__ import annotations

import contextlib
import copy
from collections import deque
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from torch.utils.data import BatchSampler

from ..run.layout import Layout

#: ``(position, index, earlier)``: a sample of a micro-batch, with the ``(position,
#: index)`` pairs of the global stream just before it.
Slot = Tuple[int, int, Tuple[Tuple[int, int], ...]]


@contextlib.contextmanager
def single_process() -> Iterator[None]:
    """Make MMEngine's ``get_dist_info`` report rank 0 of 1 inside the block.

    Samplers read their rank and world size when they are built; the global stream's
    sampler must see the whole dataset.
    """
    from mmengine.dist import utils
    original = utils.is_distributed
    utils.is_distributed = lambda: False
    try:
        yield
    finally:
        utils.is_distributed = original


def build_global_batch_sampler(loader_cfg: Mapping[str, Any], dataset: Any, seed: int,
                               global_batch: int) -> Optional[Any]:
    """The config's sampler and batch sampler, for one process at ``global_batch``.

    Returns:
        The batch sampler, or None where the config gives built objects rather than
        dicts (nothing can be rebuilt for the whole world).
    """
    sampler_cfg = loader_cfg.get('sampler')
    batch_cfg = loader_cfg.get('batch_sampler')
    if not isinstance(sampler_cfg, Mapping) or not isinstance(batch_cfg, (Mapping, type(None))):
        return None
    from mmengine.registry import DATA_SAMPLERS
    with single_process():
        sampler = DATA_SAMPLERS.build(copy.deepcopy(sampler_cfg),
                                      default_args=dict(dataset=dataset, seed=seed))
        if batch_cfg is None:
            return BatchSampler(sampler, global_batch,
                                drop_last=bool(loader_cfg.get('drop_last', False)))
        return DATA_SAMPLERS.build(copy.deepcopy(batch_cfg),
                                   default_args=dict(sampler=sampler,
                                                     batch_size=global_batch))


def micro_batches(batches: Iterable[Sequence[int]], layout: Layout, history: int = 0,
                  complete: bool = True) -> Iterator[List[Slot]]:
    """This rank's micro-batches of a pass over the global ``batches``.

    Args:
        batches: The global batches of one epoch (index lists).
        layout: This process's place in the world.
        history: How many earlier ``(position, index)`` pairs of the global stream
            each sample lists (the look-back of the pipeline's keyed caches).
        complete: Complete a short last batch with the epoch's first samples.

    Yields:
        list: The ``(position, index, earlier)`` slots of each micro-batch, in order.
    """
    size = layout.global_batch
    first: List[int] = []
    earlier: deque = deque(maxlen=history)
    for g, batch in enumerate(batches):
        batch = [int(index) for index in batch]
        if len(first) < size:
            first.extend(batch[:size - len(first)])
        if complete and len(batch) < size:
            batch += [first[n % len(first)] for n in range(size - len(batch))]
        slices: List[List[Slot]] = [[] for _ in range(layout.accumulation)]
        for slot, index in enumerate(batch):
            position = g * size + slot
            own = slot // layout.batch_size - layout.rank * layout.accumulation
            if 0 <= own < layout.accumulation:  # one of this rank's micro-batches
                slices[own].append((position, index, tuple(earlier)))
            if history:
                earlier.append((position, index))
        yield from slices
