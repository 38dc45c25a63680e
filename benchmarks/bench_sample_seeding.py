#!/usr/bin/env python
"""Cost of per-sample seeding: microseconds per sample, and loader throughput ratio.

Builds the demo RetinaNet train loader (real mmdet CocoDataset, random
augmentations, the generated tiny data) twice through MMEngine's Runner code path,
once with ``sample_seeding=True`` and once with ``False``, and times full passes
over the data in alternation: with num_workers=0 (the pipeline cost measured in this
process, RNG states saved and restored around every batch) and with 2 persistent
workers (the usual set-up; nothing to restore there). Pass ``p`` is sampler epoch
``p`` in both loaders, so both draw fresh augmentations every pass (the random
choices change a pass's cost by several per cent; with a fixed epoch the seeded loader
would repeat one draw). With num_workers=0 the time spent inside mmrepro's
per-sample code (seeding, saving and restoring states) is also measured directly,
as a share of the pass: the cost itself, free of that variance.

    python benchmarks/bench_sample_seeding.py [--passes 6] [--data data/demo] [--scale W H]

``--scale 1333 800`` resizes to COCO's training scale (a realistic per-sample cost);
the default (160, 128) is the demo's, where the fixed per-sample cost weighs most.
"""
from __future__ import annotations

import os.path as osp
import statistics
import sys
import time
import timeit
from typing import Dict, List

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from timing import loader_arguments, timed  # noqa: E402 (benchmarks/timing.py, next to this script)


def per_sample_cost(n: int = 20000) -> float:
    """Microseconds to derive a key's seeds and seed python/numpy/torch once."""
    from mmrepro.rng.host_state import seed_host_rngs
    from mmrepro.rng.keys import sample_key
    keys = [sample_key(0, 1, i, i) for i in range(n)]
    start = time.perf_counter()
    for key in keys:
        seed_host_rngs(key)
    return (time.perf_counter() - start) / n * 1e6


def save_restore_cost(n: int = 20000) -> float:
    """Microseconds to save and restore the host RNG states (main process only)."""
    from mmrepro.rng.host_state import get_host_states, set_host_states
    return timeit.timeit(lambda: set_host_states(get_host_states()), number=n) / n * 1e6


def instrument_fetch() -> List[float]:
    """Accumulate the time spent in the per-sample fetch's RNG calls into a cell."""
    from mmrepro.data import sample_fetch
    from mmrepro.data.pipeline_rngs import PipelineRNGs
    total = [0.0]
    PipelineRNGs.seed = timed(PipelineRNGs.seed, total)
    for name in ('get_host_states', 'set_host_states'):
        setattr(sample_fetch, name, timed(getattr(sample_fetch, name), total))
    return total


def build_loader(data_root: str, sample_seeding: bool, num_workers: int,
                 scale: tuple):
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmengine.runner import Runner

    import mmrepro  # noqa: F401
    from mmrepro.data import make_reproducible
    cfg = Config.fromfile(osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))),
                                   'configs', 'retinanet_r18_fpn_3e_tinycoco.py'))
    init_default_scope('mmdet')
    loader_cfg = cfg.train_dataloader
    loader_cfg.num_workers = num_workers
    loader_cfg.persistent_workers = num_workers > 0
    loader_cfg.dataset.data_root = data_root.rstrip('/') + '/'
    for step in loader_cfg.dataset.pipeline:
        if step['type'] == 'RandomResize':
            step['scale'] = tuple(scale)
    loader = Runner.build_dataloader(loader_cfg, seed=0)  # MMEngine's, unchanged
    return make_reproducible(loader, dict(seed=0, sample_seeding=sample_seeding))


def main() -> None:
    args = loader_arguments(__doc__.splitlines()[0])
    shares: List[float] = []
    from mmrepro.demo import make_tiny_coco
    make_tiny_coco(args.data, num_train=64, num_val=8, seed=1)
    print(f'per-sample seeding, demo RetinaNet train pipeline (RandomResize to '
          f'{tuple(args.scale)}, RandomFlip, PhotoMetricDistortion), median of '
          f'{args.passes} interleaved passes')
    print('| measure | value |')
    print('|---|---|')
    print(f'| derive + seed python/numpy/torch, per sample | {per_sample_cost():.1f} us |')
    print(f'| save + restore host RNG states (num_workers=0 only, per batch) | '
          f'{save_restore_cost():.1f} us |')
    for workers in (0, 2):
        loaders = {flag: build_loader(args.data, flag, workers, args.scale)
                   for flag in (False, True)}
        samples = len(loaders[True].dataset)
        times: Dict[bool, List[float]] = {False: [], True: []}
        inside = instrument_fetch() if workers == 0 else None
        for epoch in range(args.passes + 1):
            for flag, loader in loaders.items():
                loader.batch_sampler.sampler.set_epoch(epoch)
                if inside is not None:
                    inside[0] = 0.0
                start_t = time.perf_counter()
                for _ in loader:
                    pass
                times[flag].append(time.perf_counter() - start_t)
                if inside is not None and flag and epoch:
                    shares.append(inside[0] / times[flag][-1])
        off = statistics.median(times[False][1:])  # first pass: worker start-up
        on = statistics.median(times[True][1:])
        if inside is not None:
            print(f'| num_workers=0: time inside the per-sample seeding code, share of '
                  f'the pass (measured directly) | {100 * statistics.median(shares):.2f} % |')
        print(f'| num_workers={workers}: samples/s off / on ({samples} samples) | '
              f'{samples / off:.0f} / {samples / on:.0f} |')
        print(f'| num_workers={workers}: throughput ratio on/off | {off / on:.3f} '
              f'(slowdown {100 * (on / off - 1):+.2f} %) |')

if __name__ == '__main__':
    main()
