"""An ``int`` that carries the key its sample's randomness is derived from."""
from __future__ import annotations

from typing import Tuple


class SeededIndex(int):
    """A dataset index that carries its per-sample seed key.

    It behaves as a plain ``int`` everywhere (arithmetic, numpy indexing, batch
    samplers that bucket indices), pickles to DataLoader workers with its key, and
    lets :class:`~mmrepro.data.sample_fetch.SampleSeedingFetch` seed the RNGs before
    the sample's pipeline runs.

    ``history`` holds ``(position, index)`` of the samples before it in its rank's
    stream (as many as the pipeline's keyed caches look back, else none): what
    :mod:`~mmrepro.data.keyed_cache` draws mosaic and mix-up partners from.
    """

    key: Tuple[int, ...]
    history: Tuple[Tuple[int, int], ...]

    def __new__(cls, index: int, key: Tuple[int, ...],
                history: Tuple[Tuple[int, int], ...] = ()) -> SeededIndex:
        obj = super().__new__(cls, index)
        obj.key = key
        obj.history = history
        return obj

    def __reduce__(self):
        return (SeededIndex, (int(self), self.key, self.history))

    def __repr__(self) -> str:
        return f'SeededIndex({int(self)}, key={self.key})'
