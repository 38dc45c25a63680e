"""A batch-sampler wrapper that tags every index with its per-sample seed key."""
from __future__ import annotations

import contextlib
import logging
from collections import deque
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mmengine.logging import print_log

from ..rng.host_state import IsolatedHostRNGs
from ..rng.keys import SAMPLER, sample_key
from ..run.layout import Layout
from .global_stream import micro_batches
from .sampler_isolation import needs_isolation
from .seeded_index import SeededIndex


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

    With ``global_batches`` (:mod:`~mmrepro.data.global_stream`), the batches are
    drawn from that batch sampler, built for the whole world at the global batch
    size, and this rank takes its slices of each: the order, the batching and every
    sample's key are the same for every number of ranks and ``accumulative_counts``.
    The wrapped (per-rank) batch sampler then only answers attribute lookups.

    It can also be positioned for resume: :meth:`resume_at` makes the next pass
    skip batches at the index level, without loading or augmenting them. It owns its
    position as a part of the resume state: :meth:`consumed` tells it how far
    training got, :meth:`state_dict` says where that is (in global batches where the
    global stream is on: see :func:`check_position`) and :meth:`load_state_dict`
    positions the next pass there.

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
        global_batches: The batch sampler of the global stream. Defaults to None
            (each rank batches its own share, as MMEngine does).
        layout: This process's place in the global batches (the Runner's, built once
            with the train loader), required with ``global_batches``.
    """

    def __init__(self, batch_sampler: Any, seed: int, rank: int = 0, world_size: int = 1,
                 diff_rank_seed: bool = False, logger: Any = 'current',
                 history: int = 0, global_batches: Any = None,
                 layout: Optional[Layout] = None) -> None:
        if global_batches is not None and layout is None:
            raise ValueError('SeededBatchSampler: global_batches needs the layout that '
                             'takes its slices (layout=Layout(...)).')
        self.batch_sampler = batch_sampler
        self.global_batches = global_batches
        self.layout: Optional[Layout] = layout if global_batches is not None else None
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.diff_rank_seed = diff_rank_seed
        self.logger = logger
        self.history = history
        self._resume: Optional[Tuple[int, int]] = None
        self._steps_only = False
        self._isolate = needs_isolation(self._source)
        #: The last position given to :meth:`resume_at` (kept after it is used).
        self.positioned: Optional[Tuple[int, int]] = None
        #: ``(epoch, micro-batches)`` training has consumed, as :meth:`consumed` said.
        self._consumed: Optional[Tuple[int, int]] = None

    @property
    def sampler(self) -> Any:
        """The sampler inside the wrapped batch sampler (whose epoch hooks set)."""
        return getattr(self.batch_sampler, 'sampler', None)

    @property
    def _source(self) -> Any:
        """The batch sampler the batches are drawn from."""
        return self.batch_sampler if self.global_batches is None else self.global_batches

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this wrapper lacks (batch_size, drop_last, ...).
        if name == 'batch_sampler':
            raise AttributeError(name)
        return getattr(self.batch_sampler, name)

    def __len__(self) -> int:
        if self.layout is None:
            return len(self.batch_sampler)
        return len(self.global_batches) * (1 if self._steps_only else self.layout.micro)

    @contextlib.contextmanager
    def counting_steps(self) -> Iterator[None]:
        """Inside, ``len`` counts optimizer steps (global batches), not micro-batches."""
        self._steps_only = True
        try:
            yield
        finally:
            self._steps_only = False

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
        self._resume = self.positioned = self._consumed = (int(epoch), int(batches))

    def consumed(self, epoch: int, batches: int) -> None:
        """Record that training consumed this rank's first ``batches`` batches of ``epoch``.

        The loader's workers draw batches ahead of training, so only the loop knows how
        many were trained on; :meth:`state_dict` reports this position.
        """
        self._consumed = (int(epoch), int(batches))

    def state_dict(self) -> Dict[str, int]:
        """Where the next pass starts: the consumed position, in the stream's own units.

        Returns:
            dict: With the global stream, ``dict(epoch=e, global_batches=g,
            global_batch=G)`` (``g`` whole global batches of ``G`` samples, i.e.
            optimizer steps, consumed in sampler epoch ``e``), plus
            ``micro_batches=r, micro=k`` when this rank is ``r`` of its ``k``
            micro-batches into the next one. Without it, ``dict(epoch=e, batches=b,
            unit='rank')``: this rank's own batches. Before anything is consumed, the
            start of the current epoch.
        """
        epoch, batches = self._consumed or (self.current_epoch(), 0)
        if self.layout is None:
            return rank_position(epoch, batches)
        steps, partial = divmod(batches, self.layout.micro)
        state = dict(epoch=epoch, global_batches=steps, global_batch=self.layout.global_batch)
        if partial:
            state.update(micro_batches=partial, micro=self.layout.micro)
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Make the next pass start where ``state`` (from :meth:`state_dict`) says.

        Raises:
            ValueError: see :meth:`local_position`.
        """
        self.resume_at(*self.local_position(state))

    def local_position(self, state: Dict[str, Any]) -> Tuple[int, int]:
        """``(epoch, this rank's batches)`` of a position from :meth:`state_dict`.

        Global batches become ``g x micro`` micro-batches of this layout. A position in
        ``unit='rank'`` is taken as it is: it is in the batches of the layout that wrote
        it, which the caller has checked to be this one
        (:func:`~mmrepro.resume.section.plan_resume`).

        Raises:
            ValueError: the position is malformed, its global batch is not this run's,
                or it lies between optimizer steps of another ``accumulative_counts``.
        """
        problem = check_position(state)
        if problem:
            raise ValueError(f'mmrepro: cannot position the train loader: {problem}.')
        epoch = state['epoch']
        if state.get('unit') == 'rank':
            return epoch, state['batches']
        if self.layout is not None:
            micro = self.layout.micro
            if state['global_batch'] != self.layout.global_batch:
                raise ValueError(
                    f"mmrepro: cannot position the train loader: the position counts global "
                    f"batches of {state['global_batch']} samples, this run's are "
                    f'{self.layout.global_batch}.')
        else:  # each rank batches its own share: its batches per global batch
            per_step = getattr(self.batch_sampler, 'batch_size', None)
            per_step = per_step * self.world_size if isinstance(per_step, int) else 0
            if not per_step or state['global_batch'] % per_step:
                raise ValueError(
                    f"mmrepro: cannot position the train loader: the position counts global "
                    f"batches of {state['global_batch']} samples, which this loader's "
                    'per-rank batches do not divide.')
            micro = state['global_batch'] // per_step
        partial = state.get('micro_batches', 0)
        if partial and state['micro'] != micro:
            raise ValueError(
                f"mmrepro: cannot position the train loader: the position is {partial} of "
                f"{state['micro']} micro-batches into an optimizer step, not at a step "
                f'boundary, and this run takes {micro} per step.')
        return epoch, state['global_batches'] * micro + partial

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
        for n, slots in enumerate(self._slots(epoch)):
            if n >= skip:
                yield [SeededIndex(index, sample_key(self.seed, epoch, position, index, rank),
                                   earlier) for position, index, earlier in slots]

    def _slots(self, epoch: int) -> Iterator[List[Tuple[int, int, Tuple]]]:
        """``(position, index, earlier)`` of each of this rank's batches of ``epoch``."""
        if self.layout is not None:
            global_sampler = getattr(self.global_batches, 'sampler', None)
            if hasattr(global_sampler, 'set_epoch'):
                global_sampler.set_epoch(epoch)
            complete = getattr(global_sampler, 'round_up', True) or self.layout.slices > 1
            yield from micro_batches(self._isolated(epoch), self.layout, self.history,
                                     complete=complete)
            return
        local = 0
        # (position, index) of this rank's latest samples; skipped batches count too.
        earlier: deque = deque(maxlen=self.history)
        for batch in self._isolated(epoch):
            slots = []
            for index in batch:
                position = local * self.world_size + self.rank
                slots.append((position, int(index), tuple(earlier)))
                if self.history:
                    earlier.append((position, int(index)))
                local += 1
            yield slots

    def _isolated(self, epoch: int) -> Iterator[List[int]]:
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


def rank_position(epoch: int, batches: int) -> Dict[str, Any]:
    """A position in one rank's own batches: ``dict(epoch, batches, unit='rank')``."""
    return dict(epoch=int(epoch), batches=int(batches), unit='rank')


def check_position(state: Any) -> Optional[str]:
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
