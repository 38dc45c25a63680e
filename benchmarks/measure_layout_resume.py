#!/usr/bin/env python
"""A mid-epoch checkpoint of 2 ranks x 2, resumed in every other layout of global batch 4, CPU.

Trains RetinaNet R18 (the test suite's narrow variant, tiny COCO data with MMDetection's
``DefaultSampler`` + ``AspectRatioBatchSampler``, 2 epochs of global batch 4: 8 optimizer
steps, a warmup in iterations) on 2 ranks x 2 with a checkpoint at iteration 6 (the
middle of epoch 2), resumes that checkpoint (``tools/train.py --resume``) in each layout
of ``tests/support/layout_runs.py`` (ranks on CPU over gloo, one intra-op thread each) and
compares each final checkpoint with the uninterrupted 2 ranks x 2 run: are the samples
(image, size, flip, pixels) the same in every step after the resume, how many weight
tensors are bit-identical, and the norm of the weight difference relative to the
weights' norm. The first row resumes on 2 ranks x 2 itself (an exact resume), for
reference. Below the table: what each resumed run's log says about the resume.

    python benchmarks/measure_layout_resume.py [--data DIR]
"""
from __future__ import annotations

import argparse
import datetime
import glob
import os.path as osp
import sys
import tempfile
from typing import List

BENCH = osp.dirname(osp.abspath(__file__))
REPO = osp.dirname(BENCH)
sys.path[:0] = [REPO, osp.join(REPO, 'tests'), BENCH]  # mmrepro, tests/support, benchmarks

from measure_layouts import _name, compare_weights  # noqa: E402
from support.layout_runs import LayoutRuns, stream  # noqa: E402
from support.repro_utils import checkpoint  # noqa: E402

#: A checkpoint in the middle of epoch 2 (iteration 6 of 8 at global batch 4 on 2 x 2).
MID_EPOCH = 'default_hooks = dict(checkpoint=dict(by_epoch=False, interval=6, save_last=True))\n'
#: The layouts of ``tests/support/layout_runs.py`` that resume the 2 x 2 checkpoint (2 x 2
#: itself first: the exact resume).
RESUMED = ('2x2', '1x2acc2', '4x1', '1x4', '2x1acc2', '1x1acc4')
#: The checkpoint's step: samples of this step and later are trained after the resume.
RESUME_STEP = 6


def resume_lines(work_dir: str) -> List[str]:
    """The resumed run's log lines about the resume (``mmrepro: resum...``), prefix cut."""
    with open(sorted(glob.glob(osp.join(work_dir, '*', '*.log')))[-1]) as f:
        return [line.split(' - mmengine - INFO - ', 1)[-1].strip() for line in f
                if 'mmrepro: resum' in line]


def main() -> None:
    """Train the 2 x 2 run, resume its iteration-6 checkpoint in each layout, print tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--data', default=None, help='the demo data (made in a temp dir)')
    args = parser.parse_args()
    from mmrepro.demo import make_tiny_coco
    root = tempfile.mkdtemp(prefix='mmrepro-layout-resume-')
    data = make_tiny_coco(args.data or osp.join(root, 'data'))['root']
    runs = LayoutRuns(root, data, max_epochs=2)
    ref = runs.get('retinanet', '2x2', MID_EPOCH, '-mid')
    saved = checkpoint(ref, f'iter_{RESUME_STEP}.pth')
    expected = [r[3] for r in stream(ref) if r[0] >= RESUME_STEP]
    print(f'# retinanet: the 2 x 2 checkpoint of iteration {RESUME_STEP} resumed in every '
          f'layout of global batch 4 vs the uninterrupted 2 x 2 run, '
          f'{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC\n')
    print('| resumed as (batch x ranks x accumulation) | same samples in the 2 steps after '
          'the resume | '
          'identical weight tensors | weight difference, relative (L2) |')
    print('|---|---|---:|---:|')
    logs = {}
    for layout in RESUMED:
        work_dir = runs.get('retinanet', layout, MID_EPOCH, '-resumed',
                            args=('--resume', saved))
        samples = [r[3] for r in stream(work_dir)]
        same_data = samples == expected and len(samples) == 8
        same, total, diff = compare_weights(checkpoint(ref), checkpoint(work_dir))
        note = ' (same layout)' if layout == '2x2' else ''
        print(f'| {_name(layout)}{note} | {"yes" if same_data else "no"} | '
              f'{same}/{total} | {diff:.2e} |')
        logs[layout] = resume_lines(work_dir)
    print('\nWhat each resumed run logs about the resume:\n')
    for layout, lines in logs.items():
        print(f'- {_name(layout)}:')
        for line in lines:
            print(f'  `{line}`')


if __name__ == '__main__':
    main()
