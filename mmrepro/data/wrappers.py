"""Walking dataset wrappers: a dataset and every dataset it wraps."""
from __future__ import annotations

from typing import Any, Iterator

#: How deep wrappers are followed (``ClassBalancedDataset(ConcatDataset([...]))``...).
MAX_DEPTH = 4


def wrapped_datasets(dataset: Any, depth: int = 0) -> Iterator[Any]:
    """``dataset``, then every dataset it wraps, depth first.

    A wrapper holds its datasets as ``dataset`` (MMEngine's ``RepeatDataset``,
    ``ClassBalancedDataset``, MMDetection's ``MultiImageMixDataset``) or ``datasets``
    (``ConcatDataset``); wrappers are followed :data:`MAX_DEPTH` levels down.
    """
    if depth > MAX_DEPTH or dataset is None:
        return
    yield dataset
    for inner in [getattr(dataset, 'dataset', None), *getattr(dataset, 'datasets', [])]:
        yield from wrapped_datasets(inner, depth + 1)
