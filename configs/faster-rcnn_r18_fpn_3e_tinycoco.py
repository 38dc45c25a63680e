# Faster R-CNN R18-FPN (random init, no download) on the generated tiny COCO data.
_base_ = [
    'mmdet::_base_/models/faster-rcnn_r50_fpn.py',
    './_base_/datasets/tiny_coco.py',
    './_base_/schedule_3e_tiny.py',
    'mmdet::_base_/default_runtime.py',
    './_base_/repro_runtime.py',
]
model = dict(
    backbone=dict(depth=18, init_cfg=None),
    neck=dict(in_channels=[64, 128, 256, 512]),
    roi_head=dict(bbox_head=dict(num_classes=3)),
    # Keep every scored box (see the RetinaNet demo config).
    test_cfg=dict(rcnn=dict(score_thr=0.0)))
default_hooks = dict(logger=dict(type='LoggerHook', interval=1),
                     checkpoint=dict(type='CheckpointHook', interval=1))
log_processor = dict(type='LogProcessor', window_size=1, by_epoch=True)
