"""Per-sample seeding at fetch time: the hook torch's DataLoader fetcher calls."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import torch.utils.data

from ..rng.host_state import get_host_states, set_host_states
from .keyed_cache import fetching
from .pipeline_rngs import OwnedGenerator, PipelineRNGs
from .seeded_index import SeededIndex


class SampleSeedingFetch:
    """Fetch a batch, seeding the process's RNGs from each index's key first.

    Installed as the dataset *instance* attribute ``__getitems__``, which torch's
    map-style fetcher calls with the batch's indices in whatever process runs the
    pipeline (a worker, or the main process when ``num_workers=0``). The dataset's
    class, attributes and ``__getitem__`` are untouched. The generators the pipeline's
    transforms own are keyed too where mmrepro can (:mod:`~mmrepro.data.pipeline_rngs`).

    In the main process the RNG states are restored after a batch that was seeded, so
    the model's own draws (RPN/RCNN proposal sampling, dropout) are the same whatever
    the loader does; in a worker that work is skipped (the next sample reseeds
    anyway). Indices without a key (another DataLoader over the same dataset) are
    fetched as plain torch would, drawing from and advancing the process's streams.

    Args:
        dataset: The map-style dataset the DataLoader reads.
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self.rngs = PipelineRNGs(dataset)

    def __call__(self, indices: Sequence[int]) -> List[Any]:
        # Only a batch that reseeds (any index with a key) disturbs the process's
        # streams; a loader whose indices carry no key (another DataLoader over the
        # same dataset) must advance them as usual, not replay them every batch.
        seeded = any(isinstance(index, SeededIndex) for index in indices)
        in_worker = torch.utils.data.get_worker_info() is not None
        saved = get_host_states() if seeded and not in_worker else None
        if seeded:
            self.rngs.refresh()
        try:
            out = []
            for index in indices:
                if isinstance(index, SeededIndex):
                    self.rngs.seed(index.key)
                    with fetching(self.dataset, index, self.rngs):
                        out.append(self.dataset[int(index)])
                else:
                    out.append(self.dataset[index])
            return out
        finally:
            if saved is not None:
                set_host_states(saved)


def install_sample_seeding(dataset: Any) -> bool:
    """Install :class:`SampleSeedingFetch` on ``dataset``; idempotent.

    Returns:
        bool: False when the dataset's class defines its own ``__getitems__`` (a
        batched fetch mmrepro cannot seed per sample); the dataset is left as is.
    """
    current = dataset.__dict__.get('__getitems__') if hasattr(dataset, '__dict__') else None
    if isinstance(current, SampleSeedingFetch):
        return True
    if getattr(type(dataset), '__getitems__', None) is not None:
        return False
    dataset.__getitems__ = SampleSeedingFetch(dataset)
    return True



def owned_generators(dataset: Any) -> List[OwnedGenerator]:
    """The generators the pipeline of a dataset with :class:`SampleSeedingFetch` owns
    (:func:`~mmrepro.data.pipeline_rngs.find_generators`); none without it."""
    fetch: Optional[SampleSeedingFetch] = getattr(dataset, '__dict__', {}).get('__getitems__')
    if not isinstance(fetch, SampleSeedingFetch):
        return []
    fetch.rngs.refresh()
    return list(fetch.rngs.found)
