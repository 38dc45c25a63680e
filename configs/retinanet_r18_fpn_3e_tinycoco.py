# The bundled demo: RetinaNet R18-FPN (random init, no download) on the generated
# tiny COCO data, 3 epochs, reproducible with mmrepro.
_base_ = [
    'mmdet::retinanet/retinanet_r50_fpn_1x_coco.py',
    './_base_/datasets/tiny_coco.py',
    './_base_/schedule_3e_tiny.py',
    './_base_/repro_runtime.py',
]
model = dict(
    backbone=dict(depth=18, init_cfg=None),
    neck=dict(in_channels=[64, 128, 256, 512]),
    bbox_head=dict(num_classes=3))
