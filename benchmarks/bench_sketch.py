#!/usr/bin/env python
"""Cost of the trace's sketches at its first 32 steps: demo RetinaNet R18-FPN, CPU.

A traced step among the first 32 also sketches every applied gradient and every weight
after the step (:mod:`mmrepro.trace.sketch`), and the run's first iteration every
module's forward output. This times, alternately in one run, on the demo detector
(the repo's config, batch 2 at 160x128, random init):

- ``train step``: one forward, backward and SGD step (the reference);
- ``weight and gradient sketches``: what :class:`~mmrepro.trace.steps.StepRecorder`
  adds to a sketched step;
- ``forward sketches``: the forward pass with a sketch hook on every module, minus the
  forward pass alone (paid once per run, at its first iteration).

Each is the median of ``--repeats``. Keep the machine otherwise idle; the intra-op
thread count is fixed by ``--threads``.

    python benchmarks/bench_sketch.py [--repeats 11] [--threads 2] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import os.path as osp
import statistics
import sys
from functools import partial
from typing import Dict, List

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from timing import median_seconds, report  # noqa: E402 (benchmarks/timing.py, beside it)

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _model() -> torch.nn.Module:
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    init_default_scope('mmdet')
    cfg = Config.fromfile(osp.join(REPO, 'configs', 'retinanet_r18_fpn_3e_tinycoco.py'))
    torch.manual_seed(0)
    return MODELS.build(cfg.model)


def _batch(model: torch.nn.Module) -> Dict:
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData
    samples = []
    for _ in range(2):
        sample = DetDataSample(metainfo=dict(img_shape=(128, 160), pad_shape=(128, 160),
                                             batch_input_shape=(128, 160)))
        sample.gt_instances = InstanceData(bboxes=torch.tensor([[10., 10., 80., 90.]]),
                                           labels=torch.tensor([1]))
        samples.append(sample)
    return dict(inputs=torch.rand(2, 3, 128, 160) * 255, data_samples=samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=11)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--out', default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from mmrepro.trace.sketch import read_back, sketch, sketch_of
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = model.data_preprocessor(_batch(model), True)

    def step() -> None:
        optimizer.zero_grad()
        loss, _ = model.parse_losses(model(**batch, mode='loss'))
        loss.backward()
        optimizer.step()

    def weights_and_grads() -> None:
        named = list(model.named_parameters())
        read_back({n: sketch(p.grad) for n, p in named if p.grad is not None})
        read_back({n: sketch(p) for n, p in named})

    sketches: Dict[str, torch.Tensor] = {}

    def hook(name: str, module: torch.nn.Module, inputs: object, output: object) -> None:
        sketches[name] = sketch_of(output)

    def forward() -> None:
        with torch.no_grad():
            model(**batch, mode='loss')

    def forward_sketched() -> None:
        handles = [m.register_forward_hook(partial(hook, n)) for n, m in model.named_modules()]
        forward()
        read_back(sketches)
        for handle in handles:
            handle.remove()

    step()  # warm up
    results: Dict[str, List[float]] = {k: [] for k in ('step', 'sketch', 'fwd', 'fwd+')}
    for _ in range(args.repeats):  # alternately
        results['step'].append(median_seconds(step, 1))
        results['sketch'].append(median_seconds(weights_and_grads, 1))
        results['fwd'].append(median_seconds(forward, 1))
        results['fwd+'].append(median_seconds(forward_sketched, 1))
    med = {k: statistics.median(v) for k, v in results.items()}
    count = sum(p.numel() for p in model.parameters())
    rows = ['| what | median | of one train step |', '|---|---:|---:|',
            f"| train step (forward, backward, SGD) | {med['step'] * 1e3:.1f} ms | 100 % |",
            f"| weight and gradient sketches ({count:,} values each) | "
            f"{med['sketch'] * 1e3:.1f} ms | {100 * med['sketch'] / med['step']:.1f} % |",
            f"| forward sketches (every module, first iteration only) | "
            f"{(med['fwd+'] - med['fwd']) * 1e3:.1f} ms | "
            f"{100 * (med['fwd+'] - med['fwd']) / med['step']:.1f} % |"]
    report('Sketch cost at the first 32 traced steps, demo RetinaNet R18-FPN, CPU',
           args.threads, f'median of {args.repeats}, alternately', rows, args.out)


if __name__ == '__main__':
    main()
