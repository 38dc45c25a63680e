"""Functions that ``torch.multiprocessing.spawn`` runs in its processes.

A spawned process imports the function by its module's name; test modules are imported
by path (pytest's importlib mode), so their functions cannot be found there.

The processes meet through a file store (``store``: a path in the test's own temporary
directory), not a TCP port: a port found free and then taken by another test's launch on
the other test worker would join ranks of two tests. Collectives give up after
:data:`TIMEOUT`, so a stuck rank fails its test instead of stalling the run.

A rank leaves as the train CLI's ranks do (:func:`mmrepro.cli.train.close_process_group`):
a barrier, then ``destroy_process_group``. Without the barrier, torch 2.1's gloo group
could deadlock in its destructor, which holds the GIL while joining its worker threads,
one of which still frees a finished collective's tensors and waits for the GIL (the
floor's unit tier once stalled so). :func:`spawn_ranks` bounds the whole launch anyway.
"""
import contextlib
import datetime
import os
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from mmengine.evaluator import BaseMetric, Evaluator

from mmrepro.data.eval_batch_sampler import EvalBatchSampler
from mmrepro.rng.seeding import init_random_seed, set_random_seed
from mmrepro.runner.evaluation import results_in_default_order

#: How long a rank waits for the others (init and every collective).
TIMEOUT = datetime.timedelta(seconds=120)


#: How long a whole launch may take before its test fails and its ranks are killed.
LAUNCH_LIMIT = 4 * TIMEOUT.total_seconds()


def spawn_ranks(worker: Callable, nprocs: int, store: str, *args) -> dict:
    """Run ``worker(rank, store, *args, results)`` on ``nprocs`` spawned ranks.

    Returns:
        What the ranks put in ``results`` (a manager's dict), as a plain dict.

    Raises:
        AssertionError: the ranks did not all end within :data:`LAUNCH_LIMIT` seconds (the
            ranks this launch started are killed first).
    """
    with mp.Manager() as manager:
        results = manager.dict()
        ranks = mp.spawn(worker, args=(store, *args, results), nprocs=nprocs, join=False)
        deadline = datetime.datetime.now() + datetime.timedelta(seconds=LAUNCH_LIMIT)
        while not ranks.join(timeout=1):
            if datetime.datetime.now() > deadline:
                for process in ranks.processes:
                    process.kill()
                raise AssertionError(f'{worker.__name__}: {nprocs} ranks did not end within '
                                     f'{LAUNCH_LIMIT:.0f} s; killed')
        return dict(results)


@contextlib.contextmanager
def _rank(store: str, rank: int, world_size: int) -> Iterator[None]:
    """Rank ``rank`` of a gloo group met through ``store``; leaves through a barrier."""
    dist.init_process_group('gloo', init_method=f'file://{store}', rank=rank,
                            world_size=world_size, timeout=TIMEOUT)
    try:
        yield
        dist.barrier()
    finally:
        dist.destroy_process_group()


def seeding_worker(rank: int, store: str, results) -> None:
    """Rank ``rank`` of 2 (gloo): the seed it gets and the seeds it sets, and one draw."""
    with _rank(store, rank, 2):
        seed = init_random_seed()
        results[rank] = (seed, set_random_seed(seed, diff_rank_seed=True),
                         set_random_seed(seed), float(torch.rand(1)))


def buffers_worker(rank: int, store: str, results) -> None:
    """Rank ``rank`` of 2 (gloo): a BatchNorm model and an EMA copy whose buffers differ per
    rank; its buffers and parameters before and after ``broadcast_buffers``."""
    from types import SimpleNamespace

    from mmengine.model import ExponentialMovingAverage

    from mmrepro.resume.rank_buffers import broadcast_buffers
    with _rank(store, rank, 2):
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


class IndexMetric(BaseMetric):
    """Keeps ``(index, value)`` per sample (the loader's ``data_samples`` are the
    indices); ``per_batch`` keeps one entry per batch instead. After ``evaluate``,
    ``seen`` holds the results as ``compute_metrics`` got them (rank 0)."""

    def __init__(self, per_batch: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.per_batch = per_batch
        self.seen: list = []

    def process(self, data_batch, data_samples) -> None:
        pairs = [(int(i), float(v)) for i, v in zip(data_batch['data_samples'], data_samples,
                                                     strict=True)]
        self.results.extend(pairs[:1] if self.per_batch else pairs)

    def compute_metrics(self, results: list) -> dict:
        self.seen = list(results)
        return dict(samples=float(len(results)))


def share_results_worker(rank: int, store: str, world_size: int, size: int, batch_size: int,
                         cwd: str, results) -> None:
    """Rank ``rank`` of ``world_size`` (gloo), in ``cwd`` (``collect_results`` writes its
    parts there): each metric holds this rank's results of :class:`EvalBatchSampler`'s
    batches; what rank 0's metrics compute on after the evaluator's ``evaluate`` under
    ``results_in_default_order``, or the error raised."""
    os.chdir(cwd)
    with _rank(store, rank, world_size):
        batches = EvalBatchSampler(range(size), batch_size, size=size, rank=rank,
                                   world_size=world_size)
        for per_batch in (False, True):
            evaluator = Evaluator([IndexMetric(prefix='a'),
                                   IndexMetric(per_batch=per_batch, prefix='b')])
            for batch in batches:
                index = torch.tensor(batch)
                evaluator.process(index.float() * 10, dict(data_samples=index))
            try:
                with results_in_default_order(evaluator, batches):
                    evaluator.evaluate(size)
                found = [m.seen for m in evaluator.metrics]
            except ValueError as err:
                found = str(err)
            results[(rank, per_batch)] = (found, 'evaluate' in evaluator.__dict__)
