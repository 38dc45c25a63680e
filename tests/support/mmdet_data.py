"""Build mmdet datasets and loaders on the generated tiny data, in-process; and the
random augmentations every test pipeline uses."""
import copy
import hashlib
import logging
import os.path as osp
from typing import List, Sequence, Tuple

from mmengine.registry import init_default_scope

from mmrepro.demo import CLASSES


def aug_pipeline(scales: Sequence[Tuple[int, int]]) -> List[dict]:
    """The random augmentations of the tests: resize to one of ``scales`` (keeping the
    aspect ratio), crop 80 %, flip, photometric distortion."""
    return [
        dict(type='LoadImageFromFile'),
        dict(type='LoadAnnotations', with_bbox=True),
        dict(type='RandomChoiceResize', scales=list(scales), keep_ratio=True),
        dict(type='RandomCrop', crop_size=(0.8, 0.8), crop_type='relative_range'),
        dict(type='RandomFlip', prob=0.5),
        dict(type='PhotoMetricDistortion'),
        dict(type='PackDetInputs'),
    ]


#: The in-process datasets' augmentations (small images: fast fetches).
AUG = aug_pipeline([(96, 80), (112, 96)])


def coco(data_root, pipeline=None):
    """A CocoDataset config over the generated train split."""
    init_default_scope('mmdet')
    return dict(type='CocoDataset', data_root=data_root.rstrip('/') + '/',
                metainfo=dict(classes=CLASSES), ann_file='annotations/train.json',
                data_prefix=dict(img='images/'), filter_cfg=dict(filter_empty_gt=True),
                pipeline=copy.deepcopy(AUG if pipeline is None else pipeline))


def loader_cfg(dataset, sampler=None, num_workers=0, batch_sampler=None):
    cfg = dict(batch_size=2, num_workers=num_workers, persistent_workers=num_workers > 0,
               sampler=sampler or dict(type='DefaultSampler', shuffle=True), dataset=dataset)
    if batch_sampler is not None:
        cfg['batch_sampler'] = batch_sampler
    return cfg


#: The repo's Albu demo config: ``configs/albu_example``'s transform list and pipeline.
ALBU_CONFIG = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))),
                       'configs', 'retinanet_r18_fpn_albu_3e_tinycoco.py')


def _albu_config() -> dict:
    from mmengine.config import Config
    return Config.fromfile(ALBU_CONFIG).to_dict()


def albu(transforms=None) -> dict:
    """MMDetection's ``Albu`` as :data:`ALBU_CONFIG` (``configs/albu_example``) configures
    it (boxes only), over ``transforms`` (default: the albu_example list)."""
    step = next(t for t in _albu_config()['train_pipeline'] if t['type'] == 'Albu')
    if transforms is not None:
        step['transforms'] = copy.deepcopy(transforms)
    return step


def albu_pipeline(scale: Tuple[int, int]) -> List[dict]:
    """:data:`ALBU_CONFIG`'s train pipeline at ``scale``."""
    pipeline = _albu_config()['train_pipeline']
    next(t for t in pipeline if t['type'] == 'Resize')['scale'] = scale
    return pipeline


def batch_digests(loader, epochs=(0, 1)) -> List[str]:
    """sha256 of every batch's images and boxes (``pseudo_collate``), epoch by epoch."""
    out = []
    for epoch in epochs:
        loader.batch_sampler.sampler.set_epoch(epoch)
        for batch in loader:
            digest = hashlib.sha256()
            for img, sample in zip(batch['inputs'], batch['data_samples'], strict=True):
                digest.update(img.numpy().tobytes())
                digest.update(sample.gt_instances.bboxes.numpy().tobytes())
            out.append(digest.hexdigest())
    return out


def logged(make) -> List[Tuple[int, str]]:
    """``(level, message)`` of what MMEngine's current logger got while ``make()`` ran."""
    from mmengine.logging import MMLogger
    records = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        make()
    finally:
        logger.removeHandler(handler)
    return [(r.levelno, r.getMessage()) for r in records]
