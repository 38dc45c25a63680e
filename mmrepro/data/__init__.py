"""Data randomness that depends on (seed, epoch, sample), not on workers."""
from ..rng.worker_init import worker_init_fn
from .reproducible_loader import make_reproducible
from .seeded_batch_sampler import SeededBatchSampler
from .seeded_index import SeededIndex

__all__ = ['make_reproducible', 'SeededBatchSampler', 'SeededIndex', 'worker_init_fn']
