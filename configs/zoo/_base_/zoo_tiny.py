# Shared by the zoo configs: the generated tiny COCO data in the shapes the families
# need, and mmrepro's keys. Every name is one that no MMDetection config defines, so a
# zoo config can list this file next to its mmdet:: base (MMEngine forbids a key in
# two bases) and take the pieces with {{_base_.name}}.
# Data root: $MMREPRO_DEMO_DATA if set (the tests), else data/demo/ (tools/make_demo_data.py).
zoo_data_root = '{{$MMREPRO_DEMO_DATA:data/demo/}}'
zoo_scale = (128, 96)
zoo_load_boxes = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True)]
zoo_load = [dict(type='LoadImageFromFile'),
            dict(type='LoadAnnotations', with_bbox=True, with_mask=True)]
zoo_dataset = dict(
    data_root=zoo_data_root, metainfo=dict(classes=('red', 'green', 'blue')),
    ann_file='annotations/train.json', data_prefix=dict(img='images/'),
    filter_cfg=dict(filter_empty_gt=True, min_size=0),
    pipeline=zoo_load + [dict(type='Resize', scale=zoo_scale, keep_ratio=True),
                         dict(type='RandomFlip', prob=0.5), dict(type='PackDetInputs')])
# YOLOX: MultiImageMixDataset's inner dataset only loads; its pipeline mixes.
zoo_inner_dataset = dict(zoo_dataset, pipeline=zoo_load_boxes)
zoo_yolox_pipeline = [
    dict(type='Mosaic', img_scale=zoo_scale, pad_val=114.0),
    dict(type='RandomAffine', scaling_ratio_range=(0.5, 1.5),
         border=(-zoo_scale[0] // 2, -zoo_scale[1] // 2)),
    dict(type='YOLOXHSVRandomAug'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Resize', scale=zoo_scale, keep_ratio=True),
    dict(type='Pad', pad_to_square=True, pad_val=dict(img=(114.0, 114.0, 114.0))),
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1, 1), keep_empty=False),
    dict(type='PackDetInputs'),
]
# RTMDet: cached mosaic and mixup, random resize and crop.
zoo_rtmdet_dataset = dict(zoo_dataset, pipeline=zoo_load_boxes + [
    dict(type='CachedMosaic', img_scale=zoo_scale, pad_val=114.0),
    dict(type='RandomResize', scale=(256, 192), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=zoo_scale),
    dict(type='YOLOXHSVRandomAug'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Pad', size=zoo_scale, pad_val=dict(img=(114, 114, 114))),
    dict(type='CachedMixUp', img_scale=zoo_scale, ratio_range=(1.0, 1.0),
         max_cached_images=10, random_pop=False, pad_val=(114, 114, 114), prob=0.5),
    dict(type='PackDetInputs'),
])
# RTMDet's second stage (PipelineSwitchHook): no mosaic or mix-up, at the zoo's scale.
zoo_rtmdet_stage2_pipeline = zoo_load_boxes + [
    dict(type='RandomResize', scale=zoo_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=zoo_scale),
    dict(type='YOLOXHSVRandomAug'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Pad', size=zoo_scale, pad_val=dict(img=(114, 114, 114))),
    dict(type='PackDetInputs'),
]
# ResNet-18 (random init) and its FPN inputs, for the families built on ResNet-50.
zoo_r18 = dict(depth=18, init_cfg=None)
zoo_r18_channels = [64, 128, 256, 512]

custom_imports = dict(imports=['mmrepro'], allow_failed_imports=False)
randomness = dict(seed=0, deterministic=True)
