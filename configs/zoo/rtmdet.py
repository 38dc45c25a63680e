# RTMDet-tiny: CSPNeXt with channel attention (AdaptiveAvgPool2d), cached mosaic, EMA.
# mmdet 3.3's config, random init, small model and data (configs/zoo/_base_/zoo_tiny.py).
_base_ = ['mmdet::rtmdet/rtmdet_tiny_8xb32-300e_coco.py', './_base_/zoo_tiny.py']
model = dict(backbone=dict(init_cfg=None))
train_dataloader = dict(batch_size=2, num_workers=2, dataset={{_base_.zoo_rtmdet_dataset}})
# mmdet's hooks, with the second stage's pipeline at the zoo's scale (mmdet's is 640).
# Scoped to mmdet, where they are registered: inherited as `mmrepro::zoo/rtmdet.py`,
# MMEngine would otherwise look them up in the scope `mmrepro`.
custom_hooks = [
    dict(type='EMAHook', ema_type='ExpMomentumEMA', momentum=0.0002, update_buffers=True,
         priority=49, _scope_='mmdet'),
    dict(type='PipelineSwitchHook', switch_epoch=280,
         switch_pipeline={{_base_.zoo_rtmdet_stage2_pipeline}}, _scope_='mmdet'),
]
val_dataloader = val_cfg = val_evaluator = test_dataloader = test_cfg = test_evaluator = None
