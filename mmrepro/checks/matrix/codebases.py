"""Tiny configs of the other OpenMMLab codebases' zoos, as their own scripts train them.

Each model (:data:`CONFIGS`) is a real model of its codebase's zoo, inheriting its zoo
config through ``<package>::``, narrowed (:data:`NARROW_RESNET`), trained for
:data:`EPOCHS` epochs of :data:`SAMPLES` samples in batches of 2 (no validation) on the
data :func:`~mmrepro.demo.derive_codebase_data` derives from the tiny COCO demo, with
mmrepro's two lines (:data:`TWO_LINES`). :func:`write_codebase_config` writes one; the
support matrix checks them (its ``<package>-<model>`` families) and the tests train them
through each codebase's own ``tools/train.py``.
"""
from __future__ import annotations

import os
import os.path as osp

from ...demo.tiny_coco import CLASSES

#: The codebases, by package name.
CODEBASES = ('mmpretrain', 'mmpose', 'mmrotate', 'mmyolo')
#: mmrepro's two lines (``configs/_base_/repro_runtime.py``).
TWO_LINES = """
custom_imports = dict(imports=['mmrepro'], allow_failed_imports=False)
randomness = dict(seed=0, deterministic=True)
"""
#: A ResNet-18 at a quarter of its width (16-channel stem, stages of 16-128 channels), the
#: backbone of every model here: a few seconds per epoch on CPU.
NARROW_RESNET = 'depth=18, stem_channels=16, base_channels=16, init_cfg=None'
#: A rotated detector's narrow ResNet-18 and its 64-channel FPN.
_ROTATED_NECK = f"""backbone=dict({NARROW_RESNET}),
    neck=dict(in_channels=[16, 32, 64, 128], out_channels=64)"""
#: The rotated detectors' training pipeline: DOTA quadrilaterals as rotated boxes, at
#: 128 pixels, flipped at random.
_ROTATED_PIPELINE = """train_pipeline = [
    dict(type='mmdet.LoadImageFromFile'),
    dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
    dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox')),
    dict(type='mmdet.Resize', scale=(128, 128), keep_ratio=True),
    dict(type='mmdet.RandomFlip', prob=0.5, direction=['horizontal', 'vertical']),
    dict(type='mmdet.PackDetInputs')]
"""
_ROTATED_DATA = ("data_root='{data}/dota/', ann_file='annfiles/', "
                 "data_prefix=dict(img_path='images/'), "
                 f"metainfo=dict(classes={CLASSES!r}), pipeline=train_pipeline")
#: Each model: its codebase, its config's bases, its other lines (model,
#: ``train_pipeline``), its training dataset's keys (``{data}``: the output of
#: :func:`~mmrepro.demo.derive_codebase_data`; ``{coco}``: the demo dataset) and the
#: hooks its bases add (kept beside the mid-epoch checkpoints).
CONFIGS = {
    # ResNet-18 with RandAugment, RandomErasing and Mixup/CutMix batch augments (ImageNet
    # recipe of mmpretrain's Swin/DeiT configs), at 32 pixels.
    'resnet': ('mmpretrain', [
        'mmpretrain::_base_/models/resnet18.py', 'mmpretrain::_base_/schedules/imagenet_bs256.py',
        'mmpretrain::_base_/default_runtime.py'], f"""model = dict(
    backbone=dict({NARROW_RESNET}),
    head=dict(in_channels=128, num_classes=3, topk=(1, ),
              loss=dict(type='CrossEntropyLoss', loss_weight=1.0, use_soft=True)),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))
data_preprocessor = dict(num_classes=3, mean=[123.675, 116.28, 103.53],
                         std=[58.395, 57.12, 57.375], to_rgb=True)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=32, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2, total_level=10,
         magnitude_level=9, magnitude_std=0.5,
         hparams=dict(pad_val=[104, 116, 124], interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0.5, mode='rand', min_area_ratio=0.02,
         max_area_ratio=1 / 3, fill_color=[103.53, 116.28, 123.675],
         fill_std=[57.375, 57.12, 58.395]),
    dict(type='PackInputs')]
""", "type='CustomDataset', data_root='{data}', data_prefix='cls', pipeline=train_pipeline",
        ''),
    # Top-down heatmap pose (SimpleBaseline) with its random bbox transform, half body and
    # affine, at 64x64 (heatmaps 16x16).
    'topdown_heatmap': ('mmpose', [
        'mmpose::body_2d_keypoint/topdown_heatmap/coco/td-hm_res50_8xb64-210e_coco-256x192.py'],
        f"""codec = dict(type='MSRAHeatmap', input_size=(64, 64), heatmap_size=(16, 16), sigma=2)
model = dict(backbone=dict({NARROW_RESNET}),
             head=dict(in_channels=128, deconv_out_channels=(32, 32, 32), decoder=codec))
train_pipeline = [
    dict(type='LoadImage'), dict(type='GetBBoxCenterScale'),
    dict(type='RandomFlip', direction='horizontal'),
    dict(type='RandomHalfBody', prob=0.5, min_total_keypoints=4),
    dict(type='RandomBBoxTransform'),
    dict(type='TopdownAffine', input_size=codec['input_size']),
    dict(type='GenerateTarget', encoder=codec), dict(type='PackPoseInputs')]
""", "data_root='', ann_file='{data}/keypoints/train.json', "
        "data_prefix=dict(img='{coco}/images/'), pipeline=train_pipeline",
        "dict(type='SyncBuffersHook'), "),
    'rotated_retinanet': ('mmrotate', [
        'mmrotate::rotated_retinanet/rotated-retinanet-rbox-le90_r50_fpn_1x_dota.py'],
        f"""model = dict({_ROTATED_NECK},
    bbox_head=dict(num_classes=3, in_channels=64, feat_channels=64))
{_ROTATED_PIPELINE}""", _ROTATED_DATA, ''),
    'oriented_rcnn': ('mmrotate', [
        'mmrotate::oriented_rcnn/oriented-rcnn-le90_r50_fpn_1x_dota.py'],
        f"""model = dict({_ROTATED_NECK},
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(bbox_roi_extractor=dict(out_channels=64),
                  bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=3)))
{_ROTATED_PIPELINE}""", _ROTATED_DATA, ''),
    # YOLOv8-n (MMYOLO's zoo) at 64 pixels: Mosaic, YOLOv5RandomAffine and YOLOv5MixUp
    # (each drawing other samples), HSV and flips; after epoch 1 its pipeline switch
    # (MMDetection's PipelineSwitchHook) to letterboxed single images; its EMA
    # (ExpMomentumEMA) and YOLOv5ParamSchedulerHook (warm-up) from its bases.
    'yolov8': ('mmyolo', ['mmyolo::yolov8/yolov8_n_syncbn_fast_8xb16-500e_coco.py'],
               """img_scale = (64, 64)
# use_syncbn: MMYOLO's detector turns its BatchNorms into SyncBatchNorm on more than one
# rank, which runs on GPUs only; the CPU ranks here keep BatchNorm.
model = dict(use_syncbn=False, bbox_head=dict(head_module=dict(num_classes=3)),
             train_cfg=dict(assigner=dict(num_classes=3)))
load = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True)]
mosaic_affine = [
    dict(type='Mosaic', img_scale=img_scale, pad_val=114.0, pre_transform=load),
    dict(type='YOLOv5RandomAffine', max_rotate_degree=0.0, max_shear_degree=0.0,
         scaling_ratio_range=(0.5, 1.5), max_aspect_ratio=100, border=(-32, -32),
         border_val=(114, 114, 114))]
last = [dict(type='YOLOv5HSVRandomAug'), dict(type='mmdet.RandomFlip', prob=0.5),
        dict(type='mmdet.PackDetInputs', meta_keys=(
            'img_id', 'img_path', 'ori_shape', 'img_shape', 'flip', 'flip_direction'))]
train_pipeline = [*load, *mosaic_affine,
                  dict(type='YOLOv5MixUp', prob=0.5, pre_transform=[*load, *mosaic_affine]),
                  *last]
train_pipeline_stage2 = [
    *load, dict(type='YOLOv5KeepRatioResize', scale=img_scale),
    dict(type='LetterResize', scale=img_scale, allow_scale_up=True, pad_val=dict(img=114.0)),
    dict(type='YOLOv5RandomAffine', max_rotate_degree=0.0, max_shear_degree=0.0,
         scaling_ratio_range=(0.5, 1.5), max_aspect_ratio=100, border_val=(114, 114, 114)),
    *last]
""", "data_root='{coco}/', ann_file='annotations/train.json', data_prefix=dict(img='images/'), "
               f"metainfo=dict(classes={CLASSES!r}), pipeline=train_pipeline",
               "dict(type='EMAHook', ema_type='ExpMomentumEMA', momentum=0.0001, "
               "update_buffers=True, strict_load=False, priority=49), "
               "dict(type='mmdet.PipelineSwitchHook', switch_epoch=1, "
               "switch_pipeline=train_pipeline_stage2), "),
}
#: Each model's test loader and evaluator, for ``mmrepro-test`` on its checkpoints:
#: the training samples, without random transforms (keys as in :data:`CONFIGS`).
TESTS = {
    'resnet': """test_dataloader = dict(
    batch_size=2, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='CustomDataset', data_root='{data}', data_prefix='cls', pipeline=[
        dict(type='LoadImageFromFile'), dict(type='Resize', scale=(32, 32)),
        dict(type='PackInputs')]))
test_evaluator = dict(type='Accuracy', topk=(1, ))
""",
    'topdown_heatmap': """test_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root='', ann_file='{data}/keypoints/train.json', bbox_file=None,
                 data_prefix=dict(img='{coco}/images/'), pipeline=[
                     dict(type='LoadImage'), dict(type='GetBBoxCenterScale'),
                     dict(type='TopdownAffine', input_size=codec['input_size']),
                     dict(type='PackPoseInputs')]))
test_evaluator = dict(type='CocoMetric', ann_file='{data}/keypoints/train.json')
""",
    'rotated_retinanet': f"""test_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root='{{data}}/dota/', ann_file='annfiles/',
                 data_prefix=dict(img_path='images/'), metainfo=dict(classes={CLASSES!r}),
                 test_mode=True, pipeline=[
                     dict(type='mmdet.LoadImageFromFile'),
                     dict(type='mmdet.Resize', scale=(128, 128), keep_ratio=True),
                     dict(type='mmdet.LoadAnnotations', with_bbox=True, box_type='qbox'),
                     dict(type='ConvertBoxType', box_type_mapping=dict(gt_bboxes='rbox')),
                     dict(type='mmdet.PackDetInputs', meta_keys=(
                         'img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor'))]))
test_evaluator = dict(type='DOTAMetric', metric='mAP')
""",
    'yolov8': f"""test_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root='{{coco}}/', ann_file='annotations/train.json',
                 data_prefix=dict(img='images/'), metainfo=dict(classes={CLASSES!r}),
                 test_mode=True, batch_shapes_cfg=None, pipeline=[
                     dict(type='LoadImageFromFile'),
                     dict(type='YOLOv5KeepRatioResize', scale=img_scale),
                     dict(type='LetterResize', scale=img_scale, allow_scale_up=False,
                          pad_val=dict(img=114)),
                     dict(type='LoadAnnotations', with_bbox=True, _scope_='mmdet'),
                     dict(type='mmdet.PackDetInputs', meta_keys=(
                         'img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor',
                         'pad_param'))]))
test_evaluator = dict(type='mmdet.CocoMetric', ann_file='{{coco}}/annotations/train.json',
                      metric='bbox')
""",
}
#: The test runs' schedule: ``SAMPLES`` training samples in batches of 2 (4 iterations
#: an epoch), ``EPOCHS`` epochs, no validation or test; checkpoints at every epoch and
#: at iteration ``MID`` (batch 2 of epoch 2), losses logged every iteration.
SAMPLES, EPOCHS, MID = 8, 2, 6
_SCHEDULE = f"""train_cfg = dict(max_epochs={EPOCHS}, val_interval=1)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1, save_best=None),
                     logger=dict(type='LoggerHook', interval=1))
""" + ''.join(f'val_{key} = None\n' for key in ('dataloader', 'cfg', 'evaluator'))
_NO_TEST = ''.join(f'test_{key} = None\n' for key in ('dataloader', 'cfg', 'evaluator'))
#: The codebases whose ``tools/train.py`` reads every loader's dataset before training
#: (MMYOLO's checks its class names): their configs keep a test loader, and a validation
#: loop on it that the schedule never reaches (:data:`_SCRIPT_NEEDS`). And MMYOLO's
#: collate function: MMEngine gives every dict of a config inherited through
#: ``mmyolo::`` a ``_scope_`` key, and its loader passes a ``collate_fn`` dict's keys to
#: the function, which ``yolov5_collate`` refuses; the config states it again.
READS_EVERY_LOADER = ('mmyolo', )
_SCRIPT_NEEDS = f"""train_dataloader['collate_fn'] = dict(_delete_=True, type='yolov5_collate')
val_dataloader = test_dataloader
val_evaluator = test_evaluator
val_cfg = dict(type='ValLoop')
train_cfg = dict(max_epochs={EPOCHS}, val_interval={EPOCHS + 1})
"""


def write_codebase_config(model: str, coco: str, data: str, path: str, num_workers: int = 2,
                          extra: str = '', test: bool = False) -> str:
    """Write model ``model``'s config (:data:`CONFIGS`, the schedule of
    :data:`SAMPLES`, :data:`EPOCHS` and :data:`MID`, and :data:`TWO_LINES`) to ``path``,
    over the demo dataset at ``coco`` and the data
    :func:`~mmrepro.demo.derive_codebase_data` wrote to ``data``, loading with
    ``num_workers`` (persistent); ``extra`` is added last. ``test``: with the model's
    test loader and evaluator (:data:`TESTS`). Returns ``path``."""
    codebase, bases, lines, dataset, hooks = CONFIGS[model]
    its_script = _SCRIPT_NEEDS if codebase in READS_EVERY_LOADER else ''
    tested = (TESTS[model] + 'test_cfg = dict(type="TestLoop")\n' + its_script
              if test or its_script else _NO_TEST)

    def paths(text: str) -> str:
        return text.replace('{data}', osp.abspath(data)).replace('{coco}', osp.abspath(coco))

    dataset, tested = paths(dataset), paths(tested)
    loader = (f"train_dataloader = dict(batch_size=2, num_workers={num_workers}, "
              f"persistent_workers={num_workers > 0},\n"
              f"                        sampler=dict(type='DefaultSampler', shuffle=True),\n"
              f"                        dataset=dict(indices={SAMPLES}, {dataset}))\n")
    mid = (f"custom_hooks = [{hooks}dict(type='CheckpointHook', by_epoch=False, "
           f"interval={MID}, save_last=False)]\n")
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, 'w') as f:
        f.write(f'_base_ = {bases!r}\n{lines}{loader}{_SCHEDULE}{tested}{mid}{TWO_LINES}{extra}')
    return path
