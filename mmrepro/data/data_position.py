"""The resume position of a train loader: its format, its checks, its conversions, its holder.

A position in a checkpoint (the ``position`` of the ``mmrepro`` section) is a dict in one
of two units:

- the rank's own batches: ``dict(epoch, batches, unit='rank')`` (:func:`rank_position`),
  which only the layout that wrote it resumes;
- global batches (the global stream): ``dict(epoch, global_batches, global_batch[,
  micro_batches, micro])``, with ``0 < micro_batches < micro`` where the rank is
  ``micro_batches`` of its ``micro`` micro-batches into the next optimizer step.

:func:`position_problem` says what is wrong with one, and :func:`local_position`
converts one into this rank's units, ``(sampler epoch, this rank's batches)``, the
:data:`Position` every sampler works in.

:class:`DataPosition` belongs to the loader's batch sampler
(:class:`~mmrepro.data.seeded_batch_sampler.SeededBatchSampler`), which validates a
checkpoint's position in its ``load_state_dict`` and stores it here; the sampler's next
pass of that epoch applies it (:meth:`DataPosition.take`). The training side tells it how
far training got (:meth:`DataPosition.consume`, through the sampler's ``consume``, which
``ResumeKeeper`` calls after every iteration), since the loader's workers draw batches
ahead of training; the sampler's ``state_dict`` reports that. Others ask the sampler,
never this object.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

#: ``(sampler epoch, this rank's batches)``.
Position = Tuple[int, int]


def rank_position(epoch: int, batches: int) -> Dict[str, Any]:
    """A position in one rank's own batches: ``dict(epoch, batches, unit='rank')``."""
    return dict(epoch=int(epoch), batches=int(batches), unit='rank')


def position_problem(state: Any) -> Optional[str]:
    """What is wrong with a position in a checkpoint's units (or None).

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


def local_position(state: Dict[str, Any], accumulation: Callable[[int], int]) -> Position:
    """``(epoch, this rank's batches)`` of a position in a checkpoint's units.

    A position in ``unit='rank'`` is taken as it is: it is in the batches of the layout
    that wrote it, which the caller has checked to be this one
    (:func:`~mmrepro.resume.section.plan_resume`).

    Args:
        state: The position (a batch sampler's ``state_dict``).
        accumulation: This rank's batches per global batch of the given number of
            samples; raises ValueError where the sampler cannot take such batches.

    Raises:
        ValueError: the position is malformed, or the sampler cannot start there.
    """
    problem = position_problem(state)
    if problem:
        raise ValueError(f'mmrepro: cannot position the train loader: {problem}.')
    if state.get('unit') == 'rank':
        return state['epoch'], state['batches']
    per_step = accumulation(state['global_batch'])
    partial = state.get('micro_batches', 0)
    if partial and state['micro'] != per_step:
        raise ValueError(
            f"mmrepro: cannot position the train loader: the position is {partial} of "
            f"{state['micro']} micro-batches into an optimizer step, not at a step "
            f'boundary, and this run takes {per_step} per step.')
    return state['epoch'], state['global_batches'] * per_step + partial


class DataPosition:
    """How far training got, and where the next pass starts.

    Attributes:
        consumed: What training consumed, as the loop (or a load) said; None before.
        loaded: The last position loaded from a checkpoint (kept after it is applied).
    """

    def __init__(self) -> None:
        self.consumed: Optional[Position] = None
        self.loaded: Optional[Position] = None
        self._pending = False

    def consume(self, epoch: int, batches: int) -> None:
        """Training consumed this rank's first ``batches`` batches of ``epoch``."""
        self.consumed = (int(epoch), int(batches))

    def load(self, epoch: int, batches: int) -> None:
        """Start the next pass of ``epoch`` after ``batches`` batches (consumed before)."""
        self.loaded = self.consumed = (int(epoch), int(batches))
        self._pending = True

    def start(self, epoch: int) -> int:
        """The batches the next pass of ``epoch`` will skip (0 where none is pending)."""
        if self._pending and self.loaded is not None and self.loaded[0] == epoch:
            return self.loaded[1]
        return 0

    def take(self, epoch: int) -> Tuple[int, Optional[int]]:
        """Apply a pending position to the pass of ``epoch`` starting now, once.

        Returns:
            ``(batches to skip, the pending position's epoch where it is another)``.
        """
        if not self._pending:
            return 0, None
        self._pending = False
        other = self.loaded[0] if self.loaded[0] != epoch else None
        return (0 if other is not None else self.loaded[1]), other
