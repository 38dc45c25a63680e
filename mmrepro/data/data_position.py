"""The resume position of a train loader, held by one object.

:class:`DataPosition` belongs to the loader's batch sampler
(:class:`~mmrepro.data.seeded_batch_sampler.SeededBatchSampler`), which validates a
checkpoint's position in its ``load_state_dict`` and stores it here; the sampler's next
pass of that epoch applies it (:meth:`DataPosition.take`). The training side tells it how
far training got (:meth:`DataPosition.consume`, through the sampler's ``consumed``, which
``ResumeKeeper`` calls after every iteration), since the loader's workers draw batches
ahead of training; the sampler's ``state_dict`` reports that. Every position is
``(sampler epoch, this rank's batches)``; the sampler converts to and from the units a
checkpoint holds.
"""
from __future__ import annotations

from typing import Optional, Tuple

#: ``(sampler epoch, this rank's batches)``.
Position = Tuple[int, int]


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
