"""Resume at every epoch and mid-epoch across YOLOX's YOLOXModeSwitchHook: identical
(RTMDet: test_epoch_resume.py)."""
import pytest
from support.epoch_resume import resumed_from_every_epoch_the_end_is_identical


@pytest.mark.slow
def test_yolox_resumed_from_every_epoch_the_end_is_identical(data_root, tmp_path,
                                                             monkeypatch):
    resumed_from_every_epoch_the_end_is_identical(
        'yolox', 'YOLOXModeSwitchHook at epoch 2', data_root, tmp_path, monkeypatch)
