#!/usr/bin/env python
"""The twelve zoo families in two layouts of global batch 4: 2 ranks x 2 vs 1 x 2 x 2, CPU.

For each family of the support matrix (``configs/zoo/<family>.py``: mmdet 3.3's config,
random init, the generated tiny COCO data named by ``MMREPRO_DEMO_DATA``) this trains
the config as it is, with only the layout changed: 2 ranks x 2 (``tools/dist_train.sh``,
torchrun over gloo) and 1 process x 2 x ``accumulative_counts=2``, both with one
intra-op thread (``OMP_NUM_THREADS=1``, ``randomness.threads=1``) and
``randomness.global_batch=4``, ``num_workers=0``, no validation, for 4 optimizer steps
(one epoch of the 16 images; Mask2Former's iteration loop: ``max_iters`` 4 or 8), and
compares the final checkpoints: the trained parameters, the BatchNorm buffers (running
statistics and counters) and, where the family has an
``EMAHook``, the EMA weights (MMEngine's ``EMAHook`` swaps them: ``state_dict`` holds
the EMA, ``ema_state_dict`` the trained weights). A run that fails is a row with its
error's first line. An extra row, ``rtmdet, BN``, trains RTMDet with plain BatchNorm:
on more than one rank its config's ``norm_cfg=dict(type='SyncBN')`` builds torch's
SyncBatchNorm, and ``RTMDet(use_syncbn=True)`` converts every BatchNorm to it, which DDP
refuses on CPU; so the row sets ``use_syncbn=False`` and ``norm_cfg`` BN in backbone,
neck and head. Another, ``yolox, no batch resize``, trains YOLOX without its
``BatchSyncRandomResize`` (whose interval counts iterations, i.e. micro-batches), to
tell that cause from the others.

    python benchmarks/measure_zoo_layouts.py [--families F ...] [--data DIR]
"""
from __future__ import annotations

import argparse
import datetime
import os
import os.path as osp
import re
import shutil
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

BENCH = osp.dirname(osp.abspath(__file__))
REPO = osp.dirname(BENCH)
sys.path[:0] = [REPO, osp.join(REPO, 'tests')]  # mmrepro and the suite's training helpers

import torch  # noqa: E402
from support.dist_utils import dist_cmd, dist_env, run_bounded  # noqa: E402
from support.repro_utils import checkpoint  # noqa: E402

from mmrepro.checks.matrix.run import DATA_ENV, FAMILIES, config_path  # noqa: E402

#: Measured first (the families of most interest), then the rest in the matrix's order.
FIRST = ('retinanet', 'faster-rcnn', 'fcos', 'atss', 'rtmdet', 'yolox')
#: Extra rows: name -> (family, config lines added).
BN = "dict(type='BN', requires_grad=True)"
VARIANTS = {
    'rtmdet, BN': ('rtmdet', f'model = dict(use_syncbn=False, backbone=dict(norm_cfg={BN}), '
                             f'neck=dict(norm_cfg={BN}), bbox_head=dict(norm_cfg={BN}))\n'),
    'yolox, no batch resize': ('yolox', 'model = dict(data_preprocessor=dict('
                                        'batch_augments=None))\n'),
}
#: The layout's part of the child config (``{micro}``: accumulative_counts).
LAYOUT = """randomness = dict(threads=1, global_batch=4)
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False)
optim_wrapper = dict(accumulative_counts={micro})
"""
#: Why a family is not bitwise, read from MMDetection's and MMEngine's code (printed
#: only for a row that is not bitwise).
CAUSES = {
    'fcos': 'loss normalisers averaged over ranks (`reduce_mean` of positives, '
            'centerness), per micro-batch in one process',
    'atss': 'loss normalisers averaged over ranks (`reduce_mean` of positives, '
            'centerness), per micro-batch in one process',
    'yolox': '`reduce_mean` of positives; `BatchSyncRandomResize` interval (2) counted in '
             'iterations = micro-batches; EMAHook updates per micro-batch; BN statistics '
             'from rank 0\'s slice vs both micro-batches',
    'rtmdet': 'SyncBN: on 2 ranks the config\'s `norm_cfg` SyncBN and `RTMDet(use_syncbn='
              'True)` build torch SyncBatchNorm (CUDA only)',
    'rtmdet, BN': '`reduce_mean` of the loss normalisers; EMAHook updates per micro-batch; '
                  'BN statistics from rank 0\'s slice vs both micro-batches',
    'yolox, no batch resize': '`reduce_mean` of positives; EMAHook updates per '
                              'micro-batch; BN statistics from rank 0\'s slice vs both '
                              'micro-batches',
    'deformable-detr': '`reduce_mean` of the number of positives (DETR loss)',
    'dino': '`reduce_mean` of the number of positives (DETR and denoising losses)',
    'mask2former': '`reduce_mean` of the number of masks',
}
#: BatchNorm buffers (``state_dict`` names end so).
BUFFERS = ('running_mean', 'running_var', 'num_batches_tracked')
#: Per training run, at most (seconds).
TIMEOUT = 1800


def child_config(root: str, name: str, family: str, micro: int, extra: str = '') -> str:
    """Write the config of ``family`` in one layout (``micro`` accumulated) under
    ``root/configs`` as ``<name>-acc<micro>.py``; return its path."""
    from mmrepro.checks.runs import load_config
    cfg = load_config(config_path(family), [], world_size=None)
    steps = 4 * micro  # micro-batches: MMEngine's iteration count under accumulation
    if cfg.train_cfg.get('type', '').endswith('IterBasedTrainLoop'):
        stop = f'train_cfg = dict(max_iters={steps}, val_interval={steps + 1})\n'
    else:
        stop = 'train_cfg = dict(max_epochs=1)\n'  # 16 images at global batch 4
    path = osp.join(root, 'configs', f'{name}-acc{micro}.py')
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(f'_base_ = {config_path(family)!r}\n' + LAYOUT.format(micro=micro)
                + stop + extra)
    return path


def first_error(log: str) -> str:
    """The first line of the last exception a training log reports (torchrun's own
    ``ChildFailedError`` skipped)."""
    with open(log, errors='replace') as f:
        found = [m.group(1) for m in re.finditer(
            r'^(?:\[rank\d+\]: )?((?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt): .*)$',
            f.read(), re.M) if 'ChildFailedError' not in m.group(1)]
    return found[-1].strip() if found else f'failed, see {log}'


def train(config: str, work_dir: str, ranks: int) -> Optional[str]:
    """Train ``config`` on ``ranks`` processes; return None, or the error's first line."""
    env = {**dist_env(), 'OMP_NUM_THREADS': '1', 'CUDA_VISIBLE_DEVICES': ''}
    cmd = (dist_cmd(config, work_dir, nproc=ranks) if ranks > 1 else
           [sys.executable, osp.join(REPO, 'tools', 'train.py'), config, '--work-dir',
            work_dir])
    log = work_dir + '.log'
    os.makedirs(osp.dirname(log), exist_ok=True)
    try:
        code = run_bounded(cmd, env, TIMEOUT, log)
    except AssertionError:
        return f'not done within {TIMEOUT} s'
    return None if code == 0 else first_error(log)


def split_weights(path: str) -> Tuple[Dict[str, torch.Tensor], Optional[Dict[str, torch.Tensor]]]:
    """(trained weights, EMA weights or None) of a checkpoint, as ``state_dict``s.

    ``EMAHook.before_save_checkpoint`` swaps them: ``state_dict`` holds the EMA and
    ``ema_state_dict`` (keys ``module.<name>``, and ``steps``) the trained weights.
    """
    from mmrepro.resume.checkpoint_io import safe_load
    saved = safe_load(path)
    state = dict(saved['state_dict'])
    ema = saved.get('ema_state_dict')
    if ema is None:
        return state, None
    swapped = {k[len('module.'):]: v for k, v in ema.items() if k.startswith('module.')}
    return {**state, **swapped}, {k: state[k] for k in swapped}


def compare(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> str:
    """'bitwise (n)', or the relative L2 difference of the floating-point tensors and how
    many tensors are identical; '-' for no tensors."""
    if not a:
        return '-'
    same = sum(bool(torch.equal(t, b[k])) for k, t in a.items())
    if same == len(a) and list(a) == list(b):
        return f'bitwise ({len(a)})'
    names = [k for k, t in a.items() if t.dtype.is_floating_point]
    flat_a = torch.cat([a[k].double().flatten() for k in names])
    flat_b = torch.cat([b[k].double().flatten() for k in names])
    rel = float((flat_a - flat_b).norm() / flat_a.norm())
    return f'{rel:.1e} ({same}/{len(a)} identical)'


def parts(state: Dict[str, torch.Tensor]) -> Tuple[Dict[str, torch.Tensor],
                                                   Dict[str, torch.Tensor]]:
    """(parameters, BatchNorm buffers) of a ``state_dict``: running mean and variance and
    ``num_batches_tracked`` are buffers, the rest parameters."""
    buffers = {k: v for k, v in state.items() if k.endswith(BUFFERS)}
    return {k: v for k, v in state.items() if k not in buffers}, buffers


def measure(root: str, name: str) -> List[str]:
    """The row's cells after the name: 2 x 2, 1 x 2 x 2, parameters, BN buffers, EMA
    weights, cause."""
    family, extra = VARIANTS.get(name, (name, ''))
    runs = {}
    for ranks, micro in ((2, 1), (1, 2)):
        tag = re.sub(r'[^\w.]+', '-', name)  # 'yolox, no batch resize': yolox-no-batch-resize
        config = child_config(root, tag, family, micro, extra)
        work_dir = osp.join(root, 'runs', f'{tag}-acc{micro}')
        runs[ranks] = (work_dir, train(config, work_dir, ranks))
    cells = ['ok' if error is None else f'error: {error}' for _, error in runs.values()]
    if any(error for _, error in runs.values()):
        return cells + ['-', '-', '-', CAUSES.get(name, '')]
    (w2, e2), (w1, e1) = split_weights(checkpoint(runs[2][0])), split_weights(
        checkpoint(runs[1][0]))
    (p2, b2), (p1, b1) = parts(w2), parts(w1)
    found = [compare(p2, p1), compare(b2, b1),
             compare(e2, e1) if e2 is not None and e1 is not None else '-']
    exact = all(cell == '-' or cell.startswith('bitwise') for cell in found)
    for work_dir, _ in runs.values():
        shutil.rmtree(work_dir, ignore_errors=True)  # the checkpoints (up to ~0.5 GB)
    return cells + found + ['' if exact else CAUSES.get(name, '?')]


def main() -> None:
    """Train every family in both layouts and print the table, row by row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--families', nargs='+', default=None,
                        help=f'default: {", ".join(FIRST)}, the rest of the matrix, '
                             f'then {", ".join(VARIANTS)}')
    parser.add_argument('--data', default=None, help='the demo data (made in a temp dir)')
    args = parser.parse_args()
    from mmrepro.demo import make_tiny_coco
    root = tempfile.mkdtemp(prefix='mmrepro-zoo-layouts-')
    data = make_tiny_coco(args.data or osp.join(root, 'data'))['root']
    os.environ[DATA_ENV] = osp.join(osp.abspath(data), '')
    names = args.families or [*FIRST, *(f for f in FAMILIES if f not in FIRST), *VARIANTS]
    print(f'# The zoo in 2 ranks x 2 vs 1 process x 2 x accumulative_counts 2, 4 optimizer '
          f'steps, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC\n', flush=True)
    print('| family | 2 x 2 | 1 x 2 x 2 | parameters | BN buffers | EMA weights | why not '
          'bitwise (read from the code) |')
    print('|---|---|---|---|---|---|---|', flush=True)
    for name in names:
        print(f'| {name} | ' + ' | '.join(measure(root, name)) + ' |', flush=True)


if __name__ == '__main__':
    main()
