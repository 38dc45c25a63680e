"""init_random_seed / set_random_seed across 2 real gloo processes on CPU."""
import socket

import torch.multiprocessing as mp
from support.spawn_workers import seeding_worker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_rank0_seed_is_broadcast_and_diff_rank_seed_adds_rank():
    port = _free_port()
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(seeding_worker, args=(port, results), nprocs=2, join=True)
        (seed0, diff0, same0, draw0), (seed1, diff1, same1, draw1) = results[0], results[1]
    assert seed0 == seed1
    assert (diff0, diff1) == (seed0, seed0 + 1)
    assert same0 == same1 == seed0 and draw0 == draw1
