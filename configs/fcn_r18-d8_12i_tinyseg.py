# MMSegmentation FCN on ResNet-18 (random init, no download) on the generated tiny
# segmentation data (mmrepro.demo.make_tiny_seg), with IterBasedTrainLoop and
# InfiniteSampler: 12 iterations, a checkpoint every 6.
_base_ = [
    'mmseg::_base_/models/fcn_r50-d8.py',
    'mmseg::_base_/default_runtime.py',
    './_base_/repro_runtime.py',
]
norm_cfg = dict(type='BN', requires_grad=True)  # SyncBN needs several GPUs
crop_size = (48, 48)
model = dict(
    pretrained=None,
    data_preprocessor=dict(size=crop_size),
    backbone=dict(depth=18, norm_cfg=norm_cfg),
    decode_head=dict(in_channels=512, channels=64, num_classes=4, norm_cfg=norm_cfg),
    auxiliary_head=None)
data_root = 'data/tinyseg/'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomResize', scale=(64, 64), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type='BaseSegDataset',
        metainfo=dict(classes=('background', 'red', 'green', 'blue')),
        data_root=data_root,
        data_prefix=dict(img_path='img_dir/train', seg_map_path='ann_dir/train'),
        img_suffix='.png', seg_map_suffix='.png',
        pipeline=train_pipeline))
val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
optim_wrapper = dict(type='OptimWrapper',
                     optimizer=dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=5e-4))
param_scheduler = [dict(type='MultiStepLR', by_epoch=False, milestones=[8], gamma=0.1)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=12, val_interval=1000)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=6))
log_processor = dict(by_epoch=False, window_size=1)
