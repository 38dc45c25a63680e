# DINO-4scale R18 (MultiScaleDeformableAttention, denoising queries), 1+2 layers.
# mmdet 3.3's config, random init, small model and data (configs/zoo/_base_/zoo_tiny.py).
_base_ = ['mmdet::dino/dino-4scale_r50_8xb2-12e_coco.py', './_base_/zoo_tiny.py']
model = dict(backbone={{_base_.zoo_r18}}, neck=dict(in_channels=[128, 256, 512]),
    encoder=dict(num_layers=1), decoder=dict(num_layers=2), num_queries=30)
train_dataloader = dict(batch_size=2, num_workers=2, dataset={{_base_.zoo_dataset}})
val_dataloader = val_cfg = val_evaluator = test_dataloader = test_cfg = test_evaluator = None
