"""Build mmdet datasets and loaders on the generated tiny data, in-process; and the
random augmentations every test pipeline uses."""
import copy
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
