"""Resume at every epoch and mid-epoch across the switch hooks: RTMDet and YOLOX identical."""
from __future__ import annotations

import os.path as osp

import pytest

from mmrepro.checks import support_matrix as sm
from mmrepro.checks.epoch_resume import check_epoch_resume

#: One process per run, 4 iterations per epoch: 4 epochs train in seconds.
FAST = ('train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
        'train_dataloader.batch_size=4')


@pytest.mark.slow
@pytest.mark.parametrize('family, switch', [
    ('rtmdet', 'PipelineSwitchHook at epoch 2'),
    ('yolox', 'YOLOXModeSwitchHook at epoch 2'),
])
def test_resumed_from_every_epoch_the_end_is_identical(family, switch, data_root,
                                                       tmp_path, monkeypatch):
    monkeypatch.setenv(sm.DATA_ENV, data_root + '/')
    result = check_epoch_resume(sm.config_path(family), str(tmp_path), 4, cfg_options=FAST,
                                mid_epoch=True)
    assert osp.isfile(tmp_path / 'from_1' / 'epoch_4.pth')
    assert osp.isfile(tmp_path / 'to_mid' / 'iter_6.pth')  # 4 iterations per epoch
    assert not osp.exists(tmp_path / 'to_mid' / 'iter_7.pth')
    for path in tmp_path.rglob('*.pth'):  # ten checkpoints with EMA and optimizer
        path.unlink()
    assert result.error is None
    assert result.switches == [switch]
    assert result.parts == ['weights', 'EMA', 'optimizer']
    assert result.differing == {}
    assert result.mid == 6
    assert result.describe() == f'yes ({switch}; also from iteration 6; weights, EMA, optimizer)'
