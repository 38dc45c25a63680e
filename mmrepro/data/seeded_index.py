"""An ``int`` that carries the key its sample's randomness is derived from."""
from __future__ import annotations

from typing import Tuple


class SeededIndex(int):
    """A dataset index that carries its per-sample seed key.

    It behaves as a plain ``int`` everywhere (arithmetic, numpy indexing, batch
    samplers that bucket indices), pickles to DataLoader workers with its key, and
    lets :class:`~mmrepro.data.sample_fetch.SampleSeedingFetch` seed the RNGs before
    the sample's pipeline runs.
    """

    key: Tuple[int, ...]

    def __new__(cls, index: int, key: Tuple[int, ...]) -> SeededIndex:
        obj = super().__new__(cls, index)
        obj.key = key
        return obj

    def __reduce__(self):
        return (SeededIndex, (int(self), self.key))

    def __repr__(self) -> str:
        return f'SeededIndex({int(self)}, key={self.key})'
