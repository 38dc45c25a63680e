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


def buffers_worker(rank: int, port: int, results) -> None:
    """Rank ``rank`` of 2 (gloo): a BatchNorm model and an EMA copy whose buffers differ per
    rank; its buffers and parameters before and after ``broadcast_buffers``."""
    from types import SimpleNamespace

    from mmengine.model import ExponentialMovingAverage

    from mmrepro.resume.rank_buffers import broadcast_buffers
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                            world_size=2)
    try:
        torch.manual_seed(0)  # the same weights on both ranks
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
        ema = ExponentialMovingAverage(model, update_buffers=True)
        torch.manual_seed(rank)  # each rank's own batch: its own running statistics
        model(torch.randn(2, 3, 8, 8))
        ema.update_parameters(model)
        runner = SimpleNamespace(model=model, hooks=[SimpleNamespace(ema_model=ema)])
        before = [b.clone() for b in model.buffers()]
        weights = [p.clone() for p in model.parameters()]
        sent = broadcast_buffers(runner)
        results[rank] = dict(
            sent=sent, before=[b.tolist() for b in before],
            after=[b.tolist() for b in model.buffers()],
            ema=[b.tolist() for b in ema.buffers()],
            weights_kept=all(torch.equal(a, b) for a, b in zip(weights, model.parameters(),
                                                                    strict=True)))
    finally:
        dist.destroy_process_group()
