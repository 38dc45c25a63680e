#!/usr/bin/env python
"""How close every process layout of one global batch ends: data, and weights, CPU.

Trains RetinaNet R18 (the test suite's narrow variant, tiny COCO data with MMDetection's
``DefaultSampler`` + ``AspectRatioBatchSampler``, 2 epochs of global batch 4, a warmup
in iterations) in every layout of ``tests/layout_runs.py`` (ranks on CPU over gloo, one
intra-op thread each) and compares each with 2 ranks x 2: are the samples (image,
size, flip, pixels) the same in every iteration, how many weight tensors are
bit-identical, and the largest difference of a weight relative to its tensor's
largest magnitude.

    python benchmarks/measure_layouts.py [--model retinanet] [--data DIR]
"""
from __future__ import annotations

import argparse
import datetime
import os.path as osp
import sys
import tempfile

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, osp.join(REPO, 'tests'))  # the suite's training helpers

from layout_runs import LAYOUTS, LayoutRuns, stream  # noqa: E402
from repro_utils import checkpoint  # noqa: E402


def compare_weights(path_a: str, path_b: str):
    """(identical tensors, tensors, largest |a - b| / max |a| over tensors)."""
    from mmrepro.checkpoint_io import safe_load
    a, b = safe_load(path_a)['state_dict'], safe_load(path_b)['state_dict']
    same, worst = 0, 0.0
    for name, tensor in a.items():
        other = b[name]
        if tensor.dtype.is_floating_point:
            scale = float(tensor.abs().max()) or 1.0
            worst = max(worst, float((tensor - other).abs().max()) / scale)
        same += bool((tensor == other).all())
    return same, len(a), worst


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
          'identical weight tensors | max relative weight difference |')
    print('|---|---|---:|---:|')
    for layout in LAYOUTS:
        work_dir = runs.get(args.model, layout)
        same_data = [r[3] for r in stream(work_dir)] == [r[3] for r in stream(ref)]
        same, total, worst = compare_weights(checkpoint(ref), checkpoint(work_dir))
        batch, ranks, micro = LAYOUTS[layout]
        print(f'| {batch} x {ranks} x {micro} | {"yes" if same_data else "no"} | '
              f'{same}/{total} | {worst:.2e} |')


if __name__ == '__main__':
    main()
