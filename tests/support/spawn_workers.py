"""Functions that ``torch.multiprocessing.spawn`` runs in its processes.

A spawned process imports the function by its module's name; test modules are imported
by path (pytest's importlib mode), so their functions cannot be found there.
"""
import torch
import torch.distributed as dist

from mmrepro.rng.seeding import init_random_seed, set_random_seed


def seeding_worker(rank: int, port: int, results) -> None:
    """Rank ``rank`` of 2 (gloo): the seed it gets and the seeds it sets, and one draw."""
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                            world_size=2)
    try:
        seed = init_random_seed()
        results[rank] = (seed, set_random_seed(seed, diff_rank_seed=True),
                         set_random_seed(seed), float(torch.rand(1)))
    finally:
        dist.destroy_process_group()
