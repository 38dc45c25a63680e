# YOLOX-tiny: Mosaic, RandomAffine, batch resizing, EMA.
# mmdet 3.3's config, random init, small model and data (configs/zoo/_base_/zoo_tiny.py).
_base_ = ['mmdet::yolox/yolox_tiny_8xb8-300e_coco.py', './_base_/zoo_tiny.py']
model = dict(data_preprocessor=dict(batch_augments=[dict(
    type='BatchSyncRandomResize', random_size_range=(96, 160), size_divisor=32, interval=2)]))
train_dataloader = dict(batch_size=2, num_workers=2, dataset=dict(
    pipeline={{_base_.zoo_yolox_pipeline}}, dataset={{_base_.zoo_inner_dataset}}))
val_dataloader = val_cfg = val_evaluator = test_dataloader = test_cfg = test_evaluator = None
