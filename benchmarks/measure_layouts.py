#!/usr/bin/env python
"""How close every process layout of one global batch ends: data, and weights, CPU.

Trains RetinaNet R18 (the test suite's narrow variant, tiny COCO data with MMDetection's
``DefaultSampler`` + ``AspectRatioBatchSampler``, 2 epochs of global batch 4, a warmup
in iterations) in every layout of ``tests/support/layout_runs.py`` (ranks on CPU over
gloo, one intra-op thread each) and compares each with 2 ranks x 2: are the samples
(image, size, flip, pixels) the same in every iteration, how many weight tensors are
bit-identical, and the norm of the weight difference relative to the weights' norm.
For scale, the last row is 2 ranks x 2 again with two intra-op threads per rank: the
same computation rounded differently.

    python benchmarks/measure_layouts.py [--model retinanet] [--data DIR]
"""
from __future__ import annotations

import argparse
import datetime
import os.path as osp
import sys
import tempfile

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path[:0] = [REPO, osp.join(REPO, 'tests')]  # mmrepro and the suite's training helpers

from support.layout_runs import LAYOUTS, LayoutRuns, stream  # noqa: E402
from support.repro_utils import checkpoint  # noqa: E402


def compare_weights(path_a: str, path_b: str):
    """(identical tensors, tensors, ||a - b|| / ||a|| over the floating-point weights)."""
    import torch

    from mmrepro.resume.checkpoint_io import safe_load
    a, b = safe_load(path_a)['state_dict'], safe_load(path_b)['state_dict']
    same = sum(bool((tensor == b[name]).all()) for name, tensor in a.items())
    names = [name for name, tensor in a.items() if tensor.dtype.is_floating_point]
    flat_a = torch.cat([a[name].double().flatten() for name in names])
    flat_b = torch.cat([b[name].double().flatten() for name in names])
    return same, len(a), float((flat_a - flat_b).norm() / flat_a.norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--model', default='retinanet', choices=['retinanet', 'faster_rcnn'])
    parser.add_argument('--data', default=None, help='the demo data (made in a temp dir)')
    args = parser.parse_args()
    from mmrepro.demo import make_tiny_coco
    root = tempfile.mkdtemp(prefix='mmrepro-layouts-')
    data = make_tiny_coco(args.data or osp.join(root, 'data'))['root']
    runs = LayoutRuns(root, data)
    ref = runs.get(args.model, '2x2')
    print(f'# {args.model}: every layout of global batch 4 vs 2 ranks x 2, '
          f'{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC')
    print('| layout (batch x ranks x accumulation) | same samples every iteration | '
          'identical weight tensors | weight difference, relative (L2) |')
    print('|---|---|---:|---:|')
    rows = [(layout, '', '') for layout in LAYOUTS]
    rows.append(('2x2', 'randomness = dict(threads=2)\n', '-threads2'))
    for layout, extra, tag in rows:
        work_dir = runs.get(args.model, layout, extra, tag)
        same_data = [r[3] for r in stream(work_dir)] == [r[3] for r in stream(ref)]
        same, total, diff = compare_weights(checkpoint(ref), checkpoint(work_dir))
        note = ', 2 threads per rank' if tag else ''
        print(f'| {_name(layout)}{note} | {"yes" if same_data else "no"} | '
              f'{same}/{total} | {diff:.2e} |')
    print('\nThe same per-rank batch (1), 4 ranks in all:\n')
    print('| layouts compared | identical weight tensors | weight difference, relative (L2) |')
    print('|---|---:|---:|')
    for a, b in (('4x1', '2x1acc2'), ('4x1', '1x1acc4'), ('2x1acc2', '1x1acc4')):
        same, total, diff = compare_weights(checkpoint(runs.get(args.model, a)),
                                            checkpoint(runs.get(args.model, b)))
        print(f'| {_name(a)} vs {_name(b)} | {same}/{total} | {diff:.2e} |')


def _name(layout: str) -> str:
    return ' x '.join(str(n) for n in LAYOUTS[layout])


if __name__ == '__main__':
    main()
