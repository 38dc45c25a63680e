#!/usr/bin/env python
"""Resume cost: time from launch to the first new iteration when resuming at iteration k.

mmrepro positions the DataLoader at the index level; plain MMEngine's
``IterBasedTrainLoop`` calls ``next()`` k times, loading and augmenting every skipped
batch. Both resume the same checkpoint (demo RetinaNet R18 pipeline, num_workers=0,
``IterBasedTrainLoop`` + ``InfiniteSampler``), whose iteration counter and data
position are set to k, and train one more iteration. Each resume is a fresh process;
the table reports its wall time. Also reports the size and capture time of the RNG
state mmrepro adds to every checkpoint.

    python benchmarks/bench_resume.py [--ks 8 64 512] [--scale W H]
"""
from __future__ import annotations

import argparse
import io
import os
import os.path as osp
import subprocess
import sys
import tempfile
import time
import timeit

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, REPO)

CONFIG = """_base_ = {base!r}
data_root = {data!r}
train_pipeline = [
    dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
    dict(type='RandomResize', scale={scale}, ratio_range=(0.8, 1.2), keep_ratio=True),
    dict(type='RandomFlip', prob=0.5), dict(type='PhotoMetricDistortion'),
    dict(type='PackDetInputs')]
train_dataloader = dict(num_workers=0, persistent_workers=False,
                        sampler=dict(_delete_=True, type='InfiniteSampler', shuffle=True),
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters={max_iters})
param_scheduler = []
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=1000),
                     logger=dict(type='LoggerHook', interval=1000))
log_processor = dict(by_epoch=False)
randomness = dict(seed=0, deterministic=False)
{plain}
"""
# Plain MMEngine: no mmrepro import, no hook (and torch>=2.6 needs the unsafe load).
PLAIN = "custom_imports = None\ncustom_hooks = []\n"
PLAIN_MAIN = """
import sys
from mmengine.config import Config
from mmengine.runner import Runner
cfg = Config.fromfile(sys.argv[1])
cfg.work_dir, cfg.resume, cfg.load_from = sys.argv[2], True, sys.argv[3]
Runner.from_cfg(cfg).train()
"""


def write(path: str, text: str) -> str:
    with open(path, 'w') as f:
        f.write(text)
    return path


def config(tmp: str, data: str, max_iters: int, plain: bool, scale: tuple) -> str:
    base = osp.join(REPO, 'configs', 'retinanet_r18_fpn_3e_tinycoco.py')
    name = f"{'plain' if plain else 'mmrepro'}_{max_iters}.py"
    return write(osp.join(tmp, name), CONFIG.format(base=base, data=data, max_iters=max_iters,
                                                    plain=PLAIN if plain else '',
                                                    scale=tuple(scale)))


def timed(cmd, env=None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return time.perf_counter() - start


def checkpoint_at(src: str, dst: str, k: int) -> str:
    import torch

    from mmrepro.resume.checkpoint_io import safe_load
    ckpt = safe_load(src)
    ckpt['meta']['iter'] = k
    ckpt['mmrepro']['position'] = dict(epoch=0, batches=k, unit='rank')  # this rank's batches
    torch.save(ckpt, dst)
    return dst


def rng_state_cost() -> tuple:
    import torch

    from mmrepro.rng.host_state import capture_rng_state
    buf = io.BytesIO()
    torch.save([capture_rng_state()], buf)
    ms = timeit.timeit(capture_rng_state, number=200) / 200 * 1e3
    return len(buf.getvalue()), ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--ks', type=int, nargs='+', default=[8, 64, 512])
    parser.add_argument('--scale', type=int, nargs=2, default=(160, 128),
                        help='training scale of the pipeline (1333 800: COCO)')
    args = parser.parse_args()
    from mmrepro.demo import make_tiny_coco
    tmp = tempfile.mkdtemp(prefix='bench_resume_')
    data = make_tiny_coco(osp.join(tmp, 'data'))['root'] + '/'
    train = osp.join(REPO, 'tools', 'train.py')
    timed([sys.executable, train, config(tmp, data, 1, False, args.scale), '--work-dir',
           osp.join(tmp, 'first')])
    first = osp.join(tmp, 'first', 'iter_1.pth')
    main_py = write(osp.join(tmp, 'plain_main.py'), PLAIN_MAIN)
    rows = []
    for k in args.ks:
        ckpt = checkpoint_at(first, osp.join(tmp, f'iter_{k}.pth'), k)
        ours = timed([sys.executable, train, config(tmp, data, k + 1, False, args.scale),
                      '--work-dir', osp.join(tmp, f'ours_{k}'), '--resume', ckpt])
        plain = timed([sys.executable, main_py, config(tmp, data, k + 1, True, args.scale),
                       osp.join(tmp, f'plain_{k}'), ckpt],
                      env={'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD': '1'})
        rows.append((k, ours, plain))
    size, ms = rng_state_cost()
    print('resume at iteration k: launch -> first new iteration done (s), one process each,')
    print(f'demo RetinaNet R18, batch 2, images resized to {tuple(args.scale)}, num_workers=0, '
          'IterBasedTrainLoop + InfiniteSampler')
    print('| k | mmrepro (index-level skip) | plain MMEngine (replay) | plain / mmrepro |')
    print('|---|---|---|---|')
    for k, ours, plain in rows:
        print(f'| {k} | {ours:.1f} | {plain:.1f} | {plain / ours:.2f} |')
    print(f'\nRNG state added per rank: {size / 1024:.1f} KiB in the checkpoint, '
          f'captured in {ms:.3f} ms')


if __name__ == '__main__':
    main()
