# Mask2Former (instance) R18: MSDeformAttn pixel decoder, point_sample losses.
# mmdet 3.3's config, random init, small model and data (configs/zoo/_base_/zoo_tiny.py).
_base_ = ['mmdet::mask2former/mask2former_r50_8xb2-lsj-50e_coco.py', './_base_/zoo_tiny.py']
model = dict(data_preprocessor=dict(batch_augments=[dict(
        type='BatchFixedSizePad', size=(128, 128), img_pad_value=0, pad_mask=True,
        mask_pad_value=0, pad_seg=False)]),
    backbone={{_base_.zoo_r18}},
    panoptic_head=dict(
        in_channels={{_base_.zoo_r18_channels}}, num_queries=20,
        pixel_decoder=dict(encoder=dict(num_layers=1)),
        transformer_decoder=dict(num_layers=2)),
    train_cfg=dict(num_points=256))
train_dataloader = dict(batch_size=2, num_workers=2, dataset={{_base_.zoo_dataset}})
val_dataloader = val_cfg = val_evaluator = test_dataloader = test_cfg = test_evaluator = None
