"""Generate a tiny COCO-format dataset: coloured shapes on noise, a few dozen PNGs."""
from __future__ import annotations

import json
import os
import os.path as osp
from typing import Dict, List, Tuple

import cv2
import numpy as np

#: The demo's classes, one colour each.
CLASSES = ('red', 'green', 'blue')
_COLOURS = ((40, 40, 220), (40, 200, 40), (220, 60, 40))  # BGR
_SIZES = ((96, 128), (128, 96), (112, 112))  # (height, width): mixed aspect ratios


def make_tiny_coco(root: str, num_train: int = 16, num_val: int = 8,
                   seed: int = 0) -> Dict[str, str]:
    """Write the dataset under ``root`` (idempotent: an identical one is kept).

    A directory holding annotations this function did not write is refused, so a real
    dataset is never overwritten.

    Layout: ``root/images/{train,val}_NNN.png`` and
    ``root/annotations/{train,val}.json`` (COCO format, 1-3 filled rectangles per
    image, each with its box and its outline as a polygon ``segmentation``, so
    instance-segmentation models train on it too). The content is a pure function of
    the arguments.

    Args:
        root: Output directory.
        num_train: Number of training images.
        num_val: Number of validation images.
        seed: Seed of the generator.

    Returns:
        dict: Paths of ``root``, ``train_ann`` and ``val_ann``.

    Raises:
        FileExistsError: ``root`` holds annotations not written here.
    """
    paths = dict(root=root, train_ann=osp.join(root, 'annotations', 'train.json'),
                 val_ann=osp.join(root, 'annotations', 'val.json'))
    stamp = osp.join(root, 'annotations', 'params.json')
    params = dict(num_train=num_train, num_val=num_val, seed=seed, version=2)
    if osp.exists(stamp):
        if _read_json(stamp) == params:
            return paths
    elif any(osp.exists(paths[k]) for k in ('train_ann', 'val_ann')):
        raise FileExistsError(
            f'{root} already holds COCO annotations that make_tiny_coco did not write; '
            'give an empty or new directory (nothing was changed)')
    os.makedirs(osp.join(root, 'images'), exist_ok=True)
    os.makedirs(osp.join(root, 'annotations'), exist_ok=True)
    rng = np.random.RandomState(seed)
    for split, count in (('train', num_train), ('val', num_val)):
        images, annotations = [], []
        for i in range(count):
            name = f'{split}_{i:03d}.png'
            img, boxes = _draw(rng, _SIZES[i % len(_SIZES)])
            cv2.imwrite(osp.join(root, 'images', name), img)
            images.append(dict(id=i + 1, file_name=name, height=img.shape[0],
                               width=img.shape[1]))
            for label, (x, y, w, h) in boxes:
                annotations.append(dict(id=len(annotations) + 1, image_id=i + 1,
                                        category_id=label + 1, bbox=[x, y, w, h],
                                        segmentation=[[x, y, x + w, y, x + w, y + h,
                                                       x, y + h]],
                                        area=float(w * h), iscrowd=0))
        categories = [dict(id=k + 1, name=n) for k, n in enumerate(CLASSES)]
        with open(paths[f'{split}_ann'], 'w') as f:
            json.dump(dict(images=images, annotations=annotations,
                           categories=categories), f)
    with open(stamp, 'w') as f:
        json.dump(params, f)
    return paths


def _draw(rng: np.random.RandomState,
          size: Tuple[int, int]) -> Tuple[np.ndarray, List[Tuple[int, List[float]]]]:
    h, w = size
    img = rng.randint(0, 60, size=(h, w, 3)).astype(np.uint8)
    boxes = []
    for _ in range(rng.randint(1, 4)):
        label = int(rng.randint(len(CLASSES)))
        bw, bh = int(rng.randint(16, w // 2)), int(rng.randint(16, h // 2))
        x, y = int(rng.randint(0, w - bw)), int(rng.randint(0, h - bh))
        cv2.rectangle(img, (x, y), (x + bw - 1, y + bh - 1), _COLOURS[label], thickness=-1)
        boxes.append((label, [float(x), float(y), float(bw), float(bh)]))
    return img, boxes


def _read_json(path: str):
    with open(path) as f:
        return json.load(f)
