# Mask R-CNN R18-FPN (random init, no download) on the generated tiny COCO data, whose
# rectangles carry polygon masks.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    './_base_/datasets/tiny_coco.py',
    './_base_/schedule_3e_tiny.py',
    'mmdet::_base_/default_runtime.py',
    './_base_/repro_runtime.py',
]
model = dict(
    backbone=dict(depth=18, init_cfg=None),
    neck=dict(in_channels=[64, 128, 256, 512]),
    roi_head=dict(bbox_head=dict(num_classes=3), mask_head=dict(num_classes=3)))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=(160, 128), keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
default_hooks = dict(logger=dict(type='LoggerHook', interval=1),
                     checkpoint=dict(type='CheckpointHook', interval=1))
log_processor = dict(type='LogProcessor', window_size=1, by_epoch=True)
