# The bundled demo: RetinaNet R18-FPN (random init, no download) on the generated
# tiny COCO data, 3 epochs, reproducible with mmrepro.
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    './_base_/datasets/tiny_coco.py',
    './_base_/schedule_3e_tiny.py',
    'mmdet::_base_/default_runtime.py',
    './_base_/repro_runtime.py',
]
model = dict(
    backbone=dict(depth=18, init_cfg=None),
    neck=dict(in_channels=[64, 128, 256, 512]),
    bbox_head=dict(num_classes=3),
    # Keep every scored box: 3 epochs from random init score below mmdet's 0.05, and
    # the evaluation would then have nothing to evaluate.
    test_cfg=dict(score_thr=0.0))
default_hooks = dict(logger=dict(type='LoggerHook', interval=1),
                     checkpoint=dict(type='CheckpointHook', interval=1))
log_processor = dict(type='LogProcessor', window_size=1, by_epoch=True)
