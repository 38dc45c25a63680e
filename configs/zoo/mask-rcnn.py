# Mask R-CNN R18-FPN.
# mmdet 3.3's config, random init, small model and data (configs/zoo/_base_/zoo_tiny.py).
_base_ = ['mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py', './_base_/zoo_tiny.py']
model = dict(backbone={{_base_.zoo_r18}}, neck=dict(in_channels={{_base_.zoo_r18_channels}}))
train_dataloader = dict(batch_size=2, num_workers=2, dataset={{_base_.zoo_dataset}})
val_dataloader = val_cfg = val_evaluator = test_dataloader = test_cfg = test_evaluator = None
