"""mmdet datasets and wrappers give the same augmented samples with any num_workers."""
import hashlib

import pytest
from mmengine.runner import Runner
from support.mmdet_data import coco, loader_cfg

from mmrepro.data import make_reproducible


def _digest(loader, epochs=2):
    digest = hashlib.sha256()
    for epoch in range(epochs):
        loader.batch_sampler.sampler.set_epoch(epoch)
        for batch in loader:
            for img, sample in zip(batch['inputs'], batch['data_samples'], strict=True):
                digest.update(img.numpy().tobytes())
                digest.update(sample.gt_instances.bboxes.numpy().tobytes())
    return digest.hexdigest()


def _wrapped(kind, data_root):
    base = coco(data_root)
    if kind == 'CocoDataset':
        return base
    if kind == 'RepeatDataset':
        return dict(type='RepeatDataset', times=2, dataset=base)
    if kind == 'ConcatDataset':
        return dict(type='ConcatDataset', datasets=[base, coco(data_root)])
    return dict(type='ClassBalancedDataset', oversample_thr=0.5, dataset=base)


@pytest.mark.parametrize('kind', ['CocoDataset', 'RepeatDataset', 'ConcatDataset',
                                  'ClassBalancedDataset'])
def test_wrappers_same_samples_for_0_and_2_workers(data_root, kind):
    digests = []
    for workers in (0, 2):
        cfg = loader_cfg(_wrapped(kind, data_root), num_workers=workers,
                         batch_sampler=dict(type='AspectRatioBatchSampler'))
        cfg['collate_fn'] = dict(type='pseudo_collate')
        digests.append(_digest(make_reproducible(Runner.build_dataloader(cfg, seed=3),
                                                         dict(seed=3))))
    assert digests[0] == digests[1]

