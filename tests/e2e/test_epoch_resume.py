"""Resume at every epoch and mid-epoch across RTMDet's PipelineSwitchHook: identical (YOLOX:
test_epoch_resume_yolox.py)."""
import pytest
from support.epoch_resume import resumed_from_every_epoch_the_end_is_identical


@pytest.mark.slow
def test_rtmdet_resumed_from_every_epoch_the_end_is_identical(data_root, tmp_path,
                                                              monkeypatch):
    resumed_from_every_epoch_the_end_is_identical(
        'rtmdet', 'PipelineSwitchHook at epoch 2', data_root, tmp_path, monkeypatch)
