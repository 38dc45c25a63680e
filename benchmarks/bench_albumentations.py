#!/usr/bin/env python
"""Cost of keying albumentations' own generators: microseconds per sample, pass ratio.

The train loader of ``configs/retinanet_r18_fpn_albu_3e_tinycoco.py`` (MMDetection's
``Albu`` with ``configs/albu_example``'s transform list after a resize), on the
generated tiny data, through MMEngine's Runner code path and ``make_reproducible``. Two loaders with
num_workers=0 are timed in alternation over full passes: one keys the generators
albumentations owns (what mmrepro does), one leaves them as albumentations seeded
them (per-sample seeding of the global generators stays on in both). The time spent
inside mmrepro's per-sample seeding is also measured directly, as a share of the pass.

    python benchmarks/bench_albumentations.py [--passes 10] [--data data/demo] [--scale W H]
"""
from __future__ import annotations

import os.path as osp
import statistics
import sys
import time
from typing import Dict, List

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from timing import loader_arguments, timed  # noqa: E402 (benchmarks/timing.py, next to this script)


def build_loader(data_root: str, keyed: bool, scale: tuple):
    """The Albu demo config's train loader, its ``Resize`` to ``scale``;
    ``keyed=False`` leaves albumentations' generators unkeyed."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmengine.runner import Runner

    import mmrepro  # noqa: F401
    from mmrepro.data import make_reproducible
    cfg = Config.fromfile(osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))),
                                   'configs', 'retinanet_r18_fpn_albu_3e_tinycoco.py'))
    init_default_scope('mmdet')
    loader_cfg = cfg.train_dataloader
    loader_cfg.num_workers, loader_cfg.persistent_workers = 0, False
    loader_cfg.dataset.data_root = data_root.rstrip('/') + '/'
    for step in loader_cfg.dataset.pipeline:
        if step['type'] == 'Resize':
            step['scale'] = tuple(scale)
    loader = make_reproducible(Runner.build_dataloader(loader_cfg, seed=0), dict(seed=0))
    rngs = loader.dataset.__getitems__.rngs
    rngs.refresh()
    if not keyed:
        rngs._keyed = []  # the walk is done: nothing keyed until the pipeline changes
    return loader, rngs


def per_sample_cost(rngs, n: int = 5000) -> float:
    """Microseconds of one ``PipelineRNGs.seed`` (global and keyed generators)."""
    from mmrepro.rng.keys import sample_key
    keys = [sample_key(0, 1, i, i) for i in range(n)]
    start = time.perf_counter()
    for key in keys:
        rngs.seed(key)
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    args = loader_arguments(__doc__.splitlines()[0])
    import albumentations

    from mmrepro.data.pipeline_rngs import PipelineRNGs
    from mmrepro.demo import make_tiny_coco
    make_tiny_coco(args.data, num_train=64, num_val=8, seed=1)
    loaders = {flag: build_loader(args.data, flag, args.scale) for flag in (False, True)}
    keyed = len(loaders[True][1]._keyed)
    print(f'albumentations {albumentations.__version__}: Albu (albu_example list) after a '
          f'resize to {tuple(args.scale)}, num_workers=0, median of {args.passes} '
          f'interleaved passes; {keyed} generators keyed')
    print('| measure | value |')
    print('|---|---|')
    costs = {flag: per_sample_cost(rngs) for flag, (_, rngs) in loaders.items()}
    print(f'| seed the global generators, per sample | {costs[False]:.1f} us |')
    print(f'| seed the global and the {keyed} keyed generators, per sample | '
          f'{costs[True]:.1f} us |')
    print(f'| keying albumentations\' generators, per sample | '
          f'{costs[True] - costs[False]:.1f} us |')
    inside = [0.0]
    PipelineRNGs.seed = timed(PipelineRNGs.seed, inside)
    times: Dict[bool, List[float]] = {False: [], True: []}
    shares: List[float] = []
    for epoch in range(args.passes + 1):
        for flag, (loader, _) in loaders.items():
            loader.batch_sampler.sampler.set_epoch(epoch)
            inside[0] = 0.0
            start = time.perf_counter()
            for _ in loader:
                pass
            times[flag].append(time.perf_counter() - start)
            if flag and epoch:
                shares.append(inside[0] / times[flag][-1])
    off, on = (statistics.median(times[flag][1:]) for flag in (False, True))
    samples = len(loaders[True][0].dataset)
    print(f'| time inside the per-sample seeding (keyed), share of the pass | '
          f'{100 * statistics.median(shares):.2f} % |')
    print(f'| per sample: unkeyed / keyed | {1e3 * off / samples:.2f} / '
          f'{1e3 * on / samples:.2f} ms |')
    print(f'| throughput ratio keyed/unkeyed | {off / on:.3f} '
          f'(slowdown {100 * (on / off - 1):+.2f} %) |')


if __name__ == '__main__':
    main()
