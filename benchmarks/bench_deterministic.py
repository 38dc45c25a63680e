#!/usr/bin/env python
"""Training throughput with deterministic mode on vs off, side by side in one process.

For each detector, two copies of the model start from the same weights: one trains
with ``deterministic=False`` (mmcv ops as they are), one with ``deterministic=True``
(``torch.use_deterministic_algorithms(True)`` and mmcv RoIAlign replaced, exactly as
a Runner under mmrepro does). Their train steps alternate on the same real batches
(the demo pipeline) in alternating blocks (switching the global deterministic flag
every step would measure the switch, not the mode). The table reports the median
iteration time inside blocks, the ratio, and the median first iteration after a switch.

    python benchmarks/bench_deterministic.py [--depth 18|50] [--block 4] [--rounds 3]
        [--device cpu|cuda] [--scale 1333 800] [--models "Faster R-CNN" "Mask R-CNN"]

``--scale W H`` trains at that scale (the demo images are resized up to it, boxes and
masks with them); the GPU target is measured with ``--device cuda --depth 50
--scale 1333 800 --models "Faster R-CNN" "Mask R-CNN"`` (``tools/bench_gpu.sh``).
"""
from __future__ import annotations

import argparse
import copy
import itertools
import os.path as osp
import statistics
import sys
import time

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, REPO)

CONFIGS = {'RetinaNet': 'retinanet_r18_fpn_3e_tinycoco.py',
           'Faster R-CNN': 'faster-rcnn_r18_fpn_3e_tinycoco.py',
           'Mask R-CNN': 'mask-rcnn_r18_fpn_3e_tinycoco.py'}


def scaled_pipeline(name: str, scale) -> list:
    """The training pipeline at a fixed ``(w, h)`` scale (masks loaded for Mask R-CNN)."""
    return [dict(type='LoadImageFromFile'),
            dict(type='LoadAnnotations', with_bbox=True, with_mask='Mask' in name),
            dict(type='Resize', scale=tuple(scale), keep_ratio=True),
            dict(type='RandomFlip', prob=0.5), dict(type='PackDetInputs')]


def build(name: str, depth: int, device: str, data: str, scale=None):
    import torch
    from mmdet.registry import MODELS
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import init_default_scope
    from mmengine.runner import Runner

    import mmrepro  # noqa: F401
    cfg = Config.fromfile(osp.join(REPO, 'configs', CONFIGS[name]))
    init_default_scope('mmdet')
    if depth != 18:
        cfg.model.backbone.depth = depth
        cfg.model.neck.in_channels = [256, 512, 1024, 2048]
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()  # as the Runner does
    model = model.to(device)
    cfg.train_dataloader.dataset.data_root = data
    if scale:
        cfg.train_dataloader.dataset.pipeline = scaled_pipeline(name, scale)
    cfg.train_dataloader.num_workers = 0
    cfg.train_dataloader.persistent_workers = False
    loader = Runner.build_dataloader(cfg.train_dataloader, seed=0)
    batches = list(itertools.islice(loader, 4))
    make_optim = lambda m: build_optim_wrapper(m, copy.deepcopy(cfg.optim_wrapper))  # noqa
    return model, batches, make_optim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--depth', type=int, default=18)
    parser.add_argument('--block', type=int, default=4)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--data', default='data/demo')
    parser.add_argument('--scale', type=int, nargs=2, metavar=('W', 'H'), default=None,
                        help='train at this scale (default: the demo pipeline)')
    parser.add_argument('--models', nargs='+', choices=list(CONFIGS),
                        default=['RetinaNet', 'Faster R-CNN'])
    args = parser.parse_args()
    import torch

    from mmrepro.demo import make_tiny_coco
    from mmrepro.ops.op_audit import audit_model
    data = make_tiny_coco(args.data)['root'].rstrip('/') + '/'
    sync = torch.cuda.synchronize if args.device == 'cuda' else (lambda: None)
    where = f'resized to {args.scale[0]}x{args.scale[1]}' if args.scale else 'demo pipeline'
    device = (torch.cuda.get_device_name() if args.device == 'cuda' else 'CPU')
    print(f'train-step time, deterministic off vs on, ResNet-{args.depth} FPN, '
          f'{device}, torch {torch.__version__}, CUDA {torch.version.cuda}, batch 2 '
          f'({where}), {args.rounds} rounds of {args.block}-iteration blocks per mode')
    print('| detector | off: s/iter | on: s/iter | on/off throughput | '
          'first iter after switch, off / on (s) |')
    print('|---|---|---|---|---|')
    for name in args.models:
        model_off, batches, make_optim = build(name, args.depth, args.device, data,
                                               args.scale)
        model_on = copy.deepcopy(model_off)
        audit_model(model_on, deterministic=True, replace=True)
        optims = {False: make_optim(model_off), True: make_optim(model_on)}
        models = {False: model_off, True: model_on}
        times = {False: [], True: []}
        first = {False: [], True: []}
        for _ in range(args.rounds):
            for det in (False, True):
                torch.use_deterministic_algorithms(det)
                models[det].train()
                for it in range(args.block):
                    sync()
                    start = time.perf_counter()
                    models[det].train_step(batches[it % len(batches)], optims[det])
                    sync()
                    (first if it == 0 else times)[det].append(time.perf_counter() - start)
        torch.use_deterministic_algorithms(False)
        off, on = statistics.median(times[False]), statistics.median(times[True])
        print(f'| {name} | {off:.3f} | {on:.3f} | {off / on:.3f} | '
              f'{statistics.median(first[False]):.2f} / {statistics.median(first[True]):.2f} |')


if __name__ == '__main__':
    main()
