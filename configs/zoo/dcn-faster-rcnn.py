# Faster R-CNN with DCN in stages c3-c5 (mmcv DeformConv2dPack). BasicBlock has no
# DCN, so the backbone is a ResNet-50 at a quarter of the width.
# mmdet 3.3's config, random init, small model and data (configs/zoo/_base_/zoo_tiny.py).
_base_ = ['mmdet::dcn/faster-rcnn_r50-dconv-c3-c5_fpn_1x_coco.py', './_base_/zoo_tiny.py']
model = dict(backbone=dict(base_channels=16, init_cfg=None),
    neck=dict(in_channels={{_base_.zoo_r18_channels}}))
train_dataloader = dict(batch_size=2, num_workers=2, dataset={{_base_.zoo_dataset}})
val_dataloader = val_cfg = val_evaluator = test_dataloader = test_cfg = test_evaluator = None
