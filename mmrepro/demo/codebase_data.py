"""Data for the other OpenMMLab codebases, derived from the tiny COCO demo dataset.

Image folders by class (mmpretrain), DOTA-format text files (mmrotate) and COCO
keypoints (mmpose), made from the demo's images and boxes
(:func:`~mmrepro.demo.make_tiny_coco`); MMYOLO trains on the COCO boxes themselves.
"""
from __future__ import annotations

import json
import os
import os.path as osp
from typing import Dict, List

from .tiny_coco import CLASSES


def derive_codebase_data(coco: str, data: str) -> None:
    """From the demo dataset at ``coco`` (its training split), write under ``data``:
    ``cls/<class>/`` (links to each image, by its largest box's class),
    ``dota/images/`` and ``dota/annfiles/`` (each box as a quadrilateral, DOTA's text
    format) and ``keypoints/train.json`` (each box a "person" with 17 visible keypoints
    on a grid inside it)."""
    with open(osp.join(coco, 'annotations', 'train.json')) as f:
        ann = json.load(f)
    images = {image['id']: image for image in ann['images']}
    boxes: Dict[int, List[dict]] = {}
    for a in ann['annotations']:
        boxes.setdefault(a['image_id'], []).append(a)
    for sub in ('dota/images', 'dota/annfiles', 'keypoints', *(f'cls/{c}' for c in CLASSES)):
        os.makedirs(osp.join(data, sub), exist_ok=True)
    people = []
    for image_id, image in images.items():
        source = osp.abspath(osp.join(coco, 'images', image['file_name']))
        stem = osp.splitext(image['file_name'])[0]
        largest = max(boxes.get(image_id, []), key=lambda a: a['area'], default=None)
        links = [osp.join(data, 'dota', 'images', image['file_name'])]
        if largest is not None:
            links.append(osp.join(data, 'cls', CLASSES[largest['category_id'] - 1],
                                  image['file_name']))
        for link in links:
            if not osp.lexists(link):
                os.symlink(source, link)
        lines = []
        for a in boxes.get(image_id, []):
            x, y, w, h = a['bbox']
            corners = (x, y, x + w, y, x + w, y + h, x, y + h)
            lines.append(' '.join(f'{v:g}' for v in corners)
                         + f" {CLASSES[a['category_id'] - 1]} 0")
            points = [(x + w * (0.2 + 0.6 * (k % 4) / 3), y + h * (0.1 + 0.8 * (k // 4) / 4))
                      for k in range(17)]
            people.append(dict(id=len(people) + 1, image_id=image_id, category_id=1,
                               bbox=a['bbox'], area=a['area'], iscrowd=0, num_keypoints=17,
                               keypoints=[v for p in points for v in (*p, 2)]))
        with open(osp.join(data, 'dota', 'annfiles', stem + '.txt'), 'w') as f:
            f.write('\n'.join(lines) + '\n')
    with open(osp.join(data, 'keypoints', 'train.json'), 'w') as f:
        json.dump(dict(images=ann['images'], annotations=people,
                       categories=[dict(id=1, name='person')]), f)
