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
from .data_position import DataPosition, Position, local_position
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
    :meth:`load_state_dict` validates a position and holds it (in its one
    :class:`~mmrepro.data.data_position.DataPosition`), the next pass of that epoch
    skips the consumed batches at the index level (without loading or augmenting them),
    and :meth:`state_dict` says how far training got, as ``ResumeKeeper`` told it
    (:meth:`consume`). Others ask it where a resumed epoch starts (:meth:`epoch_start`),
    whether it is positioned at a target (:meth:`positioned_at`) and what was consumed
    (:meth:`consumed_state`).

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
        self._position = DataPosition()
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

    def consume(self, epoch: int, batches: int) -> None:
        """Training consumed this rank's first ``batches`` batches of ``epoch``.

        The loader's workers draw batches ahead of training, so only the loop knows how
        many were trained on; :meth:`state_dict` reports this position.
        """
        self._position.consume(epoch, batches)

    def consumed_state(self) -> Optional[Dict[str, Any]]:
        """What training consumed, in a checkpoint's units (as :meth:`state_dict`); None
        before anything was consumed or loaded (the position is then unknown)."""
        if self._position.consumed is None:
            return None
        return self._state(*self._position.consumed)

    def state_dict(self) -> Dict[str, Any]:
        """Where the next pass starts: the consumed position, in a checkpoint's units.

        Before anything is consumed, the start of the current epoch.
        """
        return self.consumed_state() or self._state(self.current_epoch(), 0)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Make the next pass start where ``state`` (from :meth:`state_dict`) says.

        Raises:
            ValueError: see :meth:`local_position`.
        """
        self._position.load(*self.local_position(state))

    def local_position(self, state: Dict[str, Any]) -> Position:
        """``(epoch, this rank's batches)`` of a position from :meth:`state_dict`
        (:func:`~mmrepro.data.data_position.local_position`).

        Raises:
            ValueError: the position is malformed, or this sampler cannot start there.
        """
        return local_position(state, self._accumulation)

    def positioned_at(self, target: Position) -> bool:
        """Whether the last position loaded (pending or applied) is ``target``, ``(epoch,
        this rank's batches)``."""
        return self._position.loaded == target

    def epoch_start(self, epoch: Optional[int] = None) -> int:
        """Where the next pass of ``epoch`` (default: the current one) starts: the batches
        a resume position still pending for it skips, else 0."""
        return self._position.start(self.current_epoch() if epoch is None else epoch)

    def __iter__(self) -> Iterator[List[SeededIndex]]:
        epoch = self.current_epoch()
        skip, other = self._position.take(epoch)
        if other is not None:
            print_log(self._unpositioned(other, epoch), logger=self.logger,
                      level=logging.WARNING)
        rank = self.rank if self.diff_rank_seed else -1
        for n, slots in enumerate(self._slots(epoch)):
            if n >= skip:
                yield [SeededIndex(index, sample_key(self.seed, epoch, position, index, rank),
                                   earlier) for position, index, earlier in slots]

    def _unpositioned(self, wanted: int, epoch: int) -> str:
        """Why a resume position for epoch ``wanted`` is not applied to a pass of ``epoch``."""
        if not isinstance(getattr(self.sampler, 'epoch', None), int):
            return (f'mmrepro: the data position to resume is in epoch {wanted}, but '
                    f'{type(self.sampler).__name__} keeps no epoch (its set_epoch sets no '
                    f'`epoch`), so its passes cannot be told apart: not skipping any batch, '
                    f'and this resume is not exact.')
        return (f'mmrepro: the data position to resume is in epoch {wanted} but the sampler '
                f'is at epoch {epoch}; not skipping any batch.')

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

