"""Data randomness that depends on (seed, epoch, sample), not on workers."""
from .reproducible_loader import make_reproducible
from .seeded_batch_sampler import SeededBatchSampler
from .seeded_index import SeededIndex
from .worker_init import worker_init_fn

__all__ = ['make_reproducible', 'SeededBatchSampler', 'SeededIndex', 'worker_init_fn']
