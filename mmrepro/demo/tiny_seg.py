"""Generate a tiny semantic-segmentation dataset: rectangles on noise, with label maps."""
from __future__ import annotations

import json
import os
import os.path as osp
from typing import Dict

import cv2
import numpy as np

from .tiny_coco import CLASSES

#: Label of the background; the shapes get 1..len(CLASSES).
SEG_CLASSES = ('background', *CLASSES)
_COLOURS = ((40, 40, 220), (40, 200, 40), (220, 60, 40))  # BGR, as the detection demo


def make_tiny_seg(root: str, num_train: int = 8, num_val: int = 4, size: int = 64,
                  seed: int = 0) -> Dict[str, str]:
    """Write the dataset under ``root`` (idempotent: an identical one is kept).

    Layout (MMSegmentation's ``BaseSegDataset`` with ``.png`` suffixes):
    ``root/img_dir/{train,val}/NNN.png`` (colour images) and
    ``root/ann_dir/{train,val}/NNN.png`` (uint8 label maps: 0 background, 1-3 the
    shapes' classes). The content is a pure function of the arguments.

    Returns:
        dict: Paths of ``root``, ``train_img``, ``train_ann``, ``val_img``, ``val_ann``.
    """
    paths = dict(root=root)
    for split in ('train', 'val'):
        paths[f'{split}_img'] = osp.join(root, 'img_dir', split)
        paths[f'{split}_ann'] = osp.join(root, 'ann_dir', split)
    stamp = osp.join(root, 'params.json')
    params = dict(num_train=num_train, num_val=num_val, size=size, seed=seed, version=1)
    if osp.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == params:
                return paths
    rng = np.random.RandomState(seed)
    for split, count in (('train', num_train), ('val', num_val)):
        os.makedirs(paths[f'{split}_img'], exist_ok=True)
        os.makedirs(paths[f'{split}_ann'], exist_ok=True)
        for i in range(count):
            img = rng.randint(0, 60, size=(size, size, 3)).astype(np.uint8)
            label = np.zeros((size, size), dtype=np.uint8)
            for _ in range(rng.randint(1, 4)):
                cls = int(rng.randint(len(CLASSES)))
                w, h = int(rng.randint(8, size // 2)), int(rng.randint(8, size // 2))
                x, y = int(rng.randint(0, size - w)), int(rng.randint(0, size - h))
                img[y:y + h, x:x + w] = _COLOURS[cls]
                label[y:y + h, x:x + w] = cls + 1
            cv2.imwrite(osp.join(paths[f'{split}_img'], f'{i:03d}.png'), img)
            cv2.imwrite(osp.join(paths[f'{split}_ann'], f'{i:03d}.png'), label)
    with open(stamp, 'w') as f:
        json.dump(params, f)
    return paths
