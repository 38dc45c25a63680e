#!/usr/bin/env python
"""Trace overhead per training iteration: demo RetinaNet R18-FPN, CPU.

Builds the demo detector (tiny generated COCO data, the repo's config) once through
MMEngine's Runner and times ``model.train_step`` (forward, backward, SGD step) on the
same few batches in five modes, interleaved so that load changes hit every mode
alike (every round runs them in a new shuffled order, seeded by the round number,
so that no mode always follows the same other one):

- ``no hook``: ``train_step`` alone;
- ``hook, trace off``: with ``ReproducibilityHook(trace_interval=0)``'s per-iteration
  callbacks, as in every mmrepro run;
- ``trace N=1000, untraced iter``: a trace is configured but this iteration is not
  traced (no hooks are installed);
- ``trace N=1``: every iteration traced as ``trace_interval=1`` does (gradient hooks on
  all parameters; digests of every loss, gradient, weight and buffer);
- ``trace N=1 + forward outputs``: ``trace_forward=True`` as well (forward hooks on all
  modules, every output digested), as ``tools/check_repro.py`` traces.

It reports the median iteration time of each mode, its overhead over ``no hook`` (the
ratio to that round's ``no hook`` iteration on the same batch: median over rounds,
and mean with a 95 % confidence interval) and, measured directly, the time spent
inside the hook's and the tracer's callbacks per iteration (the cost itself, without
the noise of comparing timings on a shared machine).

    python benchmarks/bench_trace.py [--rounds 15] [--data data/demo] [--img-scale W H]
"""
from __future__ import annotations

import argparse
import datetime
import os.path as osp
import platform
import random
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from timing import timed  # noqa: E402 (benchmarks/timing.py, next to this script)

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
#: The Runner's iteration of the first timed step (see the loop in :func:`main`).
FIRST_ITER = 1001
MODES = ('no hook', 'hook, trace off', 'trace N=1000, untraced iter', 'trace N=1',
         'trace N=1 + forward outputs')
#: (trace interval, forward outputs) of each mode after ``no hook``.
SETTINGS = ((0, False), (1000, False), (1, False), (1, True))


def build_runner(data_root: str, work_dir: str, scale: Optional[Sequence[int]] = None) -> Any:
    """The demo RetinaNet Runner with its model, optimizer and loop built, no workers.

    ``scale`` (width, height) replaces the train pipeline's resize target (the demo's is
    160x128), to measure at a resolution closer to real training.
    """
    from mmengine.config import Config
    from mmengine.runner import Runner

    import mmrepro  # noqa: F401
    cfg = Config.fromfile(osp.join(REPO, 'configs', 'retinanet_r18_fpn_3e_tinycoco.py'))
    cfg.work_dir = work_dir
    cfg.train_dataloader.num_workers = 0
    cfg.train_dataloader.persistent_workers = False
    cfg.train_dataloader.dataset.data_root = data_root.rstrip('/') + '/'
    if scale:
        for step in cfg.train_dataloader.dataset.pipeline:
            if step.type == 'RandomResize':
                step.scale = tuple(scale)
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    cfg.test_dataloader = cfg.test_cfg = cfg.test_evaluator = None
    cfg.custom_hooks = []
    runner = Runner.from_cfg(cfg)
    runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
    runner.train_loop  # noqa: B018 (builds the loop the hook looks at)
    runner.model.train()
    return runner


def make_hooks(runner: Any) -> Dict[str, Any]:
    """One ReproducibilityHook per mode (None for ``no hook``); tracers write apart."""
    from mmrepro.hooks import ReproducibilityHook
    from mmrepro.trace import Tracer
    hooks: Dict[str, Any] = {'no hook': None}
    for number, (mode, (interval, forward)) in enumerate(zip(MODES[1:], SETTINGS,
                                                              strict=True)):
        hook = ReproducibilityHook(trace_interval=0)
        hook.before_run(runner)  # writes the run record, as in training
        if interval:
            hook._tracer = Tracer(runner, interval, filename=f'trace_{number}.jsonl',
                                  forward=forward)
        hooks[mode] = hook
    return hooks


def instrument(hook: Any) -> List[float]:
    """Accumulate the time spent in ``hook``'s and its tracer's callbacks into a cell."""
    total = [0.0]
    for obj, names in ((hook, ('before_train_iter', 'after_train_iter')),
                       (hook._tracer, ('_on_forward', '_on_grad', '_digest_grads'))):
        for name in names if obj is not None else ():
            setattr(obj, name, timed(getattr(obj, name), total))
    return total


def step(runner: Any, hook: Any, batch: Any, index: int) -> float:
    """One timed training iteration (the Runner's ``index``-th) with ``hook``'s callbacks."""
    runner.train_loop._iter = index  # what the tracer and the keyed draws read
    start = time.perf_counter()
    if hook is not None:
        hook.before_train_iter(runner, index, batch)
    outputs = runner.model.train_step(batch, optim_wrapper=runner.optim_wrapper)
    if hook is not None:
        hook.after_train_iter(runner, index, batch, outputs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=15,
                        help='timed iterations per mode (default: 15)')
    parser.add_argument('--warmup', type=int, default=2, help='untimed rounds first')
    parser.add_argument('--batches', type=int, default=4, help='distinct batches cycled')
    parser.add_argument('--data', default='data/demo', help='the demo data (made if missing)')
    parser.add_argument('--threads', type=int, default=None, help='torch intra-op threads')
    parser.add_argument('--img-scale', type=int, nargs=2, metavar=('W', 'H'),
                        help='train resize target instead of the demo\'s 160 128')
    args = parser.parse_args()
    import torch

    from mmrepro.demo import make_tiny_coco
    if args.threads:
        torch.set_num_threads(args.threads)
    make_tiny_coco(args.data)
    with tempfile.TemporaryDirectory() as work_dir:
        runner = build_runner(args.data, work_dir, args.img_scale)
        loader = iter(runner.train_dataloader)
        batches = [next(loader) for _ in range(args.batches)]
        hooks = make_hooks(runner)
        inside = {mode: instrument(hook) for mode, hook in hooks.items() if hook is not None}
        times: Dict[str, List[float]] = {mode: [] for mode in MODES}
        for round_ in range(args.warmup + args.rounds):
            if round_ == args.warmup:
                for cell in inside.values():
                    cell[0] = 0.0
            order = random.Random(round_).sample(MODES, len(MODES))
            for mode in order:
                # Iterations 1001 on: untraced at N=1000, which traces the dense
                # points below its interval (1, 2, 4, ..., 512) and then every 1000th.
                elapsed = step(runner, hooks[mode], batches[round_ % len(batches)],
                               FIRST_ITER + round_)
                if round_ >= args.warmup:
                    times[mode].append(elapsed)
        for hook in hooks.values():
            if hook is not None:
                hook.after_run(runner)
    base = statistics.median(times['no hook'])
    print(f'torch {torch.__version__}, {torch.get_num_threads()} threads, '
          f'{platform.machine()}, {platform.processor() or "cpu"}, '
          f'{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, '
          f'{args.rounds} interleaved rounds, batch 2, images resized to about '
          f'{"x".join(map(str, args.img_scale or (160, 128)))}')
    print()
    print('| mode | median s/iter | overhead: median of paired ratios | '
          'mean, 95 % CI | time in hook + tracer callbacks |')
    print('|---|---:|---:|---:|---:|')
    for mode in MODES:
        paired = [t / b - 1 for t, b in zip(times[mode], times['no hook'], strict=True)]
        spread = 1.96 * statistics.stdev(paired) / len(paired) ** 0.5 if len(paired) > 1 \
            else float('nan')
        spent = inside[mode][0] / args.rounds if mode in inside else 0.0
        print(f'| {mode} | {statistics.median(times[mode]):.3f} | '
              f'{100 * statistics.median(paired):+.1f} % | '
              f'{100 * statistics.mean(paired):+.1f} +- {100 * spread:.1f} % | '
              f'{1000 * spent:.2f} ms = {100 * spent / base:.2f} % |')


if __name__ == '__main__':
    main()
