"""Let ``IterBasedTrainLoop`` skip its data replay when the loader is positioned."""
from __future__ import annotations

from typing import Any, Iterator


class FastForwardIterator:
    """Answer the first ``free`` ``next()`` calls with None, then delegate.

    ``IterBasedTrainLoop.run`` resumes by calling ``next()`` on its data iterator
    once per iteration already trained, loading and augmenting every skipped batch.
    When mmrepro has positioned the DataLoader at the index level, those calls
    must not consume data: this adapter absorbs exactly that many.

    Args:
        iterator: The loop's data iterator (already positioned).
        free: How many ``next()`` calls to absorb (the loop's ``iter``).
    """

    def __init__(self, iterator: Iterator[Any], free: int) -> None:
        self._iterator = iterator
        self._free = free

    def __iter__(self) -> FastForwardIterator:
        return self

    def __next__(self) -> Any:
        if self._free > 0:
            self._free -= 1
            return None
        return next(self._iterator)
