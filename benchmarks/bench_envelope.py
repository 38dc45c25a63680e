#!/usr/bin/env python
"""Rounding or real on the demo: the whole ``mmrepro-check --against``, envelope included.

A baseline is trained on the generated tiny COCO data (RetinaNet R18-FPN, 1 epoch of 8
optimizer steps, 2 intra-op threads, a neck whose output is scaled by a factor held in
a module beside the plugin that registers it, 1.0 here). Then, in one run, each case is
checked against it with ``tools/check_repro.py CONFIG --against BASELINE`` in a fresh
process, timed wall to wall:

- ``same``: the baseline's config here (bit for bit: no envelope is trained);
- ``threads 1``: ``OMP_NUM_THREADS=1`` (rounding);
- ``cpu_isa avx2``: ``randomness.cpu_isa='avx2'`` on a CPU whose default is AVX-512
  (rounding; skipped elsewhere);
- ``lr +0.1 %``, ``loss_bbox weight +1 %``: config changes (real);
- ``neck x (1 + 1e-3)``: the factor's module edited, which no record shows (real).

Each row gives the verdict, the largest distance over the envelope at any step and
quantity, the largest forward output over its envelope at the first iteration, and the
check's wall time. Keep the machine otherwise idle.

    python benchmarks/bench_envelope.py [--out FILE.md]
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from timing import report  # noqa: E402 (benchmarks/timing.py, next to this script)

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
PLUGIN = '''from mmdet.models.necks import FPN
from mmdet.registry import MODELS

from neck_scale import SCALE


@MODELS.register_module()
class ScaledFPN(FPN):
    def forward(self, inputs):
        return tuple(out * SCALE for out in super().forward(inputs))
'''
CONFIG = '''_base_ = {base!r}
data_root = {data!r}
train_dataloader = dict(num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root))
val_dataloader = None
val_cfg = None
val_evaluator = None
train_cfg = dict(max_epochs=1)
custom_imports = dict(imports=['mmrepro', 'scaled_neck'], allow_failed_imports=False)
model = dict(neck=dict(type='ScaledFPN'))
'''
#: ``(case, --cfg-options, environment, the neck's factor)``.
CASES: List[Tuple[str, List[str], Dict[str, str], str]] = [
    ('same', [], {}, '1.0'),
    ('threads 1', [], {'OMP_NUM_THREADS': '1'}, '1.0'),
    ('cpu_isa avx2', ['randomness.cpu_isa=avx2'], {}, '1.0'),
    ('lr +0.1 %', ['optim_wrapper.optimizer.lr=0.01001'], {}, '1.0'),
    ('loss_bbox weight +1 %', ['model.bbox_head.loss_bbox.loss_weight=1.01'], {}, '1.0'),
    ('neck x (1 + 1e-3)', [], {}, '1.0 + 1e-3'),
]
_RATIO = re.compile(r'^\s+\d+\s+(.*)$')
_FORWARD = re.compile(r'first iteration, forward outputs: at most (\S+)x the envelope \((.*?);')


def _worst(out: str) -> Optional[float]:
    """The largest gradient or weight ratio of the envelope table, the judged ones (None:
    no table)."""
    table = out.split('(equivalent within rounding up to 1x):\n')
    if len(table) < 2:
        return None
    values = []
    for row in table[1].splitlines()[1:]:
        found = _RATIO.match(row)
        if not found:
            break
        cells = found.group(1).split()
        values += [float(cell[:-1]) for cell in cells[1:] if cell.endswith('x')]  # not loss
    return max(values) if values else None


def _forward(out: str) -> str:
    """The first iteration's largest forward ratio and its module (- if none)."""
    found = _FORWARD.search(out)
    return f'{found.group(1)}x ({found.group(2)})' if found else '-'


def _check(config: str, baseline: str, work: str, options: List[str],
           env: Dict[str, str]) -> Tuple[str, Optional[float], str, float, int]:
    command = [sys.executable, osp.join(REPO, 'tools', 'check_repro.py'), config, '--against',
               baseline, '--work-dir', work]
    if options:
        command += ['--go-on', '--cfg-options', *options]
    begin = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - begin
    verdict = next((line[len('verdict: '):] for line in done.stdout.splitlines()
                    if line.startswith('verdict: ')), done.stderr.strip()[-200:])
    return verdict, _worst(done.stdout), _forward(done.stdout), seconds, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', default=None, help='also write the table to this .md file')
    args = parser.parse_args()
    from mmrepro.demo import make_tiny_coco
    from mmrepro.determinism import cpu
    with tempfile.TemporaryDirectory(prefix='bench-envelope-') as root:
        data, ext = osp.join(root, 'data'), osp.join(root, 'ext')
        make_tiny_coco(data)
        os.makedirs(ext)
        with open(osp.join(ext, 'scaled_neck.py'), 'w') as f:
            f.write(PLUGIN)
        config = osp.join(root, 'retinanet_scaled.py')
        with open(config, 'w') as f:
            f.write(CONFIG.format(base=osp.join(REPO, 'configs',
                                                'retinanet_r18_fpn_3e_tinycoco.py'),
                                  data=data + '/'))
        env = dict(os.environ, OMP_NUM_THREADS='2',
                   PYTHONPATH=os.pathsep.join(p for p in (ext, REPO, os.environ.get(
                       'PYTHONPATH')) if p))
        baseline = osp.join(root, 'baseline')

        def scale(factor: str) -> None:
            with open(osp.join(ext, 'neck_scale.py'), 'w') as f:
                f.write(f'SCALE = {factor}\n')
        scale('1.0')
        subprocess.run([sys.executable, osp.join(REPO, 'tools', 'train.py'), config,
                        '--work-dir', baseline], env=env, check=True, capture_output=True)
        rows = ['| case | exit | verdict | largest gradient or weight distance / envelope | '
                'first iteration: largest forward output / envelope | check wall time |',
                '|---|---:|---|---:|---|---:|']
        for i, (name, options, extra, factor) in enumerate(CASES):
            if 'cpu_isa' in name and cpu.capability() != 'AVX512':
                continue
            scale(factor)
            verdict, worst, forward, seconds, code = _check(
                config, baseline, osp.join(root, f'c{i}'), options, dict(env, **extra))
            short = verdict.split(': numerics differ')[0].split('; numerics differ')[0]
            shown = '-' if worst is None else f'{worst:.2g}x'
            rows.append(f'| {name} | {code} | {short} | {shown} | {forward} | '
                        f'{seconds:.1f} s |')
            print(rows[-1], flush=True)
    report('Rounding or real: the whole check on the demo, envelope included', 2,
           'each check once, wall to wall in a fresh process', rows, args.out)


if __name__ == '__main__':
    main()
