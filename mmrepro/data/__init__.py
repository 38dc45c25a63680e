"""Data randomness that depends on (seed, epoch, sample), not on workers."""
from ..rng.worker_init import worker_init_fn
from .eval_batch_sampler import EvalBatchSampler
from .global_batch_sampler import GlobalBatchSampler
from .rank_batch_sampler import RankBatchSampler
from .reproducible_loader import make_reproducible
from .seeded_batch_sampler import SeededBatchSampler
from .seeded_index import SeededIndex

__all__ = ['EvalBatchSampler', 'GlobalBatchSampler', 'RankBatchSampler', 'SeededBatchSampler',
           'SeededIndex', 'make_reproducible', 'worker_init_fn']
