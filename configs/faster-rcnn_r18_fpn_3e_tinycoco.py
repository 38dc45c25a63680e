# Faster R-CNN R18-FPN (random init, no download) on the generated tiny COCO data.
_base_ = [
    'mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py',
    './_base_/datasets/tiny_coco.py',
    './_base_/schedule_3e_tiny.py',
    './_base_/repro_runtime.py',
]
model = dict(
    backbone=dict(depth=18, init_cfg=None),
    neck=dict(in_channels=[64, 128, 256, 512]),
    roi_head=dict(bbox_head=dict(num_classes=3)))
