# A 3-epoch schedule for the tiny demo data (8 iterations per epoch at batch 2).
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=3, val_interval=3)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
param_scheduler = [dict(type='MultiStepLR', by_epoch=True, milestones=[2], gamma=0.1)]
optim_wrapper = dict(type='OptimWrapper',
                     optimizer=dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=0.0001))
auto_scale_lr = dict(enable=False, base_batch_size=2)
