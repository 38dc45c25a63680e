#!/usr/bin/env python
"""Data-loading cost of keyed CachedMosaic/CachedMixUp against the alternatives.

RTMDet-tiny's first-stage pipeline at its own scale (mosaic and mix-up at 640, caches
of 20 and 10) over the demo images enlarged to 640x480 JPEGs (so that decoding costs
what a COCO image costs), loaded through MMEngine's Runner code path, three ways:

- ``per-worker cache``: MMDetection's ``CachedMosaic``/``CachedMixUp``
  (``randomness.keyed_cache=False``): not the same across ``num_workers`` or resume;
- ``keyed cache``: mmrepro's default, exact (a partner missing from the process's memo
  is recomputed from its key: loaded and, for mix-up, mosaicked again);
- ``plain Mosaic/MixUp``: ``MultiImageMixDataset`` loads every partner from disk (exact
  with mmrepro too; a mix-up partner is a loaded image, not a mosaic, and ``MixUp``
  mixes every sample where RTMDet's ``CachedMixUp`` mixes half).

Each is timed over full passes in alternation (pass ``p`` is sampler epoch ``p``), with
``num_workers=0`` (the pipeline's cost in this process) and with 2 workers. It prints
milliseconds per sample and the ratios to the per-worker cache, and, for the keyed
cache, how many partners came from the memo.

    python benchmarks/bench_keyed_cache.py [--passes 2] [--batch 32] [--images 96]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import os.path as osp
import statistics
import sys
import tempfile
import time
from typing import Dict, List

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

SIZE = (640, 480)
LOAD = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True)]
AFTER_MOSAIC = [
    dict(type='RandomResize', scale=(1280, 1280), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=(640, 640)),
    dict(type='YOLOXHSVRandomAug'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Pad', size=(640, 640), pad_val=dict(img=(114, 114, 114))),
]
MIXUP = dict(img_scale=(640, 640), ratio_range=(1.0, 1.0), pad_val=(114, 114, 114))
CACHED = LOAD + [dict(type='CachedMosaic', img_scale=(640, 640), pad_val=114.0,
                      max_cached_images=20, random_pop=False), *AFTER_MOSAIC,
                 dict(type='CachedMixUp', max_cached_images=10, random_pop=False, prob=0.5,
                      **MIXUP),
                 dict(type='PackDetInputs')]
PLAIN = [dict(type='Mosaic', img_scale=(640, 640), pad_val=114.0), *AFTER_MOSAIC,
         dict(type='MixUp', **MIXUP), dict(type='PackDetInputs')]


def enlarged_coco(src: str, dst: str, images: int) -> str:
    """The demo training images resized to 640x480 JPEGs (boxes scaled), repeated."""
    import cv2
    with open(osp.join(src, 'annotations', 'train.json')) as f:
        coco = json.load(f)
    os.makedirs(osp.join(dst, 'images'), exist_ok=True)
    out = dict(coco, images=[], annotations=[])
    for i in range(images):
        info = coco['images'][i % len(coco['images'])]
        scale = (SIZE[0] / info['width'], SIZE[1] / info['height'])
        name = f'big_{i:04d}.jpg'
        img = cv2.imread(osp.join(src, 'images', info['file_name']))
        cv2.imwrite(osp.join(dst, 'images', name), cv2.resize(img, SIZE))
        out['images'].append(dict(info, id=i + 1, file_name=name, width=SIZE[0],
                                  height=SIZE[1]))
        for ann in coco['annotations']:
            if ann['image_id'] == info['id']:
                x, y, w, h = ann['bbox']
                box = [x * scale[0], y * scale[1], w * scale[0], h * scale[1]]
                out['annotations'].append(dict(
                    ann, id=len(out['annotations']) + 1, image_id=i + 1, bbox=box,
                    area=box[2] * box[3], segmentation=[]))
    os.makedirs(osp.join(dst, 'annotations'), exist_ok=True)
    with open(osp.join(dst, 'annotations', 'train.json'), 'w') as f:
        json.dump(out, f)
    return dst


def build(kind: str, root: str, batch: int, workers: int):
    from mmengine.registry import init_default_scope
    from mmengine.runner import Runner

    from mmrepro.data import make_reproducible
    from mmrepro.demo import CLASSES
    init_default_scope('mmdet')
    coco = dict(type='CocoDataset', data_root=root + '/', metainfo=dict(classes=CLASSES),
                ann_file='annotations/train.json', data_prefix=dict(img='images/'),
                filter_cfg=dict(filter_empty_gt=True), pipeline=copy.deepcopy(CACHED))
    if kind == 'plain Mosaic/MixUp':
        coco['pipeline'] = copy.deepcopy(LOAD)
        dataset = dict(type='MultiImageMixDataset', dataset=coco, pipeline=copy.deepcopy(PLAIN))
    else:
        dataset = coco
    cfg = dict(batch_size=batch, num_workers=workers, persistent_workers=workers > 0,
               sampler=dict(type='DefaultSampler', shuffle=True), dataset=dataset,
               collate_fn=dict(type='pseudo_collate'))
    return make_reproducible(Runner.build_dataloader(cfg, seed=0),
                             dict(seed=0, keyed_cache=kind == 'keyed cache'))


def memo_counts(loader) -> str:
    from mmrepro.data.keyed_cache import KeyedCache, pipeline_transforms
    caches = [t.results_cache for t in pipeline_transforms(loader.dataset)
              if isinstance(getattr(t, 'results_cache', None), KeyedCache)]
    return ', '.join(f'{type_}: {c.reused} from the memo, {c.recomputed} recomputed'
                     for type_, c in zip(('mosaic', 'mix-up'), caches, strict=True))


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--passes', type=int, default=2)
    parser.add_argument('--batch', type=int, default=32)
    parser.add_argument('--images', type=int, default=96)
    parser.add_argument('--data', default=osp.join('data', 'demo'))
    args = parser.parse_args(argv)
    import torch

    from mmrepro.demo import make_tiny_coco
    torch.set_num_threads(1)
    make_tiny_coco(args.data)
    kinds = ('per-worker cache', 'keyed cache', 'plain Mosaic/MixUp')
    with tempfile.TemporaryDirectory() as tmp:
        root = enlarged_coco(args.data, tmp, args.images)
        rows = []
        for workers in (0, 2):
            loaders = {kind: build(kind, root, args.batch, workers) for kind in kinds}
            times: Dict[str, list] = {kind: [] for kind in kinds}
            for p in range(args.passes + 1):  # pass 0 warms up (workers start)
                for kind, loader in loaders.items():
                    loader.batch_sampler.sampler.set_epoch(p)
                    start = time.perf_counter()
                    samples = sum(len(batch['inputs']) for batch in loader)
                    if p:
                        times[kind].append((time.perf_counter() - start) / samples * 1e3)
            base = statistics.median(times[kinds[0]])
            for kind in kinds:
                ms = statistics.median(times[kind])
                rows.append((workers, kind, ms, ms / base))
            if workers == 0:
                memo = memo_counts(loaders['keyed cache'])
            del loaders
    print(f'RTMDet-tiny stage-1 pipeline, {args.images} images of {SIZE[0]}x{SIZE[1]}, '
          f'batch {args.batch}, median of {args.passes} passes\n')
    print('| num_workers | pipeline | ms per sample | vs per-worker cache |')
    print('|---|---|---|---|')
    for workers, kind, ms, ratio in rows:
        print(f'| {workers} | {kind} | {ms:.1f} | {ratio:.2f}x |')
    print(f'\nkeyed cache, num_workers=0, all passes: {memo}')


if __name__ == '__main__':
    main()
