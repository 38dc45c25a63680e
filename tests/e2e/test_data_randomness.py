"""Data randomness is a function of (seed, epoch, sample): real detectors, any workers."""
import os.path as osp
import re
from typing import List

import pytest
from support.repro_utils import ITER_LOOP, checkpoint, losses, run_log, state_digest, train_log

pytestmark = pytest.mark.slow

# (model, tag, num_workers, persistent_workers); ('base' is num_workers=2, persistent).
# Every loader on RetinaNet; Faster R-CNN (whose RoI sampling draws in the main process)
# at both ends: no workers, and 4 persistent ones. The rest of the sweep (1 worker, 2
# workers not persistent, Faster R-CNN's 4) is the full tier. The floor stack runs
# RetinaNet's no-worker case (the loader's layout is the same code on both stacks).
LOADERS = [pytest.param('retinanet', 'nw0', 0, False, marks=pytest.mark.floor),
           ('faster_rcnn', 'nw0', 0, False)] + [
    ('retinanet', 'nw4', 4, True)] + [
    pytest.param(*loader, marks=pytest.mark.full) for loader in (
        ('retinanet', 'nw1', 1, False), ('retinanet', 'nw2-nonpersist', 2, False),
        ('faster_rcnn', 'nw4', 4, True))]

MOSAIC = """
train_dataloader = dict(
    _delete_=True, batch_size=2, num_workers={nw}, persistent_workers={persistent},
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type='MultiImageMixDataset',
        dataset=dict(type='CocoDataset', data_root=data_root,
                     metainfo=dict(classes=('red', 'green', 'blue')),
                     ann_file='annotations/train.json', data_prefix=dict(img='images/'),
                     filter_cfg=dict(filter_empty_gt=True, min_size=0),
                     pipeline=[dict(type='LoadImageFromFile'),
                               dict(type='LoadAnnotations', with_bbox=True)]),
        pipeline=[
            dict(type='Mosaic', img_scale=(128, 128), pad_val=114.0),
            dict(type='RandomAffine', scaling_ratio_range=(0.5, 1.5), border=(-64, -64)),
            dict(type='MixUp', img_scale=(128, 128), ratio_range=(0.8, 1.6), pad_val=114.0),
            dict(type='RandomFlip', prob=0.5),
            dict(type='PackDetInputs'),
        ]))
"""


def distinct_digests(*work_dirs: str) -> List[str]:
    """state_dict digests of the final checkpoints of ``work_dirs``, which must be distinct
    runs (a comparison of a run with itself would always pass)."""
    assert len({osp.realpath(work_dir) for work_dir in work_dirs}) == len(work_dirs), work_dirs
    return [state_digest(checkpoint(work_dir)) for work_dir in work_dirs]


@pytest.mark.parametrize('model, tag, num_workers, persistent', LOADERS)
def test_same_weights_with_any_num_workers(runs, model, tag, num_workers, persistent):
    base = runs.get(model, 'base')
    other = runs.get(model, tag, num_workers=num_workers, persistent=persistent)
    base_digest, other_digest = distinct_digests(base, other)
    assert other_digest == base_digest
    assert losses(train_log(other)) == losses(train_log(base))


def test_iteration_loop_same_weights_with_any_num_workers(runs):
    base, nw0 = distinct_digests(
        runs.get('retinanet', 'iterloop', extra=ITER_LOOP),
        runs.get('retinanet', 'iterloop-nw0', extra=ITER_LOOP, num_workers=0))
    assert nw0 == base


def test_mosaic_mixup_same_weights_for_0_and_2_workers(runs):
    nw0, nw2 = distinct_digests(*(
        runs.get('retinanet', f'mosaic-nw{nw}', extra=MOSAIC.format(nw=nw, persistent=nw > 0),
                 num_workers=nw)
        for nw in (0, 2)))
    assert nw0 == nw2


def test_validation_every_epoch_does_not_change_training(runs):
    with_val = runs.get('retinanet', 'val', validate=True)
    val_digest, base_digest = distinct_digests(with_val, runs.get('retinanet', 'base'))
    assert val_digest == base_digest
    log = run_log(with_val)
    # validation really ran after every epoch and evaluated boxes (its summary line)
    assert re.findall(r'Epoch\(val\) \[(\d)\]\[4/4\]\s+coco/bbox_mAP: ', log) == ['1', '2', '3']
    assert ' - ERROR - ' not in log
