#!/usr/bin/env python
"""Cost of the global batch stream and the keyed model draws, per training iteration, CPU.

Builds the demo detector (RetinaNet R18-FPN on the generated tiny COCO data, the
repo's config, its ``DefaultSampler`` + ``AspectRatioBatchSampler``) once through
MMEngine's Runner, then measures directly, in one process and one run:

- the loader's index work per micro-batch (batch size 2): order, aspect-ratio batching
  and the per-sample keys, without loading images. Per rank (``global_stream=False``,
  MMEngine's batching), and global for 1 rank, 8 ranks (global batch 16: each rank
  walks every index of its global batch) and 1 rank x ``accumulative_counts=8``;
- seeding the model's draws before an iteration (python, numpy, torch CPU);
- ``model.train_step`` of the demo detector (median of a few iterations), which the
  costs above are divided by.

The costs are measured directly (many repetitions, median of rounds) rather than as a
difference of whole-iteration timings, which vary by a few per cent on a shared VM.

    python benchmarks/bench_global_stream.py [--rounds 7] [--data data/demo]
"""
from __future__ import annotations

import argparse
import datetime
import os.path as osp
import platform
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from bench_trace import build_runner  # noqa: E402 (benchmarks/, next to this script)

SEED = 0
EPOCHS = 50  # passes over the 16 demo images per measurement


def loader_cost(runner: Any, world: int, micro: int, global_stream: bool) -> float:
    """Seconds of index work per micro-batch of one rank (the last rank)."""
    from mmrepro.data import GlobalBatchSampler, RankBatchSampler
    from mmrepro.data.global_stream import build_global_batch_sampler
    from mmrepro.run.layout import Layout

    per_rank = runner.train_dataloader.batch_sampler.batch_sampler  # MMEngine's own
    cfg = runner.cfg.train_dataloader
    dataset = runner.train_dataloader.dataset
    if global_stream:
        global_batches = build_global_batch_sampler(cfg, dataset, SEED, 2 * world * micro)
        sampler = GlobalBatchSampler(per_rank, global_batches,
                                     Layout(2, world - 1, world, micro), SEED)
    else:
        sampler = RankBatchSampler(per_rank, SEED, world - 1, world)
    batches = 0
    start = time.perf_counter()
    for epoch in range(EPOCHS):
        per_rank.sampler.set_epoch(epoch)
        for _ in sampler:
            batches += 1
    return (time.perf_counter() - start) / batches


def seeding_cost(repeats: int = 2000) -> float:
    """Seconds to seed the model's draws before one iteration."""
    from mmrepro.rng.step_draws import seed_step, step_key
    start = time.perf_counter()
    for iteration in range(repeats):
        seed_step(step_key(SEED, iteration, 0, 1))
    return (time.perf_counter() - start) / repeats


def iteration_time(runner: Any, iterations: int = 5) -> float:
    """Median seconds of the demo detector's ``train_step``."""
    times = []
    batches = iter(runner.train_dataloader)
    for _ in range(iterations + 1):
        batch = next(batches)
        start = time.perf_counter()
        runner.model.train_step(batch, optim_wrapper=runner.optim_wrapper)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=7, help='rounds of every measurement')
    parser.add_argument('--data', default='data/demo', help='the demo data (made if missing)')
    args = parser.parse_args()

    from mmrepro.demo import make_tiny_coco
    make_tiny_coco(args.data)
    import torch
    runner = build_runner(args.data, tempfile.mkdtemp(prefix='mmrepro-bench-stream-'))
    modes: Dict[str, Callable[[], float]] = {
        'per rank (global_stream=False), batch 2': lambda: loader_cost(runner, 1, 1, False),
        'global, 1 rank x 2': lambda: loader_cost(runner, 1, 1, True),
        'global, 8 ranks x 2 (global batch 16)': lambda: loader_cost(runner, 8, 1, True),
        'global, 1 rank x 2 x accumulate 8': lambda: loader_cost(runner, 1, 8, True),
        'seed the model draws': seeding_cost,
    }
    step = statistics.median(iteration_time(runner) for _ in range(3))
    results = {name: statistics.median(fn() for _ in range(args.rounds))
               for name, fn in modes.items()}
    print(f'# global stream cost, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, '
          f'{platform.processor() or platform.machine()}, torch {torch.__version__}, '
          f'{torch.get_num_threads()} threads; median of {args.rounds} rounds')
    print(f'demo train_step (RetinaNet R18-FPN, batch 2, ~160x128): {step * 1e3:.1f} ms\n')
    print('| per micro-batch | us | share of the demo iteration |')
    print('|---|---:|---:|')
    for name, seconds in results.items():
        print(f'| {name} | {seconds * 1e6:.1f} | {seconds / step * 100:.3f} % |')
    base = results['per rank (global_stream=False), batch 2']
    worst = max(results[name] for name in modes if name.startswith('global'))
    added = worst - base + results['seed the model draws']
    print(f'\nadded per iteration, worst layout above: {added * 1e6:.1f} us = '
          f'{added / step * 100:.3f} % of the demo iteration')


if __name__ == '__main__':
    main()
