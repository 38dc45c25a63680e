"""Batch samplers that tag every index with its per-sample seed key: the shared protocol.

Two samplers implement it: :class:`~mmrepro.data.rank_batch_sampler.RankBatchSampler`
(each rank batches its own share, as MMEngine does) and
:class:`~mmrepro.data.global_batch_sampler.GlobalBatchSampler` (every rank takes its
slices of one global stream). :func:`~mmrepro.data.reproducible_loader.make_reproducible`
picks one; everything else sees :class:`SeededBatchSampler`.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Iterator, List, Optional

from mmengine.logging import print_log

from ..rng.host_state import IsolatedHostRNGs
from ..rng.keys import SAMPLER, sample_key
from .data_position import DataPosition, Position
from .global_stream import Slot
from .sampler_isolation import needs_isolation
from .seeded_index import SeededIndex


class SeededBatchSampler:
    """Yield :class:`SeededIndex` batches keyed ``(seed, epoch, position, index[, rank])``.

    The epoch is the per-rank sampler's ``epoch`` attribute (set by
    ``DistSamplerSeedHook``), or 0 for samplers without one (one infinite stream).

    Unless every sampler the batches are drawn from is known to draw only from its own
    generator (:func:`~mmrepro.data.sampler_isolation.needs_isolation`), that batch
    sampler runs with host RNGs of its own, seeded from ``(seed, epoch)``: samplers that
    draw from global ``np.random`` (mmdet's ``GroupMultiSourceSampler``) or the global
    torch RNG (torch's ``RandomSampler`` without a generator) get an order that depends
    on ``(seed, epoch)`` only, and do not shift the model's draws in the main process.

    It is a part of the resume state, as torchdata's ``StatefulDistributedSampler`` is:
    :meth:`load_state_dict` validates a position and stores it in :attr:`position` (the
    one :class:`~mmrepro.data.data_position.DataPosition`), the next pass of that epoch
    skips the consumed batches at the index level (without loading or augmenting them),
    and :meth:`state_dict` says how far training got, as ``ResumeKeeper`` told it
    (:meth:`consumed`).

    Args:
        batch_sampler: This rank's batch sampler (torch's ``BatchSampler`` or mmdet's
            ``AspectRatioBatchSampler``), as MMEngine built it.
        source: The batch sampler the batches are drawn from.
        seed: The run's seed (the same on every rank).
        rank: This process's rank.
        diff_rank_seed: Mix the rank into every key (per-rank augmentation).
        logger: Where warnings go (``print_log``'s ``logger``).
        history: How many earlier samples of the epoch each index lists in its
            ``history`` (the look-back of the pipeline's keyed caches).
    """

    def __init__(self, batch_sampler: Any, source: Any, seed: int, rank: int,
                 diff_rank_seed: bool, logger: Any, history: int) -> None:
        self.batch_sampler = batch_sampler
        self.seed = seed
        self.rank = rank
        self.diff_rank_seed = diff_rank_seed
        self.logger = logger
        self.history = history
        self.position = DataPosition()
        self._source = source
        self._isolate = needs_isolation(source)

    @property
    def sampler(self) -> Any:
        """The sampler inside this rank's batch sampler (whose epoch hooks set)."""
        return getattr(self.batch_sampler, 'sampler', None)

    @property
    def batch_size(self) -> Any:
        """This rank's batch size (the batch sampler's)."""
        return getattr(self.batch_sampler, 'batch_size', None)

    @property
    def drop_last(self) -> Any:
        """Whether this rank's batch sampler drops a short last batch."""
        return getattr(self.batch_sampler, 'drop_last', None)

    def __len__(self) -> int:
        raise NotImplementedError

    def current_epoch(self) -> int:
        """The epoch the next pass is keyed with."""
        epoch = getattr(self.sampler, 'epoch', 0)
        return epoch if isinstance(epoch, int) else 0

    def consumed(self, epoch: int, batches: int) -> None:
        """Training consumed this rank's first ``batches`` batches of ``epoch``.

        The loader's workers draw batches ahead of training, so only the loop knows how
        many were trained on; :meth:`state_dict` reports this position.
        """
        self.position.consume(epoch, batches)

    def state_dict(self) -> Dict[str, Any]:
        """Where the next pass starts: the consumed position, in a checkpoint's units.

        Before anything is consumed, the start of the current epoch.
        """
        epoch, batches = self.position.consumed or (self.current_epoch(), 0)
        return self._state(epoch, batches)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Make the next pass start where ``state`` (from :meth:`state_dict`) says.

        Raises:
            ValueError: see :meth:`local_position`.
        """
        self.position.load(*self.local_position(state))

    def local_position(self, state: Dict[str, Any]) -> Position:
        """``(epoch, this rank's batches)`` of a position from :meth:`state_dict`.

        A position in ``unit='rank'`` is taken as it is: it is in the batches of the
        layout that wrote it, which the caller has checked to be this one
        (:func:`~mmrepro.resume.section.plan_resume`).

        Raises:
            ValueError: the position is malformed, or this sampler cannot start there.
        """
        problem = position_problem(state)
        if problem:
            raise ValueError(f'mmrepro: cannot position the train loader: {problem}.')
        if state.get('unit') == 'rank':
            return state['epoch'], state['batches']
        accumulation = self._accumulation(state['global_batch'])
        partial = state.get('micro_batches', 0)
        if partial and state['micro'] != accumulation:
            raise ValueError(
                f"mmrepro: cannot position the train loader: the position is {partial} of "
                f"{state['micro']} micro-batches into an optimizer step, not at a step "
                f'boundary, and this run takes {accumulation} per step.')
        return state['epoch'], state['global_batches'] * accumulation + partial

    def __iter__(self) -> Iterator[List[SeededIndex]]:
        epoch = self.current_epoch()
        skip, other = self.position.take(epoch)
        if other is not None:
            print_log(f'mmrepro: the data position to resume is in epoch {other} but the '
                      f'sampler is at epoch {epoch}; not skipping any batch.',
                      logger=self.logger, level=logging.WARNING)
        rank = self.rank if self.diff_rank_seed else -1
        for n, slots in enumerate(self._slots(epoch)):
            if n >= skip:
                yield [SeededIndex(index, sample_key(self.seed, epoch, position, index, rank),
                                   earlier) for position, index, earlier in slots]

    def _isolated(self, epoch: int) -> Iterator[List[int]]:
        """The source's batches of ``epoch``, drawn with host RNGs of their own if needed."""
        if not self._isolate:
            yield from self._source
            return
        rngs = IsolatedHostRNGs((SAMPLER, self.seed, epoch))
        with rngs:
            batches = iter(self._source)
        while True:
            with rngs:
                batch = next(batches, None)
            if batch is None:
                return
            yield batch

    def _slots(self, epoch: int) -> Iterator[List[Slot]]:
        """The slots of each of this rank's batches of ``epoch``."""
        raise NotImplementedError

    def _state(self, epoch: int, batches: int) -> Dict[str, Any]:
        """``(epoch, this rank's batches)`` in a checkpoint's units."""
        raise NotImplementedError

    def _accumulation(self, global_batch: int) -> int:
        """This rank's batches per global batch of ``global_batch`` samples.

        Raises:
            ValueError: This sampler cannot take global batches of that size.
        """
        raise NotImplementedError


def rank_position(epoch: int, batches: int) -> Dict[str, Any]:
    """A position in one rank's own batches: ``dict(epoch, batches, unit='rank')``."""
    return dict(epoch=int(epoch), batches=int(batches), unit='rank')


def position_problem(state: Any) -> Optional[str]:
    """What is wrong with a position from :meth:`SeededBatchSampler.state_dict` (or None).

    A position is ``dict(epoch, batches, unit='rank')`` or ``dict(epoch,
    global_batches, global_batch[, micro_batches, micro])`` with ``0 < micro_batches <
    micro``.
    """
    def count(key: str, least: int = 0) -> bool:
        value = state.get(key)
        return isinstance(value, int) and not isinstance(value, bool) and value >= least

    if not isinstance(state, dict) or not count('epoch'):
        return f'position {state!r:.80}'
    if state.get('unit') == 'rank':
        keys, ok = {'epoch', 'batches', 'unit'}, count('batches')
    elif 'micro_batches' in state:
        keys = {'epoch', 'global_batches', 'global_batch', 'micro_batches', 'micro'}
        ok = (count('global_batches') and count('global_batch', 1) and
              count('micro_batches', 1) and count('micro', 2) and
              state['micro_batches'] < state['micro'])
    else:
        keys = {'epoch', 'global_batches', 'global_batch'}
        ok = count('global_batches') and count('global_batch', 1)
    return None if ok and set(state) == keys else f'position {state!r:.80}'
