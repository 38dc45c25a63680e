# The bundled demo with MMDetection's Albu transform: the transform list of mmdet's
# configs/albu_example (less JpegCompression, whose arguments albumentations 2 renamed)
# in that config's train pipeline, at the demo's scale. Reproducible with mmrepro, which
# keys the generators albumentations owns. Needs albumentations (pip install albumentations).
_base_ = './retinanet_r18_fpn_3e_tinycoco.py'

albu_train_transforms = [
    dict(type='ShiftScaleRotate', shift_limit=0.0625, scale_limit=0.0, rotate_limit=0,
         interpolation=1, p=0.5),
    dict(type='RandomBrightnessContrast', brightness_limit=[0.1, 0.3],
         contrast_limit=[0.1, 0.3], p=0.2),
    dict(type='OneOf', transforms=[
        dict(type='RGBShift', r_shift_limit=10, g_shift_limit=10, b_shift_limit=10, p=1.0),
        dict(type='HueSaturationValue', hue_shift_limit=20, sat_shift_limit=30,
             val_shift_limit=20, p=1.0)], p=0.1),
    dict(type='ChannelShuffle', p=0.1),
    dict(type='OneOf', transforms=[dict(type='Blur', blur_limit=3, p=1.0),
                                   dict(type='MedianBlur', blur_limit=3, p=1.0)], p=0.1),
]
train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=(160, 128), keep_ratio=True),
    dict(type='Albu', transforms=albu_train_transforms,
         bbox_params=dict(type='BboxParams', format='pascal_voc',
                          label_fields=['gt_bboxes_labels', 'gt_ignore_flags'],
                          min_visibility=0.0, filter_lost_elements=True),
         keymap={'img': 'image', 'gt_bboxes': 'bboxes'}, skip_img_without_anno=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
