"""Resume at every epoch and mid-epoch across a family's switch hook (RTMDet, YOLOX): the
check and what it must find. Each family's test is a file of its own, so that the test
workers can run the two (about two minutes each) side by side."""
from __future__ import annotations

import os.path as osp

from mmrepro.checks.matrix import run as sm
from mmrepro.checks.matrix.epoch_resume import run_epoch_resume_check

#: One process per run, 8 of the 16 images at 4 per batch: 2 iterations per epoch, so the
#: 4 epochs train in seconds.
FAST = ('train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
        'train_dataloader.batch_size=4')
#: Where each family's dataset takes its first 8 images (YOLOX: inside its mixing wrapper).
EIGHT_IMAGES = {'rtmdet': 'train_dataloader.dataset.indices=8',
                'yolox': 'train_dataloader.dataset.dataset.indices=8'}


def resumed_from_every_epoch_the_end_is_identical(family: str, switch: str, data_root: str,
                                                  tmp_path, monkeypatch) -> None:
    """Train ``family`` 4 epochs, resume from every epoch and from iteration 3: the same
    weights, EMA and optimizer state; ``switch`` is the hook that changes the pipeline."""
    monkeypatch.setenv(sm.DATA_ENV, data_root + '/')
    result = run_epoch_resume_check(sm.config_path(family), str(tmp_path), 4,
                                    cfg_options=(*FAST, EIGHT_IMAGES[family]), mid_epoch=True)
    assert osp.isfile(tmp_path / 'from_1' / 'epoch_4.pth')
    assert osp.isfile(tmp_path / 'to_mid' / 'iter_3.pth')  # 2 iterations per epoch
    assert not osp.exists(tmp_path / 'to_mid' / 'iter_4.pth')
    for path in tmp_path.rglob('*.pth'):  # ten checkpoints with EMA and optimizer
        path.unlink()
    assert result.error is None
    assert result.switches == [switch]
    assert result.parts == ['weights', 'EMA', 'optimizer']
    assert result.differing == {}
    assert result.mid == 3
    assert result.describe() == f'yes ({switch}; also from iteration 3; weights, EMA, optimizer)'
